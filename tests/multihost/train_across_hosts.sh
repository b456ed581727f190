#!/usr/bin/env bash
# Fashion-MNIST on 2 hosts x 2 ranks of scripts/cluster.sh (TCP between the hosts, shared
# memory within each): the ranks must be spread over both hosts, and 60 updates must end on
# exactly the parameters of the same run on 4 ranks of one host. Exit 77 (skipped) where
# network namespaces cannot be made.
# Arguments: cluster.sh, the fashion_mnist program, compare_params, the one-host parameters, a work folder,
# then the strategy's flags (those of the one-host run, less what simulates its nodes).
set -euo pipefail
cluster=$1 program=$2 compare=$3 reference=$4 work=$5
shift 5
source "$(dirname "$0")/common.sh"
rm -rf "$work" && mkdir -p "$work"
cluster_up

expect_ranks_by_host

bash "$cluster" run -np 4 "$program" --epochs 1 --max-steps 60 "$@" --save-params "$work/params.2x2.bin"
"$compare" --tolerance 0 "$reference" "$work/params.2x2.bin"
