#!/usr/bin/env bash
# An emulated cluster on one machine: H hosts as network namespaces, each joined by a veth pair
# to a bridge that lives in a namespace of its own, on the private network 10.213.77.0/24 that
# exists only inside those namespaces. Each host's uplink (its veth's egress) can be shaped with
# a token bucket filter (tc tbf) to a rate R. This machine kind has no delay qdisc (netem is
# missing), so the testbed emulates bandwidth only; latency comes only from queueing behind the
# token bucket.
#
# Usage (as root):
#   bench/net/testbed.sh up [HOSTS]        make HOSTS hosts (default 4), unshaped
#   bench/net/testbed.sh shape RATE        shape every uplink: 10mbit, 100mbit, 1gbit, ... or "none"
#   bench/net/testbed.sh measure           the achieved bandwidth of every host's uplink (Mbit/s)
#   bench/net/testbed.sh mpirun ARGS...    mpirun from host 0, one slot per core on every host:
#                                          ARGS are mpirun's (-np, program, its options)
#   bench/net/testbed.sh exec HOST CMD...  run CMD on host HOST (0-based) with its own hostname
#   bench/net/testbed.sh status            the hosts, their addresses and qdiscs
#   bench/net/testbed.sh down              remove every namespace, link and file this script made
#
# Names: namespaces sptb-br (the bridge) and sptb-h0 ... sptb-h<H-1>; host i is 10.213.77.(10+i)
# with hostname sptb-h<i> (the defaults). Every command runs in a UTS namespace of its own with the host's name:
# Open MPI names its session directory in the shared /tmp after the hostname, and hosts sharing
# one name collide (about 1 launch in 15 hung). Nothing outside these namespaces is touched but
# /etc/netns/sptb-h* (the hosts' /etc/hosts, which `ip netns exec` mounts) and a state directory
# (SPARSEPUSH_TESTBED_STATE, default /run/sparsepush-testbed-PREFIX), both removed by `down`.
# SPARSEPUSH_TESTBED_PREFIX (default sptb) and SPARSEPUSH_TESTBED_NET (default 10.213.77) let
# a second testbed (the CI smoke test's) live beside the first.
#
# Every input is checked before anything is made or removed; a bad one gets one line on stderr
# naming it, its value and what is accepted, and exit status 2. An unset variable or an absent
# argument takes its default; one that is set but empty is refused like any other bad value (a
# typo such as STATE=$UNSET_VARIABLE must not quietly pick the default).
#   SPARSEPUSH_TESTBED_PREFIX  2-8 lower-case letters or digits, the first a letter
#   SPARSEPUSH_TESTBED_NET     A.B.C, each 0-255 in plain decimal (no leading zero), in a private
#                              range: 10.B.C, 172.16-31.C or 192.168.C (the hosts' /24 is NET.0/24)
#   SPARSEPUSH_TESTBED_STATE   an absolute path other than /, of letters, digits and . _ - +, with
#                              no empty, . or .. component and no trailing /, whose parent
#                              directory exists; if the path exists it must be a directory (not a
#                              symbolic link) that this script made for the same PREFIX
#   up HOSTS                   1..200 (host i is NET.(10+i)), plain decimal
#   shape RATE                 1kbit..100gbit as digits then kbit, mbit or gbit (no leading zero),
#                              or none
#   exec HOST                  0..HOSTS-1, plain decimal
set -euo pipefail

die() { echo "testbed: $*" >&2; exit 2; }
# A value as a message shows it: quoted, and on one line even when it holds a newline.
q() { if [[ "$1" =~ ^[[:print:]]*$ ]]; then printf "'%s'" "$1"; else printf '%q' "$1"; fi; }

# Only an unset variable takes the default (${X-d}, not ${X:-d}): an empty one is checked, and refused.
prefix="${SPARSEPUSH_TESTBED_PREFIX-sptb}"
net="${SPARSEPUSH_TESTBED_NET-10.213.77}"
[[ "$prefix" =~ ^[a-z][a-z0-9]{1,7}$ ]] ||
  die "SPARSEPUSH_TESTBED_PREFIX=$(q "$prefix") is not 2-8 lower-case letters or digits starting with a letter (e.g. sptb)"
