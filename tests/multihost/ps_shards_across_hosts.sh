#!/usr/bin/env bash
# The CTR model under --builder ps on 2 hosts x 2 ranks of scripts/cluster.sh: every variable
# in two shards (the tables among them) must be served from both hosts, one shard on each, so
# that each host's link carries half of its rows; not from ranks 0 and 1 of the first host.
# Exit 77 (skipped) where network namespaces cannot be made.
# Arguments: cluster.sh, the ctr_train program.
set -euo pipefail
cluster=$1 program=$2
source "$(dirname "$0")/common.sh"
cluster_up
expect_ranks_by_host

out=$(bash "$cluster" run -np 4 "$program" --builder ps --epochs 1 --steps-per-epoch 20 --held-out 2000 --max-auc-gap 1)
echo "$out"
servers=$(grep '^servers: ' <<<"$out") || { echo "FAIL: ctr_train printed no 'servers:' line" >&2; exit 1; }
# "embedding on ranks 0,2; wide on ranks 1,3; ...": ranks 0-1 are host 0, ranks 2-3 host 1.
shards=0
while read -r name first second; do
  ((first / 2 != second / 2)) || { echo "FAIL: both shards of $name on host $((first / 2)) (ranks $first, $second)" >&2; exit 1; }
  shards=$((shards + 1))
done < <(grep -o '[a-z0-9.]* on ranks [0-9],[0-9]' <<<"$servers" | sed 's/ on ranks / /; s/,/ /')
((shards >= 2)) || { echo "FAIL: expected the two sparse tables in two shards each, found $shards such variables" >&2; exit 1; }
