#!/usr/bin/env bash
# sparsepush-train under hostile conditions: each case is one ctest (train_fault_CASE). Usage:
#   check_faults.sh CASE EXE DIR [MPIRUN...]
# Every case must end with a clear error (exit code 2, a message naming the file or option) or
# the right result, never hang, crash, lose output silently or touch what it must not. A case that
# needs what this machine cannot give (mounting a tmpfs) exits 77 with the reason (ctest: skipped).
set -euo pipefail
# expect_exit_2 "what stderr must say" ARGS...: exit code 2 within 60 s and the message
source "$(dirname "${BASH_SOURCE[0]}")/expect_exit_2.sh"
case_="$1"; exe="$2"; dir="$3"; shift 3
launcher=("$@")
rm -rf "$dir"; mkdir -p "$dir"; cd "$dir"
base=(--model mlp --eval-samples 100 --final-eval-samples 200 --threads 1)
short=("${base[@]}" --nodes 4 --epochs 0.01)

fail() { echo "check_faults $case_: $*" >&2; exit 1; }
sum() { cksum "$1" | cut -d' ' -f1,2; }

case "$case_" in
  dev_full)  # a device is not a file: refused before round 0, nothing printed as written
    expect_exit_2 "--summary /dev/full is a character device, not a regular file" "$exe" "${short[@]}" --summary /dev/full
    expect_exit_2 "--log /dev/full is a character device, not a regular file" "$exe" "${short[@]}" --log /dev/full --summary s.json
    # gnuplot would read /dev/zero for ever
    expect_exit_2 "--log /dev/zero is a character device" "$exe" "${short[@]}" --log /dev/zero --plot p.png
    [ ! -e s.json ] && [ ! -e p.png ] || fail "an output was created by a refused run"
    ;;
  fifo)  # a FIFO where a file is meant blocks in open(): refused instead
    mkfifo pipe
    expect_exit_2 "--log pipe is a FIFO, not a regular file" "$exe" "${short[@]}" --log pipe
    expect_exit_2 "--summary pipe is a FIFO" "$exe" "${short[@]}" --summary pipe
    # a FIFO as a data file and as a rank checkpoint file
    mkdir data
    for f in /usr/share/datasets/fashion-mnist/*.gz; do ln -s "$f" data/; done
    rm data/t10k-labels-idx1-ubyte.gz; mkfifo data/t10k-labels-idx1-ubyte.gz
    expect_exit_2 "t10k-labels-idx1-ubyte.gz is not a regular file" "$exe" "${short[@]}" --data data
    "$exe" "${base[@]}" --nodes 4 --algorithm sp --epochs 0.02 --eval-every 2 --checkpoint ck > /dev/null
    f=$(ls ck/round-*.rank-0.ckpt | sort -V | tail -1)  # the manifest's round
    rm "$f"; mkfifo "$f"
    expect_exit_2 "is not a regular file" "$exe" "${base[@]}" --nodes 4 --algorithm sp --epochs 0.02 --eval-every 2 --resume ck
    ;;
  disk_full)  # a full file system: every output failure is exit 2 naming the file; results still printed
    mkdir mnt
    if ! mount -t tmpfs -o size=64k tmpfs mnt 2> mount.err; then
      echo "skipped: cannot mount a tmpfs here ($(cat mount.err))"; exit 77
    fi
    trap 'umount "$dir/mnt" 2> /dev/null || true' EXIT
    dd if=/dev/zero of=mnt/fill bs=1k count=64 status=none 2> /dev/null || true
    set +e
    timeout -s KILL 120 "$exe" "${short[@]}" --algorithm sp --eval-every 1 --log mnt/log.csv --summary mnt/s.json \
      --plot mnt/p.png > out.txt 2> err.txt
    rc=$?
    set -e
    cat err.txt
    [ "$rc" -eq 2 ] || fail "exit code $rc (want 2)"
    grep -qF "cannot write the log file mnt/log.csv: No space left on device" err.txt || fail "no log error"
    grep -qF "cannot write the summary file mnt/s.json: No space left on device" err.txt || fail "no summary error"
    grep -qF "the plot mnt/p.png was not" err.txt || fail "no plot error"
    grep -q '"averaged_model_test_accuracy"' out.txt || fail "the results were not printed on stdout"
    ! grep -q "plot written" out.txt || fail "claims a plot was written"
    # room for the log only: the summary still fails, alone
    rm -f mnt/*; dd if=/dev/zero of=mnt/fill bs=1k count=60 status=none 2> /dev/null || true
    set +e
    "$exe" "${short[@]}" --algorithm sp --eval-every 1 --log mnt/log.csv --summary mnt/s.json > out.txt 2> err.txt
    rc=$?
    set -e
    echo "second run: exit $rc: $(cat err.txt)"
    [ "$rc" -eq 0 ] || grep -qF "mnt/" err.txt || fail "exit $rc without naming a file"
    ;;
  same_path)  # one file named as two outputs: refused, the file untouched
    printf 'keep me\n' > same.txt
    before=$(sum same.txt)
    expect_exit_2 "--log same.txt and --summary same.txt name the same file" "$exe" "${short[@]}" --log same.txt --summary same.txt
    expect_exit_2 "--log x and --plot x name the same file" "$exe" "${short[@]}" --log x --plot x
    expect_exit_2 "name the same file" "$exe" "${short[@]}" --log ./same.txt --summary ../"$(basename "$dir")"/same.txt
    ln -s same.txt link.txt
    expect_exit_2 "name the same file" "$exe" "${short[@]}" --log link.txt --summary same.txt
    # an output that is an input: a --data file (copies: a failing check must not hit the system's)
    mkdir data
    cp /usr/share/datasets/fashion-mnist/*.gz data/
    expect_exit_2 "--summary data/t10k-labels-idx1-ubyte.gz and --data's data/t10k-labels-idx1-ubyte.gz name the same file" \
      "$exe" "${short[@]}" --data data --summary data/t10k-labels-idx1-ubyte.gz
    [ "$(sum same.txt)" = "$before" ] || fail "same.txt was changed"
    ;;
  log_kept)  # a run refused late, or a resume that fails, leaves an existing log as it was
    args=("${base[@]}" --nodes 4 --algorithm sp --epochs 0.03 --eval-every 1)
    "$exe" "${args[@]}" --log log.csv --checkpoint ck --checkpoint-every 3 > /dev/null
    before=$(sum log.csv); lines=$(wc -l < log.csv)
    [ "$lines" -gt 5 ] || fail "the log has only $lines lines"
    expect_exit_2 "unknown schedule 'foo'" "$exe" "${args[@]}" --log log.csv --schedule foo
    [ "$(sum log.csv)" = "$before" ] || fail "a refused --schedule changed the log"
    f=$(ls ck/round-*.rank-0.ckpt | sort -V | tail -1)  # the manifest's round
    printf '\xff' | dd of="$f" bs=1 seek=200 conv=notrunc status=none
    expect_exit_2 "CRC-32" "$exe" "${args[@]}" --log log.csv --resume ck
    [ "$(sum log.csv)" = "$before" ] || fail "a failed resume changed the log ($(wc -l < log.csv) of $lines lines left)"
    ;;
  checkpoint_lock)  # two runs on one checkpoint directory: the second is refused, naming the first
    args=("${base[@]}" --nodes 4 --algorithm sp --epochs 0.3 --eval-every 5 --checkpoint ck --checkpoint-every 1)
    "$exe" "${args[@]}" > first.out 2>&1 &
    first=$!
    for _ in $(seq 1 3000); do [ -e ck/manifest ] && break; sleep 0.02; done
    [ -e ck/manifest ] || { kill "$first"; fail "the first run wrote no checkpoint: $(cat first.out)"; }
    expect_exit_2 "is in use by process $first" "$exe" "${args[@]}"
    kill "$first" 2> /dev/null || true; wait "$first" 2> /dev/null || true
    ;;
  bad_paths)  # file names too long, symlink loops, a file as a directory: exit 2 naming the path, no abort
    long=$(printf 'c%.0s' $(seq 1 300))
    expect_exit_2 "$long" "$exe" "${short[@]}" --checkpoint "$long"
    ln -s loop1 loop2; ln -s loop2 loop1
    expect_exit_2 "--resume loop1" "$exe" "${short[@]}" --resume loop1
    expect_exit_2 "--resume missingdir: no such directory" "$exe" "${short[@]}" --resume missingdir
    [ ! -e missingdir ] || fail "--resume created the missing directory"
    touch afile
    expect_exit_2 "--resume afile is a file, not a directory" "$exe" "${short[@]}" --resume afile
    expect_exit_2 "--log $long/x.csv" "$exe" "${short[@]}" --log "$long/x.csv"
    ;;
  scsp_loss)  # SCSP's exact count does not hold under loss: said, and no bound in the summary
    "$exe" "${base[@]}" --nodes 4 --epochs 0.02 --drop-probability 0.3 --summary s.json > out.txt
    grep -F "final param_divergence is measured, not bounded" out.txt || fail "no word on the loss: $(cat out.txt)"
    grep -q '"final_rounds_bound": null' s.json || fail "a bound is claimed under loss: $(grep bound s.json)"
    ;;
  resume_final_phase)  # a resume inside SCSP's final rounds ends with the uninterrupted summary, twice
    strip() {  # the times (wait_seconds_per_rank: an array over several lines) and the buffers' capacity
      sed -E '/"wait_seconds_per_rank": \[$/,/\]/d; /"wait_seconds_per_rank"/d' "$1" |
        grep -vE '"(wall_seconds|train_seconds|eval_seconds|final_eval_seconds|startup_seconds|time_to_target_seconds|train_seconds_to_target|eval_seconds_to_target|train_images_per_second|state_bytes_per_node)"'
    }
    args=("${base[@]}" --nodes 4 --epochs 0.02 --final-rounds 4 --drop-probability 0.1 --eval-every 2)
    "$exe" "${args[@]}" --summary full.json > full.out
    rounds=$(sed -n 's/.*"rounds": \([0-9]*\).*/\1/p' full.json)
    [ "$rounds" = 13 ] || fail "expected 9 + 4 rounds, the run has $rounds"
    "$exe" "${args[@]}" --checkpoint ck --checkpoint-every 10 > /dev/null  # its last checkpoint: round 10, inside the final rounds
    # resumed at 10, it checkpoints again at 12 (at every evaluation) and keeps round 10's files:
    # --resume-round 10 repeats it, a plain resume starts at 12; all end as the uninterrupted run
    for again in "10|" "10|--resume-round 10" "12|"; do
      at=${again%%|*}; extra=${again#*|}
      # shellcheck disable=SC2086
      "$exe" "${args[@]}" --resume ck $extra --summary "resumed$at.json" > "resumed$at.out"
      grep -F "resumed from ck at round $at" "resumed$at.out" || fail "resume $again did not start at round $at: $(cat "resumed$at.out")"
      diff <(strip full.json) <(strip "resumed$at.json") || fail "resume $again: the summary differs"
    done
    grep -q '"bytes_final_phase": [0-9]' full.json || fail "no bytes_final_phase"
    ;;
  plot_fails)  # a gnuplot that fails or writes nothing: exit 2 naming the plot, never "plot written"
    mkdir bin
    for kind in fail empty; do
      if [ "$kind" = fail ]; then printf '#!/bin/sh\nexit 3\n' > bin/gnuplot; want="gnuplot exited with code 3"
      else printf '#!/bin/sh\nexit 0\n' > bin/gnuplot; want="gnuplot wrote nothing there"; fi
      chmod +x bin/gnuplot
      PATH="$dir/bin:$PATH" expect_exit_2 "the plot p.png was not written: $want" "$exe" "${short[@]}" --log l.csv --plot p.png --summary s.json
      ! grep -q "plot written" out.txt || fail "claims the plot was written"
      [ -s s.json ] && [ -s l.csv ] || fail "the other outputs were not written"
    done
    ;;
  unused_settings)  # what a run does not use is refused, and never written into the summary
    "$exe" "${short[@]}" --algorithm centralized --summary c.json > /dev/null
    for k in schedule compressor eta loss_recovery; do
      grep -q "\"$k\": null" c.json || fail "the centralized summary lists $k: $(grep "\"$k\"" c.json)"
    done
    "$exe" "${short[@]}" --algorithm sgp --summary g.json > /dev/null
    grep -q '"compressor": "identity"' g.json || fail "sgp's summary names another compressor"
    ;;
  mpi_bad_output)  # an error on rank 0 before round 0 ends every rank with exit 2, no hang
    for bad in "--summary /nonexistent/x.json" "--log /nonexistent/x.csv" "--resume missingdir"; do
      # shellcheck disable=SC2086
      expect_exit_2 "${bad#* }" "${launcher[@]}" -n 3 "$exe" "${base[@]}" --epochs 0.01 --nodes 6 --transport mpi --mpi-timeout 10 $bad
    done
    expect_exit_2 "more ranks than nodes" "${launcher[@]}" -n 4 "$exe" "${base[@]}" --epochs 0.01 --nodes 3 --transport mpi
    ;;
  mpi_without_transport)  # mpirun without --transport mpi: each rank would run the whole job
    expect_exit_2 "add --transport mpi" "${launcher[@]}" -n 2 "$exe" "${short[@]}" --summary s.json
    [ ! -e s.json ] || fail "a summary was written"
    ;;
  *) fail "unknown case" ;;
esac
echo "check_faults $case_: ok"