state="${SPARSEPUSH_TESTBED_STATE-/run/sparsepush-testbed-$prefix}"

# NET is the first three octets of the hosts' /24. A leading zero is refused: some tools read
# 010 as octal 8, others as 10. The network must be private: it exists only inside the namespaces,
# but a public one would shadow real hosts for every program run on the testbed.
octet='(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])'
[[ "$net" =~ ^$octet\.$octet\.$octet$ ]] ||
  die "SPARSEPUSH_TESTBED_NET=$(q "$net") is not three octets A.B.C, each 0-255 without a leading zero (e.g. 10.213.77)"
{ [ "${BASH_REMATCH[1]}" -eq 10 ] ||
  { [ "${BASH_REMATCH[1]}" -eq 172 ] && [ "${BASH_REMATCH[2]}" -ge 16 ] && [ "${BASH_REMATCH[2]}" -le 31 ]; } ||
  { [ "${BASH_REMATCH[1]}" -eq 192 ] && [ "${BASH_REMATCH[2]}" -eq 168 ]; }; } ||
  die "SPARSEPUSH_TESTBED_NET=$(q "$net") is not private: give 10.B.C, 172.16.C to 172.31.C or 192.168.C"

# The state directory. `down` used to `rm -rf` it, so a typo (STATE=/tmp) emptied someone else's
# directory. Now the script makes it (never its parents: mkdir without -p), writes a marker file
# first, and removes only a directory that holds the marker, and in it only the files it wrote
# (state_files, measure.N, then the marker); anything else found there stays, and so does the
# directory. The characters are limited because the path reaches mpirun's rsh agent option, which
# Open MPI splits at spaces.
marker=.sparsepush-testbed
marker_text="sparsepush testbed state directory, prefix $prefix"
state_files=(made-etc-netns etc-hosts rsh-agent hostfile hosts rate)
bad_state() { die "SPARSEPUSH_TESTBED_STATE=$(q "$state") $*"; }
[[ "$state" =~ ^(/[A-Za-z0-9._+-]+)+$ ]] ||
  bad_state "is not an absolute path other than / made of letters, digits and . _ - + (no empty component, no trailing /)"
