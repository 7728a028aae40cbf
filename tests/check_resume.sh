#!/usr/bin/env bash
# sparsepush-train checkpoints (ctest runs each mode):
#   check_resume.sh kill EXE DIR         a run SIGKILLed after its first checkpoint, resumed with
#                                        --resume, ends with the uninterrupted run's summary (every
#                                        field but timing and buffer capacity), and the same log rows
#   check_resume.sh tracking EXE DIR     the kill case for CHOCO-Push with gradient tracking on a
#                                        directed time-varying schedule (link references, trackers)
#   check_resume.sh quasi-global EXE DIR the kill case for SGP with quasi-global Nesterov momentum
#                                        (each node's previous model and rate)
#   check_resume.sh policy EXE DIR       the kill case for CHOCO-Push under --staleness 2 with its
#                                        delays on a directed time-varying schedule (a checkpoint
#                                        drains what is in flight, so the uninterrupted run
#                                        checkpoints at the same rounds)
#   check_resume.sh mpi EXE DIR MPIRUN.. the same with 3 ranks under mpirun (the whole job killed)
#   check_resume.sh tracking-mpi EXE DIR MPIRUN..  the tracking case with 3 ranks under mpirun (the
#                                        trackers on a second MPI network)
#   check_resume.sh bad EXE DIR          a truncated, corrupted or mismatched checkpoint (a QSGD
#                                        stream among the settings), or a missing one, is exit
#                                        code 2 and a message naming it
#   check_resume.sh v0.6 EXE DIR TAR.GZ  the checkpoint of an older version (tests/data/README.md:
#                                        checkpoint-0.6.1.tar.gz), resumed, ends with the summary
#                                        of an uninterrupted run of EXE (every field but timing)
set -euo pipefail
mode="$1"; exe="$2"; dir="$3"; shift 3
launcher=("$@")
full_extra=() resume_extra=()  # what the uninterrupted run and the resumes add
args=(--nodes 6 --model mlp --epochs 0.4 --eval-samples 300 --algorithm scsp --final-rounds 4
      --drop-probability 0.1 --eval-every 9)
if [ "$mode" = tracking ] || [ "$mode" = tracking-mpi ]; then
  args=(--nodes 6 --model mlp --epochs 0.4 --eval-samples 300 --algorithm choco-push --tracking --schedule random:1
        --eval-every 9)
  if [ "$mode" = tracking ]; then mode=kill; else mode=mpi; fi
elif [ "$mode" = policy ]; then
  args=(--nodes 6 --model mlp --epochs 0.4 --eval-samples 300 --algorithm choco-push --compressor top-k:0.05
        --staleness 2 --schedule random:1 --eval-every 9)
  full_extra=(--checkpoint "$dir/ck-full" --checkpoint-every 5)
  resume_extra=(--checkpoint-every 5)
  mode=kill
elif [ "$mode" = quasi-global ]; then
  args=(--nodes 6 --model mlp --epochs 0.4 --eval-samples 300 --algorithm sgp --momentum-kind quasi-global --nesterov
        --lr-schedule cosine --eval-every 9)
  mode=kill
fi
rm -rf "$dir"; mkdir -p "$dir"

fail() { echo "check_resume: $*" >&2; exit 1; }
# SIGKILL every process of session $1 (mpirun's ranks too), from /proc: no procps needed
kill_session() {
  local sid="$1" f rest
  for f in /proc/[0-9]*/stat; do
    rest=$(cat "$f" 2> /dev/null) || continue
    rest="${rest##*) }"            # fields after "pid (comm) "
    set -- $rest                   # state ppid pgrp session ...
    [ "${4:-}" = "$sid" ] && kill -KILL "${f//[!0-9]/}" 2> /dev/null || true
  done
}
# the summary without the fields that measure time or buffer capacity, or say where it ran
# (wait_seconds_per_rank, a time by rank, is an array over several lines)
strip() {
  sed -E '/"wait_seconds_per_rank": \[$/,/\]/d; /"wait_seconds_per_rank"/d' "$1" |
    grep -vE '"(wall_seconds|train_seconds|eval_seconds|final_eval_seconds|startup_seconds|time_to_target_seconds|train_seconds_to_target|eval_seconds_to_target|train_images_per_second|state_bytes_per_node|ranks|transport|eval_bytes|final_eval_bytes)"'
}
# the log without its wall-clock column
strip_log() { cut -d, -f1-10 "$1"; }

