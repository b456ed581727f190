#!/usr/bin/env bash
# A cluster of H "hosts" inside this machine: each host is a network namespace with its own
# address, hostname and shaped link, all joined by a bridge in a namespace of its own, so that
# OpenMPI runs across them as across machines (shared memory within a host, TCP between hosts).
#
#   scripts/cluster.sh up [--hosts H] [--slots S] [--rate RATE] [--cpus per-host|shared]
#                                                      # build it (default 2 hosts of 2 ranks, 10gbit links,
#                                                      # each host on cores of its own)
#   scripts/cluster.sh run -np 4 program args...       # mpirun across it (from host 0)
#   scripts/cluster.sh shape HOST RATE                 # change one host's link rate (e.g. 100mbit)
#   scripts/cluster.sh link HOST up|down               # cut or restore one host's link (later
#                                                      # jobs run on the hosts whose link is up)
#   scripts/cluster.sh status                          # what exists
#   scripts/cluster.sh cores HOST                      # the cores HOST's processes may run on
#   scripts/cluster.sh down                            # remove everything it made
#
# Addresses come from the benchmarking range 198.18.0.0/15 and are given only to the namespaces
# made here; no route leads out of them. Needs root. Exit status 77 when namespaces cannot be
# made (tests report themselves skipped then).
set -euo pipefail

prefix=strata-                     # every namespace, hostname and state file made here starts so
switch=${prefix}switch
subnet=198.18.0
state=/run/strata-cluster

fail() { echo "cluster.sh: $*" >&2; exit 1; }
usage_error() { echo "cluster.sh: $*" >&2; exit 64; }  # a wrong command line: sysexits' EX_USAGE
host_ns() { echo "${prefix}h$1"; }
address() { echo "$subnet.$(($1 + 1))"; }
host_count() { [ -f "$state/hosts" ] && cat "$state/hosts" || echo 0; }
# The command prefix that keeps a process of host $1 on the host's cores (none where they are shared).
on_cores() { [ -s "$state/cpus.$1" ] && echo "taskset -c $(cat "$state/cpus.$1")" || true; }

# A rate as tc writes it (10gbit, 500mbit) in bits per second; fails with a message otherwise.
rate_bits() {
  local number=${1%bit} bits
  bits=$([[ $1 == *bit ]] && numfmt --from=si "${number^^}" 2>/dev/null) && [[ $bits =~ ^[0-9]+$ ]] && ((bits >= 8000)) ||
    usage_error "rate '$1' is not a rate of at least 8kbit as tc writes it (e.g. 10gbit, 500mbit)"
  echo "$bits"
}

# tbf needs a burst of at least rate / HZ, and under 64 KB it caps the rate well below the
# setting; one millisecond of the rate, at least 64 KB, keeps the shaped rate within a few %.
shape_link() {  # namespace device rate
  local bits
  bits=$(rate_bits "$3")
  local burst=$((bits / 8 / 1000 > 65536 ? bits / 8 / 1000 : 65536))
  ip netns exec "$1" tc qdisc replace dev "$2" root tbf rate "$3" burst "$burst" latency 20ms
}