[[ "$state/" != */./* && "$state/" != */../* ]] || bad_state "has a . or .. component: give the plain path"
state_parent="${state%/*}"
[ -d "${state_parent:-/}" ] || bad_state "has no parent directory ${state_parent:-/}: the script makes only the last component"
own_state() { [ -d "$state" ] && [ ! -L "$state" ] && [ -f "$state/$marker" ] && [ ! -L "$state/$marker" ] &&
  [ "$(head -n 1 "$state/$marker")" = "$marker_text" ]; }
if [ -L "$state" ]; then
  bad_state "is a symbolic link: give a path that this script can make"
elif [ -e "$state" ] && ! own_state; then
  if [ -d "$state" ] && [ -f "$state/$marker" ]; then
    bad_state "belongs to another testbed ($(q "$(head -n 1 "$state/$marker")")), not to prefix $prefix"
  fi
  bad_state "exists but was not made by this script (no $marker in it): give a path that does not exist yet"
fi

bridge_ns="$prefix-br"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

need_root() {
  [ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, veth pairs and tc); run it as root or with sudo"
  local t
  for t in ip tc unshare; do command -v "$t" >/dev/null || die "needs '$t' (Debian: iproute2, util-linux)"; done
}
host_ns() { echo "$prefix-h$1"; }
hosts_up() { [ -f "$state/hosts" ] && cat "$state/hosts" || echo 0; }
require_up() {
  local h
  h="$(hosts_up)"
  [ "$h" -gt 0 ] || die "the testbed is not up: run '$0 up [HOSTS]' first"
  local i
  for ((i = 0; i < h; ++i)); do
    ip netns list | grep -qw "$(host_ns "$i")" || die "host $i ($(host_ns "$i")) is missing: run '$0 down' and '$0 up'"
  done
}

# Run a command on host i in a UTS namespace of its own whose hostname is the host's.
on_host() {
  local i="$1"
  shift
  ip netns exec "$(host_ns "$i")" unshare --uts -- /bin/sh -c 'hostname "$0" && exec "$@"' "$(host_ns "$i")" "$@"
}

down() {
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$prefix-(br|h[0-9]+)$" || true); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns delete "$ns" 2>/dev/null || true
    # the hosts file is what up wrote; a directory still holding more than that stays
    rm -f "/etc/netns/$ns/hosts"
    rmdir "/etc/netns/$ns" 2>/dev/null || true
  done
  [ -f "$state/made-etc-netns" ] && rmdir /etc/netns 2>/dev/null || true  # only if this script made it
  remove_state
}

# Remove the state directory: only if it holds the marker (the checks at the start refused any
# other existing directory, so this is belt and braces), and in it only the files up, shape and
# measure write. A file of someone else's keeps the directory and its marker, and is named.
remove_state() {
  own_state || return 0
  local f left=()
  for f in "${state_files[@]}"; do rm -f "$state/$f"; done
  for f in "$state"/.* "$state"/*; do
    [ -e "$f" ] || [ -L "$f" ] || continue
    f="${f##*/}"
    if [[ "$f" =~ ^measure\.[0-9]+$ ]]; then
      rm -f "$state/$f"
    elif [ "$f" != . ] && [ "$f" != .. ] && [ "$f" != "$marker" ]; then
      left+=("$f")
    fi
  done
  if [ ${#left[@]} -gt 0 ]; then
    echo "testbed: kept $state: it holds files this script did not write (${left[*]}); remove them and run down again" >&2
    return 0
  fi
  rm -f "$state/$marker"
  rmdir "$state"
}

up() {
  local h="$1"  # checked by the caller: 1..200
  down
  # its parent exists (checked at the start): only the last component is made, and marked first;
  # a directory that is there (down kept it for a file of someone else's) must already be ours
  if [ -e "$state" ] || [ -L "$state" ]; then
    own_state || die "up: SPARSEPUSH_TESTBED_STATE=$(q "$state") is not a directory this script made"
  else
    mkdir "$state"
  fi
  echo "$marker_text" > "$state/$marker"
  [ -d /etc/netns ] || touch "$state/made-etc-netns"
  trap 'echo "testbed: up failed; removing what it made" >&2; down' ERR
  ip netns add "$bridge_ns"
  ip -n "$bridge_ns" link add br0 type bridge
  ip -n "$bridge_ns" link set br0 up
  local i ns hosts_file
  hosts_file="$state/etc-hosts"  # in the state directory, so that a failed up removes it too
  echo "127.0.0.1 localhost" > "$hosts_file"
  for ((i = 0; i < h; ++i)); do echo "$net.$((10 + i)) $(host_ns "$i")" >> "$hosts_file"; done
  for ((i = 0; i < h; ++i)); do
    ns="$(host_ns "$i")"
    ip netns add "$ns"
    # both ends are made inside the namespaces: nothing appears in the caller's namespace
    ip -n "$bridge_ns" link add "p$i" type veth peer name eth0 netns "$ns"
    ip -n "$bridge_ns" link set "p$i" master br0 up
    ip -n "$ns" addr add "$net.$((10 + i))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    mkdir -p "/etc/netns/$ns"
    cp "$hosts_file" "/etc/netns/$ns/hosts"
  done
  rm -f "$hosts_file"
  # the rsh agent Open MPI starts its daemons with (plm_rsh_agent): "agent HOST COMMAND..."
  cat > "$state/rsh-agent" <<EOF
#!/bin/sh
# Open MPI's launcher for the testbed: run the daemon's command line on host \$1 (its namespace,
# with its hostname), as ssh would run it in a shell there.
host="\$1"
shift
case "\$host" in $prefix-h[0-9]*) ;; *) echo "testbed rsh agent: unknown host \$host" >&2; exit 2 ;; esac
exec ip netns exec "\$host" unshare --uts -- /bin/sh -c 'hostname "\$0" && exec /bin/sh -c "\$1"' "\$host" "\$*"
EOF
  chmod +x "$state/rsh-agent"
  : > "$state/hostfile"
  for ((i = 0; i < h; ++i)); do echo "$(host_ns "$i") slots=$(nproc)" >> "$state/hostfile"; done
  echo "$h" > "$state/hosts"
  echo none > "$state/rate"
  trap - ERR
  echo "testbed: $h hosts up ($net.10 .. $net.$((9 + h)) on a bridge), unshaped"
}

