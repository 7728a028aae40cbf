#!/usr/bin/env bash
# The testbed's input checks (bench/net/testbed.sh). Every bad variable or argument must be
# refused with exit status 2, nothing on stdout and one line on stderr that names it and its
# value, and nothing may be made or removed: no namespace, no /etc/netns entry, no state
# directory, and a directory of someone else's given as SPARSEPUSH_TESTBED_STATE keeps every
# file. These run without root: the script checks its inputs before it asks for root.
# Then, as root where network namespaces can be made (and without --inputs-only), a testbed of
# its own (prefix spck, the private 10.213.79.0/24, its state in a scratch directory) goes up
# with 2 hosts, is refused bad inputs while up without being disturbed, and comes down leaving
# no namespace, no /etc/netns entry and no state behind.
# Usage: check_testbed_inputs.sh [--inputs-only]
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
testbed="$here/testbed.sh"
inputs_only=0
case "${1-}" in
  "") ;;
  --inputs-only) inputs_only=1 ;;
  *) echo "usage: $0 [--inputs-only]" >&2; exit 2 ;;
esac

scratch="$(mktemp -d /tmp/sparsepush-testbed-check.XXXXXX)"
state="$scratch/state"
# A testbed of its own beside any other (sptb, the CI smoke test's spci): private addresses only.
base=(SPARSEPUSH_TESTBED_PREFIX=spck SPARSEPUSH_TESTBED_NET=10.213.79 "SPARSEPUSH_TESTBED_STATE=$state")
etc_netns_before=no
[ -d /etc/netns ] && etc_netns_before=yes
cleanup() {
  env "${base[@]}" bash "$testbed" down >/dev/null 2>&1
  rm -f "$state/user-note"
  env "${base[@]}" bash "$testbed" down >/dev/null 2>&1
  rm -rf "$scratch"  # made above by mktemp: everything in it is this script's
}
trap cleanup EXIT

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok: $*"; }
bad() { failed=$((failed + 1)); echo "FAILED: $*"; }

# Everything testbed.sh could make or remove: namespaces (and their links and qdiscs), /etc/netns,
# the default state directories, and the scratch directory with every entry's type, size, link
# target and content. Few processes: it runs twice for every refusal. The default testbed (sptb)
# and the smoke test's (spci) are left out: ctest -j may run net_testbed_smoke beside this.
snapshot() {
  local ns line where=("$scratch")
  while read -r ns line; do
    [[ "$ns" == sptb-* || "$ns" == spci-* ]] && continue
    echo "netns $ns"
    ip -n "$ns" -o link show 2>/dev/null | awk -F': ' '{print "  link " $2}'
    tc -n "$ns" qdisc show 2>/dev/null
  done < <(ip netns list 2>/dev/null)
  for ns in /etc/netns/* /run/sparsepush-testbed-*; do
    [[ "$ns" == */sptb-* || "$ns" == */spci-* || "$ns" == *-sptb || "$ns" == *-spci ]] && continue
    [ -e "$ns" ] && where+=("$ns")
  done
  find "${where[@]}" -printf '%p %y %s %l\n' -type f -exec md5sum {} +
}