# Each host gets cores of its own, as machines have: an equal share of the cores this script
# may use. Shared, the scheduler places any host's ranks on any core: a host borrows another's
# core while it idles, and two ranks that talk across the "network" from one core pass their
# bytes through its cache, which no network does (on 2 cores, which ranks met on a core swung
# Hierarchical's all-reduce by 1.5x for seconds at a time). The kernel's work of delivering a
# host's packets still runs on its sender's core. Where hosts outnumber cores, they share them.
give_cores() {  # hosts per-host|shared
  local cores=() range c h per
  rm -f "$state"/cpus.*
  [ "$2" = per-host ] || return 0
  for range in $(awk '/^Cpus_allowed_list/ {gsub(",", " ", $2); print $2}' /proc/self/status); do
    for ((c = ${range%-*}; c <= ${range#*-}; ++c)); do cores+=("$c"); done
  done
  per=$((${#cores[@]} / $1))
  ((per > 0)) || { echo "cluster.sh: $1 hosts on ${#cores[@]} cores: the hosts share them" >&2; return 0; }
  for ((h = 0; h < $1; ++h)); do
    (IFS=,; echo "${cores[*]:h * per:per}") >"$state/cpus.$h"
  done
}

describe_cores() {  # hosts
  local h out=""
  [ -s "$state/cpus.0" ] || { echo "the hosts sharing all cores"; return; }
  for ((h = 0; h < $1; ++h)); do out+="${out:+, }h$h on core(s) $(cat "$state/cpus.$h")"; done
  echo "$out"
}

down() {
  local ns
  for ns in $(ip netns list | awk '{print $1}' | grep "^$prefix" || true); do
    # OpenMPI's daemons and ranks left by a killed mpirun would hold the namespace and its segments.
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns"
  done
  rm -f /dev/shm/vader_segment."$prefix"* 2>/dev/null || true
  rm -rf "$state"
}

up() {
  local hosts=2 slots=2 rate=10gbit cpus=per-host
  while [ $# -gt 0 ]; do
    case $1 in
      --hosts | --slots | --rate | --cpus)
        [ $# -ge 2 ] || usage_error "$1 needs a value"
        case $1 in --hosts) hosts=$2 ;; --slots) slots=$2 ;; --rate) rate=$2 ;; --cpus) cpus=$2 ;; esac
        shift 2 ;;
      *) usage_error "unknown option '$1' for up (--hosts H, --slots RANKS-PER-HOST, --rate RATE, --cpus per-host|shared)" ;;
    esac
  done
  [[ $cpus == per-host || $cpus == shared ]] || usage_error "--cpus must be per-host or shared, not '$cpus'"
  [[ $hosts =~ ^[0-9]{1,3}$ ]] && ((hosts >= 1 && hosts <= 200)) || usage_error "--hosts must be 1 to 200, not '$hosts'"
  [[ $slots =~ ^[0-9]{1,4}$ ]] && ((slots >= 1 && slots <= 1024)) ||
    usage_error "--slots must be 1 to 1024 ranks per host, not '$slots'"
  rate_bits "$rate" >/dev/null
  down  # idempotent: whatever an earlier run left is replaced
  # Any failure from here on (set -e, or fail's exit) removes what was made.
  trap 'status=$?; echo "cluster.sh: building the cluster failed; removing what was made" >&2; down; exit $status' EXIT
  mkdir -p "$state"
  ip netns add "$switch"
  ip -n "$switch" link add br0 type bridge
  ip -n "$switch" link set br0 up
  local h ns
  for ((h = 0; h < hosts; ++h)); do
    ns=$(host_ns $h)
    ip netns add "$ns"
    ip link add "h$h" netns "$switch" type veth peer name eth0 netns "$ns"
    ip -n "$switch" link set "h$h" master br0 up
    ip -n "$ns" link set lo up
    # A connection to a host that is gone, with data in flight (an abort that must reach it),
    # fails after 3 retransmissions (~3 s), not after TCP's quarter of an hour of them
    # (a per-namespace setting; on real machines, the same sysctl).
    ip netns exec "$ns" sysctl -qw net.ipv4.tcp_retries2=3
    ip -n "$ns" addr add "$(address $h)/24" dev eth0
    ip -n "$ns" link set eth0 up
    shape_link "$ns" eth0 "$rate"       # what the host sends
    shape_link "$switch" "h$h" "$rate"  # what it receives
  done
  give_cores "$hosts" "$cpus"
  echo "$slots" >"$state/slots"
  echo "$hosts" >"$state/hosts"
  echo "$rate" >"$state/rate"
  # OpenMPI starts its daemon on each host through this "remote shell": into the host's
  # namespace, under the host's own hostname (OpenMPI names its shared-memory segments by host).
  cat >"$state/rsh" <<EOF
#!/usr/bin/env bash
# Called by mpirun as: rsh [options] ADDRESS COMMAND...
while [[ \$1 == -* ]]; do shift; done
host=\${1##*.}; shift
cores=\$(cat "$state/cpus.\$((host - 1))" 2>/dev/null)
exec ip netns exec "$prefix"h\$((host - 1)) \${cores:+taskset -c "\$cores"} unshare --uts sh -c "hostname $prefix"h\$((host - 1))"; \$*"
EOF
  chmod +x "$state/rsh"
  # An mpirun of the cluster, for launchers that take one (strata-launch --mpirun).
  printf '#!/usr/bin/env bash\nexec bash %q run "$@"\n' "$(cd "$(dirname "$0")" && pwd)/$(basename "$0")" >"$state/mpirun"
  chmod +x "$state/mpirun"
  trap - EXIT
  echo "cluster.sh: $hosts hosts ($(address 0)..$(address $((hosts - 1)))), links shaped to $rate, $(describe_cores "$hosts"); mpirun: $state/mpirun"
}

# The hosts whose link is up, as an OpenMPI hostfile: a job started after a host was lost runs
# on the others, as a scheduler would place it.
write_hostfile() {
  local h slots
  slots=$(cat "$state/slots")
  : >"$state/hostfile"
  for ((h = 0; h < $(host_count); ++h)); do
    [ -e "$state/down.$h" ] || echo "$(address $h) slots=$slots" >>"$state/hostfile"  # mpirun fills host 0 first
  done
}

run() {
  (($(host_count) > 0)) || fail "no cluster: run 'scripts/cluster.sh up' first"
  write_hostfile
  # OpenMPI's daemons probe their idle connections after STRATA_CLUSTER_KEEPALIVE_S (2 s), then
  # every 1 s, 3 times: a host that is gone is given up in about 5 s (by default, minutes), so
  # that a job ends in seconds even when one host cannot be told.
  local mpi=(mpirun --hostfile "$state/hostfile" --mca plm_rsh_agent "$state/rsh"
             --mca btl tcp,self,vader --mca btl_tcp_if_include "$subnet.0/24" --mca oob_tcp_if_include "$subnet.0/24"
             --mca oob_tcp_keepalive_time "${STRATA_CLUSTER_KEEPALIVE_S:-2}" --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3
             --bind-to none)
  mpi+=(--allow-run-as-root)  # cluster.sh runs as root only
  # Where a host's ranks outnumber its cores (all hosts' ranks the machine's, with shared cores),
  # OpenMPI, told that each host has --slots cores, would spin in its blocking calls without
  # giving up the core: a spinning rank holds the core its partner on the same host needs, and
  # each message within a host waits for the scheduler (2 x 2 ranks on 2 cores: 4 ms one way
  # for 8 bytes, 5 us with yielding). So OpenMPI yields when idle, as it does on its own where a
  # host's ranks exceed its slots. The count is the hosts' slots, whatever the job's -np; nproc
  # without the OpenMP variables that change its answer. Real machines have cores of their own.
  local ranks cores
  if [ -s "$state/cpus.0" ]; then
    ranks=$(cat "$state/slots")
    cores=$(tr , '\n' <"$state/cpus.0" | wc -l)
  else
    ranks=$(($(wc -l <"$state/hostfile") * $(cat "$state/slots")))
    cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
  fi
  if ((ranks > cores)); then
    export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}
  fi
  # mpirun itself runs on host 0, as a job started on a real cluster's first node.
  # shellcheck disable=SC2046  # the prefix is words
  exec ip netns exec "$(host_ns 0)" $(on_cores 0) unshare --uts sh -c "hostname ${prefix}h0 && exec \"\$@\"" sh "${mpi[@]}" "$@"
}

host_index() {
  (($(host_count) > 0)) || fail "no cluster: run 'scripts/cluster.sh up' first"
  [[ $1 =~ ^[0-9]{1,3}$ ]] && ((10#$1 < $(host_count))) ||
    usage_error "no host '$1': the cluster has hosts 0..$(($(host_count) - 1))"
}

if [ "$(id -u)" != 0 ]; then
  echo "cluster.sh: needs root (network namespaces, veth pairs, tc)" >&2
  exit 77
fi
for tool in ip tc unshare numfmt mpirun; do
  command -v "$tool" >/dev/null || fail "needs $tool (apt-get install iproute2 util-linux coreutils openmpi-bin)"
done
if [ "${1:-}" = up ]; then
  probe=${prefix}probe-$$
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "cluster.sh: network namespaces cannot be created here (ip netns add failed)" >&2
    exit 77
  fi
  ip netns del "$probe"
fi

command=${1:-}
shift || true
case $command in
  up) up "$@" ;;
  down) down ;;
  run) run "$@" ;;
  shape)
    [ $# = 2 ] || usage_error "usage: cluster.sh shape HOST RATE (e.g. shape 1 100mbit)"
    host_index "$1"; shape_link "$(host_ns "$1")" eth0 "$2"; shape_link "$switch" "h$1" "$2" ;;
  link)
    host_index "${1:-x}"
    case ${2:-} in
      down) ip -n "$(host_ns "$1")" link set eth0 down && touch "$state/down.$1" ;;
      up) ip -n "$(host_ns "$1")" link set eth0 up && rm -f "$state/down.$1" ;;
      *) usage_error "link HOST up|down, not '${2:-}'" ;;
    esac ;;
  status)
    ip netns list | grep "^$prefix" || { echo "no cluster"; exit 0; }
    describe_cores "$(host_count)"
    write_hostfile && echo "hosts with their link up:" && cat "$state/hostfile" ;;
  cores)  # a host's own cores, else (shared) all that the cluster's processes may use
    host_index "${1:-x}"
    cat "$state/cpus.$1" 2>/dev/null || taskset -pc $$ | sed 's/.*: //' ;;
  *) usage_error "usage: cluster.sh up [--hosts H] [--slots S] [--rate RATE] [--cpus per-host|shared] | run MPIRUN-ARGS... | shape HOST RATE | link HOST up|down | status | cores HOST | down" ;;
esac
