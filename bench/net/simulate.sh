#!/usr/bin/env bash
# sparsepush-train on a simulated network: writes a SimGrid platform (star, racks or wireless), runs
# the SMPI build of sparsepush-train on it under smpirun, and reports the simulated seconds per
# round, the simulated time to an accuracy, the host's real seconds and its peak RSS.
# Usage: bench/net/simulate.sh [options] [-- sparsepush-train options]   (--help: the options)
set -euo pipefail

usage() {
  cat <<'EOF'
usage: bench/net/simulate.sh [options] [-- sparsepush-train options]
  --train PATH         SMPI build of sparsepush-train (cmake -DSPARSEPUSH_SMPI=ON; default build-smpi/examples/sparsepush-train)
  --profile NAME       star (default): each host its own link (--rate, --latency) to one router, so
                         host to host crosses two links (2 x latency);
                       racks: racks of --rack-size hosts on a star as above, each rack's router joined
                         to a core by an uplink (--backbone-rate, --backbone-latency); between racks a
                         frame crosses host link, uplink, core, uplink, host link;
                       wireless: one shared medium: every frame crosses one link of --rate (default
                         11Mbps) and --latency (default 5ms) that all hosts share
  --ranks R            MPI ranks (default: --hosts, else 4)
  --hosts H            simulated hosts (default: --ranks); ranks are placed on the hosts in turn
  --nodes N            sparsepush-train --nodes (default: R; nodes are cut into blocks per rank)
  --rate BW            link rate, SimGrid units (default 1Gbps; wireless 11Mbps)
  --latency T          link latency (default 50us; wireless 5ms)
  --rack-size K        racks: hosts per rack (default 16)
  --backbone-rate BW   racks: rate of each uplink and of the core (default 10Gbps)
  --backbone-latency T racks: latency of each uplink and of the core (default 5us)
  --speed F            a simulated host's speed, flop/s (default 1Gf)
  --host-speed F       this machine's speed for SMPI's scaling (smpi/host-speed, default 1Gf): each
                       rank's measured compute time counts as (its seconds) x host-speed / speed; the
                       defaults simulate hosts exactly as fast as this machine
  --smpi-factors       keep SMPI's default network model, which scales each message's latency and
                       rate by factors SimGrid calibrated on a real cluster (small messages: latency
                       x 2.01, rate x 0.81); without it the links have exactly --rate and --latency
                       (smpi/lat-factor and smpi/bw-factor 1)
  --target ACC         accuracy for the time to accuracy (avg_test_accuracy of the log; default 0.7)
  --cfg KEY:VALUE      one more SimGrid option (repeatable), e.g. --cfg smpi/privatization:no
  --out DIR            output directory (default bench/net/out-sim): platform.xml, hostfile,
                       summary.json, log.csv, train.out, report.txt
EOF
}

here=$(cd "$(dirname "$0")" && pwd)
train="$here/../../build-smpi/examples/sparsepush-train"
profile=star hosts="" ranks="" nodes="" rate="" latency="" rack=16 bb_rate=10Gbps bb_lat=5us
speed=1Gf host_speed=1Gf target=0.7 out="$here/out-sim" factors=nominal
cfgs=()
die() { echo "simulate.sh: $*" >&2; exit 2; }
need() { [ $# -ge 2 ] || die "$1 needs a value"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --train) need "$@"; train="$2"; shift 2 ;;
    --profile) need "$@"; profile="$2"; shift 2 ;;
    --hosts) need "$@"; hosts="$2"; shift 2 ;;
    --ranks) need "$@"; ranks="$2"; shift 2 ;;
    --nodes) need "$@"; nodes="$2"; shift 2 ;;
    --rate) need "$@"; rate="$2"; shift 2 ;;
    --latency) need "$@"; latency="$2"; shift 2 ;;
    --rack-size) need "$@"; rack="$2"; shift 2 ;;
    --backbone-rate) need "$@"; bb_rate="$2"; shift 2 ;;
    --backbone-latency) need "$@"; bb_lat="$2"; shift 2 ;;
    --speed) need "$@"; speed="$2"; shift 2 ;;
    --host-speed) need "$@"; host_speed="$2"; shift 2 ;;
    --target) need "$@"; target="$2"; shift 2 ;;
    --smpi-factors) factors=smpi; shift ;;
    --cfg) need "$@"; cfgs+=("--cfg=$2"); shift 2 ;;
    --out) need "$@"; out="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) die "unknown option '$1' (sparsepush-train's options go after --; see --help)" ;;
  esac
done
train_args=("$@")

whole() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "$1 must be a whole number >= 1, got '$2'"; }
[ -z "$hosts" ] || whole --hosts "$hosts"
[ -z "$ranks" ] || whole --ranks "$ranks"
[ -z "$nodes" ] || whole --nodes "$nodes"
whole --rack-size "$rack"
ranks="${ranks:-${hosts:-4}}"; hosts="${hosts:-$ranks}"; nodes="${nodes:-$ranks}"
case "$profile" in
  star|racks) rate="${rate:-1Gbps}"; latency="${latency:-50us}" ;;
  wireless) rate="${rate:-11Mbps}"; latency="${latency:-5ms}" ;;
  *) die "--profile must be star, racks or wireless, got '$profile'" ;;
