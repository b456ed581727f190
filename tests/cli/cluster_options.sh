#!/usr/bin/env bash
# cluster.sh refuses a bad command line with exit status 64 and one line that says what is
# wrong, before it makes anything: no shell error, no tc usage text, nothing left behind.
#
#   cluster_options.sh <cluster.sh>
set -uo pipefail
cluster=$1
failures=0
[ "$(id -u)" = 0 ] || { echo "cluster.sh needs root; skipped"; exit 77; }
check() {  # expected text, then the arguments
  local expected=$1 out status
  shift
  out=$(bash "$cluster" "$@" 2>&1)
  status=$?
  if ((status != 64)) || [[ $out != *"$expected"* ]] || (($(wc -l <<<"$out") != 1)) ||
    [[ $out == *"unbound variable"* || $out == *"Usage: tc"* ]]; then
    echo "FAIL: cluster.sh $*: exit status $status, output:"
    echo "$out"
    failures=$((failures + 1))
  else
    echo "ok: cluster.sh $* -> 64: $out"
  fi
}
check "--hosts needs a value" up --hosts
check "--slots needs a value" up --hosts 2 --slots
check "--rate needs a value" up --rate
check "--hosts must be 1 to 200, not 'many'" up --hosts many
check "--hosts must be 1 to 200, not '99999999999999999999'" up --hosts 99999999999999999999
check "--slots must be 1 to 1024 ranks per host, not '0'" up --slots 0
check "rate '0bit' is not a rate of at least 8kbit" up --rate 0bit
check "rate 'fast' is not a rate of at least 8kbit" up --rate fast
check "--cpus must be per-host or shared, not 'all'" up --cpus all
check "unknown option '--nodes' for up" up --nodes 2
check "usage: cluster.sh up" frobnicate
if ip netns list 2>/dev/null | grep -q '^strata-'; then
  echo "FAIL: a refused command line left namespaces behind"
  failures=$((failures + 1))
fi
((failures == 0)) || exit 1
echo "every bad command line of cluster.sh was refused with exit status 64"