# A rate for tc: digits with kbit, mbit or gbit, or "none" (checked by the caller: check_rate).
shape() {
  local rate="$1"
  require_up
  local h i ns bits
  h="$(hosts_up)"
  if [ "$rate" = none ]; then
    for ((i = 0; i < h; ++i)); do tc -n "$(host_ns "$i")" qdisc del dev eth0 root 2>/dev/null || true; done
    echo none > "$state/rate"
    echo "testbed: uplinks unshaped"
    return
  fi
  bits="$(rate_bits "$rate")"
  # burst: at least one MTU-sized frame and 1 ms of the rate's bytes; a queue of up to 100 ms
  local burst=$((bits / 8 / 1000))
  [ "$burst" -ge 16384 ] || burst=16384
  for ((i = 0; i < h; ++i)); do
    ns="$(host_ns "$i")"
    tc -n "$ns" qdisc replace dev eth0 root tbf rate "$rate" burst "$burst" latency 100ms
  done
  echo "$rate" > "$state/rate"
  echo "testbed: every uplink shaped to $rate (tbf, burst $burst bytes, queue 100 ms)"
}
# tc's kbit, mbit and gbit are powers of 1000. At most 9 digits, so that 999999999gbit still fits
# bash's 64-bit arithmetic, and no leading zero, which bash would read as octal and tc as decimal.
rate_bits() {
  local r="$1" n unit
  [[ "$r" =~ ^([1-9][0-9]{0,8})(kbit|mbit|gbit)$ ]] || return 1
  n="${BASH_REMATCH[1]}"
  unit="${BASH_REMATCH[2]}"
  case "$unit" in
    kbit) echo $((n * 1000)) ;;
    mbit) echo $((n * 1000000)) ;;
    gbit) echo $((n * 1000000000)) ;;
  esac
}
# 1 kbit/s to 100 gbit/s: tbf takes both ends here; unshaped veth pairs carry about 5-12 Gbit/s.
check_rate() {
  local bits
  [ "$1" = none ] && return 0
  bits="$(rate_bits "$1")" && [ "$bits" -ge 1000 ] && [ "$bits" -le 100000000000 ] ||
    die "shape: RATE=$(q "$1") is not a rate 1kbit..100gbit (digits without a leading zero, then kbit, mbit or gbit, e.g. 10mbit) or none"
}

# Each host i sends to host (i + 1) mod H for about a second; the receiver times the bytes.
measure() {
  require_up
  local h i j rate bytes port=5201
  h="$(hosts_up)"
  [ "$h" -ge 2 ] || die "measure: needs at least 2 hosts"
  command -v python3 >/dev/null || die "measure needs python3"
  rate="$(cat "$state/rate")"
  bytes=$((64 * 1024 * 1024))
  if [ "$rate" != none ]; then bytes=$(($(rate_bits "$rate") / 8)); fi  # about 1 s at the rate
  [ "$bytes" -ge 262144 ] || bytes=262144
  echo "testbed: uplink bandwidth (rate $rate), $bytes bytes per host"
  for ((i = 0; i < h; ++i)); do
    j=$(((i + 1) % h))
    on_host "$j" python3 "$here/bandwidth.py" receive "$port" > "$state/measure.$i" &
    local rx=$!
    on_host "$i" python3 "$here/bandwidth.py" send "$net.$((10 + j))" "$port" "$bytes"
    wait "$rx"
    echo "  host $i -> host $j: $(cat "$state/measure.$i") Mbit/s"
    rm -f "$state/measure.$i"
  done
}