esac
# SimGrid's own units: a number and a unit (Bps, bps with k/M/G/T prefixes; s, ms, us, ns; f, kf, Mf, Gf)
[[ "$rate" =~ ^[0-9.]+[kMGT]?[Bb]ps$ ]] || die "--rate must be a rate such as 1Gbps or 11Mbps, got '$rate'"
[[ "$bb_rate" =~ ^[0-9.]+[kMGT]?[Bb]ps$ ]] || die "--backbone-rate must be a rate such as 10Gbps, got '$bb_rate'"
for t in "--latency:$latency" "--backbone-latency:$bb_lat"; do
  [[ "${t#*:}" =~ ^[0-9.]+(s|ms|us|ns)$ ]] || die "${t%%:*} must be a time such as 50us or 5ms, got '${t#*:}'"
done
for f in "--speed:$speed" "--host-speed:$host_speed"; do
  [[ "${f#*:}" =~ ^[0-9.]+[kMGT]?f$ ]] || die "${f%%:*} must be a speed such as 1Gf, got '${f#*:}'"
done
[[ "$target" =~ ^(0(\.[0-9]+)?|1(\.0+)?)$ ]] || die "--target must be an accuracy in [0, 1], got '$target'"
[ -f "$train" ] || die "no SMPI build of sparsepush-train at $train (cmake -S . -B build-smpi -DSPARSEPUSH_SMPI=ON && cmake --build build-smpi --target sparsepush-train), or give --train"
command -v smpirun > /dev/null || die "smpirun not found (Debian package libsimgrid-dev)"
for a in "${train_args[@]}"; do
  case "$a" in --transport*|--nodes*|--summary*|--log*) die "simulate.sh sets sparsepush-train's $a itself" ;; esac
done

mkdir -p "$out"
platform="$out/platform.xml" hostfile="$out/hostfile"
{
  echo "<?xml version='1.0'?>"
  echo '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">'
  echo '<platform version="4.1">'
  case "$profile" in
    star)  # no backbone: host link, router, host link
      echo "  <cluster id=\"star\" prefix=\"node-\" suffix=\"\" radical=\"0-$((hosts - 1))\" speed=\"$speed\" bw=\"$rate\" lat=\"$latency\"/>" ;;
    wireless)  # the host links neither limit nor delay; the backbone is the shared medium
      echo "  <cluster id=\"air\" prefix=\"node-\" suffix=\"\" radical=\"0-$((hosts - 1))\" speed=\"$speed\" bw=\"$rate\" lat=\"0s\"" \
           "sharing_policy=\"FATPIPE\" bb_bw=\"$rate\" bb_lat=\"$latency\" bb_sharing_policy=\"SHARED\"/>" ;;
    racks)
      racks=$(( (hosts + rack - 1) / rack ))
      echo '  <zone id="racks" routing="Full">'
      for ((r = 0; r < racks; r++)); do
        lo=$((r * rack)); hi=$(( (r + 1) * rack - 1 < hosts - 1 ? (r + 1) * rack - 1 : hosts - 1 ))
        echo "    <cluster id=\"rack$r\" prefix=\"node-\" suffix=\"\" radical=\"$lo-$hi\" speed=\"$speed\" bw=\"$rate\" lat=\"$latency\"/>"
      done
      for ((r = 0; r < racks; r++)); do echo "    <link id=\"up$r\" bandwidth=\"$bb_rate\" latency=\"$bb_lat\"/>"; done
      echo "    <link id=\"core\" bandwidth=\"$bb_rate\" latency=\"$bb_lat\"/>"
      for ((a = 0; a < racks; a++)); do
        for ((b = a + 1; b < racks; b++)); do
          echo "    <zoneRoute src=\"rack$a\" dst=\"rack$b\" gw_src=\"node-rack${a}_router\" gw_dst=\"node-rack${b}_router\">" \
               "<link_ctn id=\"up$a\"/><link_ctn id=\"core\"/><link_ctn id=\"up$b\"/></zoneRoute>"
        done
      done
      echo '  </zone>' ;;
  esac
  echo '</platform>'
} > "$platform"
for ((h = 0; h < hosts; h++)); do echo "node-$h"; done > "$hostfile"

