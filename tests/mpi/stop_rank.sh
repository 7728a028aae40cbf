#!/usr/bin/env bash
# A rank that stops (SIGSTOP: alive, holding its connections, never answering) must not hang an
# MPI run: the other ranks give up after --mpi-timeout, wherever they wait (an envelope, the
# gather of the losses, the evaluation's sums), name the timeout, and the job ends non-zero.
# Usage: stop_rank.sh RANK EXE DIR MPIEXEC [MPIEXEC FLAGS...]
#   RANK: the rank to stop (of 3); EXE: sparsepush-train; DIR: scratch directory.
set -uo pipefail
rank="$1"; exe="$2"; dir="$3"; shift 3
launcher=("$@")
timeout_s=5   # --mpi-timeout
bound_s=60    # from SIGSTOP to the end of mpirun: the timeout, the abort, the teardown
rm -rf "$dir"; mkdir -p "$dir"
out="$dir/out.txt"

fail() { echo "stop_rank: $*" >&2; echo "--- output:" >&2; cat "$out" >&2; exit 1; }
# mpirun (PID $sid, the leader of its own session), every process of that session and every
# descendant of mpirun (should a launcher start its ranks in a session of their own), from /proc:
# no procps needed
sid=""
pids_of_job() {
  local f rest p pp s e list=" $sid " changed=1
  local -a procs=()
  for f in /proc/[0-9]*/stat; do
    rest=$(cat "$f" 2> /dev/null) || continue
    p="${f#/proc/}"; p="${p%/stat}"
    rest="${rest##*) }"  # the fields after "pid (comm) ": state ppid pgrp session ...
    read -r _ pp _ s _ <<< "$rest"
    procs+=("$p $pp $s")
  done
  while [ "$changed" = 1 ]; do
    changed=0
    for e in "${procs[@]}"; do
      read -r p pp s <<< "$e"
      [[ "$list" == *" $p "* ]] && continue
      if [ "$s" = "$sid" ] || [[ "$list" == *" $pp "* ]]; then list+="$p "; changed=1; fi
    done
  done
  echo $list
}
cleanup() {  # whatever happened: nothing this test started survives it, stopped or not
  [ -n "$sid" ] || return 0
  local p
  for p in $(pids_of_job); do kill -CONT "$p" 2> /dev/null; kill -KILL "$p" 2> /dev/null; done
  return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

setsid "${launcher[@]}" -n 3 "$exe" --transport mpi --model mlp --nodes 6 --epochs 0.3 --eval-every 2 \
  --mpi-timeout "$timeout_s" --eval-samples 200 --threads 1 > "$out" 2>&1 &
pid=$!
sid=$pid  # setsid execs mpirun in a new session whose id is its PID

# wait for progress: the run is in its rounds, every rank past its set-up
for _ in $(seq 1 3000); do
  grep -q '^round ' "$out" && break
  kill -0 "$pid" 2> /dev/null || fail "mpirun ended before any progress"
  sleep 0.02
done
grep -q '^round ' "$out" || fail "no progress line within 60 s"

# the sparsepush-train process of rank $rank: a process of the session with that rank in its environment
victim=""
for p in $(pids_of_job); do
  [ "$(cat "/proc/$p/comm" 2> /dev/null)" = "$(basename "$exe" | cut -c1-15)" ] || continue
  if tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qxE "(OMPI_COMM_WORLD_RANK|PMI_RANK)=$rank"; then victim=$p; fi
done
[ -n "$victim" ] || fail "no process of rank $rank found"
kill -STOP "$victim" || fail "cannot stop PID $victim"
t0=$(date +%s.%N)
echo "stop_rank: stopped rank $rank (PID $victim) after: $(grep '^round ' "$out" | tail -1)"

# mpirun must end by itself within the bound
ended=0
for _ in $(seq 1 $((bound_s * 10))); do
  if ! kill -0 "$pid" 2> /dev/null; then ended=1; break; fi
  sleep 0.1
done
t1=$(date +%s.%N)
elapsed=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
[ "$ended" = 1 ] || fail "mpirun still runs ${bound_s} s after rank $rank was stopped (a hang)"
wait "$pid"
rc=$?
[ "$rc" -ne 0 ] || fail "mpirun exited 0 with rank $rank stopped"
grep -qE "(waited|within) ${timeout_s}000 ms" "$out" || fail "the output does not name the ${timeout_s}000 ms timeout"
# the stopped rank too: MPI_Abort's SIGKILL ends a stopped process (Open MPI 4.1: within a second
# of mpirun's exit); a rank left stopped would hold its memory and GPU forever
gone=0
for _ in $(seq 1 100); do
  state=$(cat "/proc/$victim/stat" 2> /dev/null) || { gone=1; break; }
  state="${state##*) }"
  [ "${state%% *}" = Z ] && { gone=1; break; }  # killed, not yet reaped
  sleep 0.1
done
[ "$gone" = 1 ] || fail "the stopped rank (PID $victim) outlived mpirun by 10 s"
echo "--- output:"; cat "$out"
echo "stop_rank: rank $rank stopped: mpirun exited $rc after ${elapsed} s, naming the timeout: ok"