# refused "what stderr must say" ARGS...: "$exe" "${args[@]}" ARGS exits with code 2 and the message
source "$(dirname "${BASH_SOURCE[0]}")/expect_exit_2.sh"
EXPECT_DIR="$dir"
refused() { expect_exit_2 "$1" "$exe" "${args[@]}" "${@:2}"; }

case "$mode" in
  kill|mpi)
    run=("$exe")
    extra=()
    if [ "$mode" = mpi ]; then run=("${launcher[@]}" -n 3 "$exe"); extra=(--transport mpi); fi
    "$exe" "${args[@]}" "${full_extra[@]}" --summary "$dir/full.json" --log "$dir/full.csv" > /dev/null
    # the run to kill: checkpoints every 5 rounds; killed (the whole process group) as soon as the
    # first manifest exists, which may be in the middle of writing the next checkpoint
    setsid "${run[@]}" "${args[@]}" "${extra[@]}" --checkpoint "$dir/ck" --checkpoint-every 5 \
      --summary "$dir/killed.json" --log "$dir/resumed.csv" > "$dir/killed.out" 2>&1 &
    pid=$!
    for _ in $(seq 1 6000); do
      [ -e "$dir/ck/manifest" ] && break
      kill -0 "$pid" 2> /dev/null || break
      sleep 0.02
    done
    [ -e "$dir/ck/manifest" ] || fail "no checkpoint was written: $(cat "$dir/killed.out")"
    kill_session "$pid"
    wait "$pid" 2> /dev/null || true
    sleep 0.5
    kill_session "$pid"  # anything that was starting up
    [ ! -s "$dir/killed.json" ] || fail "the run finished before it was killed; nothing was tested"
    ls "$dir/ck"
    "${run[@]}" "${args[@]}" "${extra[@]}" "${resume_extra[@]}" --resume "$dir/ck" --summary "$dir/resumed.json" \
      --log "$dir/resumed.csv" > "$dir/resumed.out"
    grep "resumed from" "$dir/resumed.out"
    diff <(strip "$dir/full.json") <(strip "$dir/resumed.json") || fail "the resumed summary differs"
    diff <(strip_log "$dir/full.csv") <(strip_log "$dir/resumed.csv") || fail "the resumed log differs"
    # the checkpoint the resume started from is kept: the same resume again gives the same run
    first=$(sed -n 's/^resumed from .* at round \([0-9]*\)$/\1/p' "$dir/resumed.out")
    [ -e "$dir/ck/round-$first.rank-0.ckpt" ] || fail "the checkpoint of round $first that the resume started from is gone"
    "${run[@]}" "${args[@]}" "${extra[@]}" "${resume_extra[@]}" --resume "$dir/ck" --resume-round "$first" \
      --summary "$dir/again.json" > "$dir/again.out"
    grep "resumed from .* at round $first\$" "$dir/again.out" || fail "the second resume did not start at round $first"
    diff <(strip "$dir/full.json") <(strip "$dir/again.json") || fail "the repeated resume's summary differs"
    echo "ok: killed and resumed ($mode): summary and log identical to the uninterrupted run, and again from round $first"
    ;;
  bad)
    "$exe" "${args[@]}" --checkpoint "$dir/ck" --checkpoint-every 10 > /dev/null
    f=$(ls "$dir"/ck/round-*.rank-0.ckpt | sort -V | tail -1)
    cp -r "$dir/ck" "$dir/good"
    refused "--resume $dir/nothing: no such directory" --resume "$dir/nothing"
    [ ! -e "$dir/nothing" ] || fail "--resume created the directory"
    mkdir "$dir/empty"
    refused "no checkpoint there" --resume "$dir/empty"
    refused "--checkpoint-every needs --checkpoint" --checkpoint-every 5
    refused "other settings: lr=0.02 (now 0.05)" --resume "$dir/ck" --lr 0.05
    # every number is compared by its bits (6 decimals used to let these through)
    refused "other settings: lr=0.02 (now 0.0200001)" --resume "$dir/ck" --lr 0.0200001
    refused "other settings: momentum=0.9 (now 0.9000000001)" --resume "$dir/ck" --momentum 0.9000000001
    refused "other settings: seed=1 (now 2)" --resume "$dir/ck" --seed 2
    # the training precision is a setting: an fp32 checkpoint does not resume as int8 training
    refused "other settings: bits=0 (now 8)" --resume "$dir/ck" --precision int8   # full precision, not "(absent)"
    refused "cannot create the checkpoint directory /proc/no-such-dir" --checkpoint /proc/no-such-dir
    head -c 1000 "$f" > "$f.cut" && mv "$f.cut" "$f"
    refused "truncated" --resume "$dir/ck"
    rm -rf "$dir/ck"; cp -r "$dir/good" "$dir/ck"
    printf '\xff' | dd of="$f" bs=1 seek=5000 conv=notrunc status=none
    refused "fails its CRC-32 check (corrupted)" --resume "$dir/ck"
    rm -rf "$dir/ck"; cp -r "$dir/good" "$dir/ck"
    printf 'X' | dd of="$dir/ck/manifest" bs=1 seek=0 conv=notrunc status=none
    refused "is not a sparsepush checkpoint (bad magic)" --resume "$dir/ck"
    rm -rf "$dir/ck"; cp -r "$dir/good" "$dir/ck"
    rm "$f"
    refused "cannot open $f" --resume "$dir/ck"
    # QSGD's random stream is a setting: philox10 (0.3.3's bits) records 0.3.3's text
    # "qsgd:4096", so a 0.3.3 checkpoint resumes under qsgd:4096:philox10 and is refused under
    # qsgd:4096 (philox7 now). SP without loss: coarser levels diverge on this model
    args=(--nodes 6 --model mlp --epochs 0.4 --eval-samples 300 --eval-every 9 --algorithm sp)
    "$exe" "${args[@]}" --compressor qsgd:4096:philox10 --checkpoint "$dir/q" --checkpoint-every 10 > /dev/null
    grep -aq 'compressor=qsgd:4096;' "$dir/q/manifest" || fail "the manifest does not record qsgd:4096"
    refused "other settings: compressor=qsgd:4096 (now qsgd:4096:philox7)" --resume "$dir/q" --compressor qsgd:4096
    "$exe" "${args[@]}" --compressor qsgd:4096:philox10 --resume "$dir/q" > /dev/null ||
      fail "a qsgd:4096:philox10 checkpoint does not resume under qsgd:4096:philox10"
    echo "ok: every bad checkpoint is exit code 2 with a message"
    ;;
  v0.6)
    # the options the checkpoint was written with (tests/data/README.md)
    args=(--model cnn --nodes 2 --epochs 0.01 --eval-samples 100 --final-eval-samples 100 --threads 1)
    tar -xzf "${launcher[0]}" -C "$dir"
    ck="$dir/checkpoint-0.6.1"
    [ -e "$ck/manifest" ] || fail "${launcher[0]} holds no checkpoint-0.6.1/manifest"
    "$exe" "${args[@]}" --summary "$dir/full.json" > /dev/null
    "$exe" "${args[@]}" --resume "$ck" --checkpoint-every 5 --summary "$dir/resumed.json" > "$dir/resumed.out" ||
      fail "the 0.6.1 checkpoint does not resume: $(cat "$dir/resumed.out")"
    grep "resumed from .* at round 5\$" "$dir/resumed.out" || fail "the run did not resume at round 5: $(cat "$dir/resumed.out")"
    for f in avg_test_accuracy averaged_model_test_accuracy param_divergence bytes_sent_total rounds weight_mass; do
      grep -q "\"$f\"" "$dir/full.json" || fail "the summary has no field $f"
    done
    diff <(strip "$dir/full.json") <(strip "$dir/resumed.json") || fail "the summary resumed from 0.6.1 differs"
    echo "ok: a checkpoint of sparsepush-train 0.6.1 resumes to the uninterrupted run's summary"
    ;;
  *) fail "usage: check_resume.sh kill|tracking|quasi-global|mpi|bad|v0.6 EXE DIR [MPIRUN...|TAR.GZ]" ;;
esac