# SMPI injects a growing sleep into every failed MPI_Test/MPI_Iprobe (1e-4 s x the count, by
# default); the library's wait loops already sleep (in simulated time) between tests, so a test
# costs a fixed microsecond here instead.
# SMPI's default collectives post a message to every rank and wait on them all, which takes the
# host minutes per collective at 256 ranks: the MPICH selector picks MPICH's algorithms instead.
smpi_cfg=(--cfg=smpi/host-speed:"$host_speed" --cfg=smpi/test:1e-6 --cfg=smpi/iprobe:1e-6
          --cfg=smpi/grow-injected-times:no --cfg=smpi/coll-selector:mpich
          --log=xbt_cfg.thres:warning --log=smpi_config.thres:error)
[ "$factors" = nominal ] && smpi_cfg+=(--cfg=smpi/lat-factor:0:1 --cfg=smpi/bw-factor:0:1)
smpi_cfg+=("${cfgs[@]}")
rm -f "$out/summary.json" "$out/log.csv"
timer=()
[ -x /usr/bin/time ] && timer=(/usr/bin/time -f "%e %M" -o "$out/host.time")
start=$(date +%s.%N)
set +e
"${timer[@]}" smpirun -np "$ranks" -platform "$platform" -hostfile "$hostfile" "${smpi_cfg[@]}" \
  "$train" --transport mpi --nodes "$nodes" --summary "$out/summary.json" --log "$out/log.csv" \
  "${train_args[@]}" > "$out/train.out" 2>&1
rc=$?
set -e
host_s=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
if [ $rc -ne 0 ] || [ ! -s "$out/summary.json" ]; then
  echo "simulate.sh: smpirun failed (exit $rc); the last lines of $out/train.out:" >&2
  tail -n 15 "$out/train.out" >&2
  exit 1
fi
rss="n/a (GNU time: Debian package time)"
[ -s "$out/host.time" ] && rss="$(awk '{ printf "%.0f MB", $2 / 1024 }' "$out/host.time")"
python3 - "$out/summary.json" "$out/log.csv" "$target" "$profile" "$hosts" "$ranks" "$nodes" "$rate" "$latency" \
  "$host_s" "$rss" "$([ "$factors" = nominal ] && echo "nominal" || echo "SMPI's factors")" <<'PY' | tee "$out/report.txt"
import csv, json, sys
s = json.load(open(sys.argv[1]))
target = float(sys.argv[3])
profile, hosts, ranks, nodes, rate, lat, host_s, rss, factors = sys.argv[4:13]
reached = None
for row in csv.DictReader(open(sys.argv[2])):
    if float(row["avg_test_accuracy"]) >= target:
        reached = (int(row["round"]), float(row["wall_seconds"]))
        break
rounds = s["rounds"]
print(f"profile {profile}: {hosts} hosts, {ranks} ranks, {nodes} nodes, links {rate} / {lat} ({factors}); "
      f"{s['algorithm']} {s.get('compressor') or ''} on {s.get('schedule') or '-'}, model {s['model']}")
print(f"simulated: {s['train_seconds'] / rounds:.6f} s per round ({rounds} rounds, training {s['train_seconds']:.3f} s, "
      f"evaluation {s['eval_seconds']:.3f} s, wall {s['wall_seconds']:.3f} s)")
print(f"accuracy {s['avg_test_accuracy']:.4f} (averaged model {s['averaged_model_test_accuracy']:.4f}); time to {target}: "
      + (f"{reached[1]:.3f} s simulated (round {reached[0]})" if reached else "not reached (at the evaluations logged)"))
print(f"host: {s['host_seconds']:.1f} s to the summary, {host_s} s in all; peak RSS {rss}")
PY