status() {
  local h i ns
  h="$(hosts_up)"
  if [ "$h" -eq 0 ]; then
    echo "testbed: down"
    return
  fi
  echo "testbed: $h hosts, rate $(cat "$state/rate" 2>/dev/null || echo '?')"
  for ((i = 0; i < h; ++i)); do
    ns="$(host_ns "$i")"
    echo "  $ns $(ip -n "$ns" -4 -o addr show dev eth0 | awk '{print $4}') $(tc -n "$ns" qdisc show dev eth0 | head -1)"
  done
}

# mpirun from host 0 over the testbed: its daemons start through the rsh agent; MPI's TCP
# traffic and its out-of-band channel stay on eth0 (the shaped veth). Ranks of one host talk
# through shared memory, as on a real cluster: only traffic between hosts crosses the links.
# Open MPI's TCP progresses only while the sender is inside MPI unless a progress thread runs.
run_mpi() {
  require_up
  on_host 0 env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    OMPI_MCA_plm_rsh_agent="$state/rsh-agent" \
    OMPI_MCA_btl_tcp_if_include=eth0 OMPI_MCA_oob_tcp_if_include=eth0 \
    OMPI_MCA_btl=self,vader,tcp OMPI_MCA_pml=ob1 \
    OMPI_MCA_btl_tcp_progress_thread=1 \
    mpirun --hostfile "$state/hostfile" --oversubscribe "$@"
}

# Arguments are checked before need_root and before anything is made, like the variables above.
usage="usage: $0 up [HOSTS] | shape RATE|none | measure | mpirun ARGS... | exec HOST CMD... | status | down"
no_args() { [ $# -eq 1 ] || die "$1: takes no arguments, not $(($# - 1)) ($(q "${*:2}"))"; }
[ $# -gt 0 ] || die "no command; $usage"
cmd="$1"
shift
case "$cmd" in
  up)
    [ $# -le 1 ] || die "up: takes at most one argument, HOSTS (1..200), not $# ($(q "$*"))"
    h="${1-4}"  # only an absent HOSTS takes the default: up '' is refused
    [[ "$h" =~ ^[1-9][0-9]{0,2}$ ]] && [ "$h" -le 200 ] ||
      die "up: HOSTS=$(q "$h") is not a whole number 1..200 (decimal, no sign or leading zero)"
    need_root
    up "$h"
    ;;
  shape)
    [ $# -eq 1 ] || die "shape: takes one argument, RATE (1kbit..100gbit, e.g. 10mbit) or none, not $#"
    check_rate "$1"
    need_root
    shape "$1"
    ;;
  measure) no_args measure "$@"; need_root; measure ;;
  mpirun) need_root; run_mpi "$@" ;;
  exec)
    [ $# -ge 2 ] || die "exec: give a host index and a command, not $# argument(s)"
    [[ "$1" =~ ^(0|[1-9][0-9]{0,2})$ ]] || die "exec: HOST=$(q "$1") is not a host index (0, 1, ... in decimal, no leading zero)"
    need_root
    require_up
    [ "$1" -lt "$(hosts_up)" ] || die "exec: no host $(q "$1") (hosts 0..$(($(hosts_up) - 1)))"
    i="$1"
    shift
    on_host "$i" "$@"
    ;;
  status) no_args status "$@"; status ;;
  down) no_args down "$@"; need_root; down; echo "testbed: down" ;;
  *) die "unknown command $(q "$cmd"); $usage" ;;
esac