# The command line as a message shows it: label N VAR=VALUE(N of them) ARG...
label() {
  local n="$1"
  shift
  [ "$n" -eq 0 ] || printf '%q ' "${@:1:n}"
  printf 'testbed.sh'
  [ $# -eq "$n" ] || printf ' %q' "${@:n+1}"
}

# refused WHAT... -- VAR=VALUE... -- ARG...: testbed.sh, run with the base variables and then
# VAR=VALUE (which win), exits 2, prints nothing on stdout and one line on stderr that holds
# every WHAT, and makes or removes nothing.
refused() {
  local needles=() vars=() out err rc before after line n
  while [ "$1" != -- ]; do needles+=("$1"); shift; done
  shift
  while [ "$1" != -- ]; do vars+=("$1"); shift; done
  shift
  before="$(snapshot)"
  out="$(env "${base[@]}" "${vars[@]}" bash "$testbed" "$@" 2>"$scratch/.stderr")"
  rc=$?
  err="$(cat "$scratch/.stderr")"
  rm -f "$scratch/.stderr"
  after="$(snapshot)"
  local what
  what="$(label "${#vars[@]}" "${vars[@]}" "$@")"
  n="$(printf '%s\n' "$err" | wc -l)"
  line="$err"
  if [ "$rc" -ne 2 ]; then bad "$what: exit $rc, not 2 (stderr: $err)"; return; fi
  if [ -n "$out" ]; then bad "$what: printed on stdout: $out"; return; fi
  if [ -z "$err" ] || [ "$n" -ne 1 ]; then bad "$what: stderr is $n lines, not 1: $err"; return; fi
  local needle
  for needle in "${needles[@]}"; do
    [[ "$line" == *"$needle"* ]] || { bad "$what: the message does not name $needle: $line"; return; }
  done
  if [ "$before" != "$after" ]; then
    bad "$what: something was made or removed: $(diff <(echo "$before") <(echo "$after") | head -5 | tr '\n' ' ')"
    return
  fi
  ok "$what -> $line"
}

# accepted OUTPUT -- VAR=VALUE... -- ARG...: exits 0 and stdout holds OUTPUT.
accepted() {
  local expect="$1" vars=() out rc
  shift 2
  while [ "$1" != -- ]; do vars+=("$1"); shift; done
  shift
  out="$(env "${base[@]}" "${vars[@]}" bash "$testbed" "$@" 2>&1)"
  rc=$?
  local what
  what="$(label "${#vars[@]}" "${vars[@]}" "$@")"
  if [ "$rc" -eq 0 ] && [[ "$out" == *"$expect"* ]]; then ok "$what -> accepted: ${out%%$'\n'*}"; else bad "$what: exit $rc: $out"; fi
}

echo "== SPARSEPUSH_TESTBED_NET"
for v in 10.256.1 10.1.256 10.1.999 300.1.1 10.1 10.1.2.3 10.01.2 010.1.2 10.1.02 "" " 10.1.2" "10.1.2 " a.b.c \
         10.1.2/24 10.1.-2 10..2 $'10.1.2\n'; do
  refused SPARSEPUSH_TESTBED_NET "three octets" -- "SPARSEPUSH_TESTBED_NET=$v" -- up 2
done
for v in 11.1.2 8.8.8 172.15.0 172.32.0 192.169.0 192.167.1 100.64.0 169.254.1 127.0.0 0.0.0 255.255.255; do
  refused SPARSEPUSH_TESTBED_NET "'$v'" "not private" -- "SPARSEPUSH_TESTBED_NET=$v" -- up 2
done
for v in 10.0.0 10.255.255 172.16.0 172.31.255 192.168.0 192.168.255 10.213.77; do
  accepted "testbed: down" -- "SPARSEPUSH_TESTBED_NET=$v" -- status
done

echo "== SPARSEPUSH_TESTBED_PREFIX"
for v in "" a A Sptb 1ab abcdefghi a-b "ab cd" "ab/.." "sp*"; do
  refused SPARSEPUSH_TESTBED_PREFIX "'$v'" "2-8 lower-case" -- "SPARSEPUSH_TESTBED_PREFIX=$v" -- up 2
done
for v in ab abcdefgh sp2; do
  accepted "testbed: down" -- "SPARSEPUSH_TESTBED_PREFIX=$v" "SPARSEPUSH_TESTBED_STATE=$scratch/state-$v" -- status
done

echo "== SPARSEPUSH_TESTBED_STATE"
# Someone else's directory, holding files with the names the script writes: they must survive.
foreign="$scratch/foreign"
mkdir -p "$foreign/sub"
for f in hosts rate rsh-agent hostfile made-etc-netns measure.0 keep.txt sub/deep.txt; do echo "theirs: $f" > "$foreign/$f"; done
echo "not a directory" > "$scratch/plain-file"
ln -s "$foreign" "$scratch/link"
ln -s "$scratch/nowhere" "$scratch/dangling"
mkdir "$scratch/other"  # another testbed's state (prefix zzzz), which spck must not take
echo "sparsepush testbed state directory, prefix zzzz" > "$scratch/other/.sparsepush-testbed"
echo 2 > "$scratch/other/hosts"
for v in "" state ./state / // "$state/" "$scratch//state" "$scratch/./state" "$scratch/x/../state" "$scratch/with space" \
         "$scratch/a*b" "$scratch/new"$'\n'"line"; do
  refused SPARSEPUSH_TESTBED_STATE -- "SPARSEPUSH_TESTBED_STATE=$v" -- up 2
done
refused SPARSEPUSH_TESTBED_STATE "'/'" "absolute path" -- "SPARSEPUSH_TESTBED_STATE=/" -- down
refused SPARSEPUSH_TESTBED_STATE ". or .." -- "SPARSEPUSH_TESTBED_STATE=$scratch/x/../state" -- down
refused SPARSEPUSH_TESTBED_STATE "$scratch/missing/state" "no parent directory" -- \
  "SPARSEPUSH_TESTBED_STATE=$scratch/missing/state" -- up 2
for c in "up 2" "up" down status "shape none" measure "exec 0 true"; do
  # shellcheck disable=SC2086 # the command's words
  refused SPARSEPUSH_TESTBED_STATE "'$foreign'" "not made by this script" -- "SPARSEPUSH_TESTBED_STATE=$foreign" -- $c
done
for f in hosts rate rsh-agent hostfile made-etc-netns measure.0 keep.txt sub/deep.txt; do
  [ "$(cat "$foreign/$f" 2>/dev/null)" = "theirs: $f" ] || bad "$foreign/$f is gone or changed"
done
[ "$(find "$foreign" | wc -l)" -eq 10 ] && ok "$foreign and its 9 entries survived up, down, status, shape, measure, exec" ||
  bad "$foreign lost or gained entries: $(find "$foreign" | tr '\n' ' ')"
refused SPARSEPUSH_TESTBED_STATE "'$scratch/plain-file'" "not made by this script" -- "SPARSEPUSH_TESTBED_STATE=$scratch/plain-file" -- down
refused SPARSEPUSH_TESTBED_STATE "'$scratch/link'" "symbolic link" -- "SPARSEPUSH_TESTBED_STATE=$scratch/link" -- down
refused SPARSEPUSH_TESTBED_STATE "'$scratch/dangling'" "symbolic link" -- "SPARSEPUSH_TESTBED_STATE=$scratch/dangling" -- up 2
refused SPARSEPUSH_TESTBED_STATE "'$scratch/other'" "another testbed" "prefix zzzz" -- "SPARSEPUSH_TESTBED_STATE=$scratch/other" -- down
# unset, STATE takes the default (/run/sparsepush-testbed-spck for prefix spck), which is valid
out="$(env -u SPARSEPUSH_TESTBED_STATE "${base[@]:0:2}" bash "$testbed" status 2>&1)" && [ "$out" = "testbed: down" ] &&
  ok "SPARSEPUSH_TESTBED_STATE unset -> accepted: $out" || bad "SPARSEPUSH_TESTBED_STATE unset: $out"

echo "== arguments"
for v in "" abc 0 201 -1 +2 08 " 2" "2 " 1e3 2.0 99999999999999999999; do
  refused "up: HOSTS='$v'" "1..200" -- -- up "$v"
done
refused "up: takes at most one argument" "'2 3'" -- -- up 2 3
refused "shape: takes one argument" -- -- shape
refused "shape: takes one argument" -- -- shape 10mbit extra
for v in "" 0mbit 0kbit 010mbit 10Mbit 10mbps 10 mbit 101gbit 1000000000kbit 999bit -1mbit "10 mbit" 1.5mbit; do
  refused "shape: RATE='$v'" "1kbit..100gbit" -- -- shape "$v"
done
refused "exec: give a host index and a command" -- -- exec 0
for v in "" 08 -1 x 1000; do
  refused "exec: HOST='$v'" "host index" -- -- exec "$v" true
done
refused "measure: takes no arguments" "'x'" -- -- measure x
refused "status: takes no arguments" -- -- status x
refused "down: takes no arguments" "'now please'" -- -- down now please
refused "unknown command 'upp'" usage -- -- upp 2
refused "no command" usage -- --

if [ "$inputs_only" -eq 1 ]; then
  echo "the testbed itself: not brought up (--inputs-only)"
elif [ "$(id -u)" -ne 0 ]; then
  echo "the testbed itself: not brought up (not root)"
elif ! command -v ip >/dev/null || ! command -v tc >/dev/null || ! unshare --net true 2>/dev/null; then
  echo "the testbed itself: not brought up (no iproute2, or network namespaces are refused here)"
else
  echo "== up 2, refusals while up, down"
  others="$(ip netns list | awk '{print $1}' | grep -v '^spck-' | sort)"
  out="$(env "${base[@]}" bash "$testbed" up 2 2>&1)" && [[ "$out" == "testbed: 2 hosts up (10.213.79.10 .. 10.213.79.11 on a bridge), unshaped" ]] &&
    ok "up 2 -> $out" || bad "up 2: $out"
  [ "$(ip netns list | awk '{print $1}' | grep '^spck-' | sort | tr '\n' ' ')" = "spck-br spck-h0 spck-h1 " ] &&
    ok "namespaces spck-br spck-h0 spck-h1" || bad "namespaces: $(ip netns list | tr '\n' ' ')"
  files="$(cd "$state" && ls -A | sort | tr '\n' ' ')"
  expect=".sparsepush-testbed hostfile hosts rate rsh-agent "
  [ "$etc_netns_before" = no ] && expect=".sparsepush-testbed hostfile hosts made-etc-netns rate rsh-agent "
  [ "$files" = "$expect" ] && ok "state holds $files" || bad "state holds $files, not $expect"
  [ "$(cat "$state/.sparsepush-testbed")" = "sparsepush testbed state directory, prefix spck" ] && ok "the marker names prefix spck" ||
    bad "marker: $(cat "$state/.sparsepush-testbed")"
  out="$(env "${base[@]}" bash "$testbed" exec 1 hostname 2>&1)" && [ "$out" = spck-h1 ] && ok "exec 1 hostname -> $out" || bad "exec 1 hostname: $out"
  out="$(env "${base[@]}" bash "$testbed" exec 0 cat /etc/hosts 2>&1)" && [[ "$out" == *"10.213.79.11 spck-h1"* ]] &&
    ok "host 0's /etc/hosts names 10.213.79.11 spck-h1" || bad "exec 0 cat /etc/hosts: $out"
  # bad inputs leave the running testbed as it is (snapshot holds its namespaces, links and qdiscs)
  refused "up: HOSTS=''" -- -- up ""
  refused "up: HOSTS='0'" -- -- up 0
  refused "exec: no host '2'" "0..1" -- -- exec 2 true
  refused "exec: HOST='01'" -- -- exec 01 true
  refused "shape: RATE='0mbit'" -- -- shape 0mbit
  refused "SPARSEPUSH_TESTBED_NET='10.213.300'" -- SPARSEPUSH_TESTBED_NET=10.213.300 -- down
  refused SPARSEPUSH_TESTBED_STATE "'$foreign'" -- "SPARSEPUSH_TESTBED_STATE=$foreign" -- down
  refused SPARSEPUSH_TESTBED_STATE "another testbed" "prefix spck" -- SPARSEPUSH_TESTBED_PREFIX=spcz -- down
  out="$(env "${base[@]}" bash "$testbed" shape 10mbit 2>&1)" && out2="$(env "${base[@]}" bash "$testbed" status 2>&1)" &&
    [[ "$out2" == *"rate 10mbit"*"tbf"*"tbf"* ]] && ok "shape 10mbit -> $out" || bad "shape 10mbit: $out $out2"
  out="$(env "${base[@]}" bash "$testbed" shape none 2>&1)" && ok "shape none -> $out" || bad "shape none: $out"
  # a file that is not the script's keeps the state directory (and its marker), and is named
  echo "mine" > "$state/user-note"
  out="$(env "${base[@]}" bash "$testbed" down 2>&1)"
  [ -z "$(ip netns list | grep '^spck-')" ] && [ "$(cd "$state" && ls -A | tr '\n' ' ')" = ".sparsepush-testbed user-note " ] &&
    [[ "$out" == *"kept $state"*"user-note"* ]] && ok "down with a foreign file in the state: namespaces gone, only the marker and user-note kept" ||
    bad "down with a foreign file: $out; left: $(ls -A "$state" 2>&1 | tr '\n' ' ')"
  rm -f "$state/user-note"
  out="$(env "${base[@]}" bash "$testbed" up 2 2>&1)" && ok "up 2 again on the kept state -> $out" || bad "up 2 again: $out"
  out="$(env "${base[@]}" bash "$testbed" down 2>&1)" && [ "$out" = "testbed: down" ] && ok "down -> $out" || bad "down: $out"
  left="$(ip netns list | grep '^spck-')"
  [ -z "$left" ] && ok "no spck namespace left (ip netns list)" || bad "namespaces left: $left"
  [ ! -e "$state" ] && ok "no state directory left" || bad "$state is left: $(ls -A "$state")"
  ls -d /etc/netns/spck-* >/dev/null 2>&1 && bad "/etc/netns/spck-* left" || ok "no /etc/netns/spck-* left"
  etc_netns_after=no
  [ -d /etc/netns ] && etc_netns_after=yes
  [ "$etc_netns_after" = "$etc_netns_before" ] && ok "/etc/netns exists: $etc_netns_after, as before" ||
    bad "/etc/netns existed: $etc_netns_before, now: $etc_netns_after"
  [ "$(ip netns list | awk '{print $1}' | grep -v '^spck-' | sort)" = "$others" ] && ok "other namespaces untouched" ||
    bad "other namespaces changed"
fi

echo "check_testbed_inputs: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
