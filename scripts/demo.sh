#!/usr/bin/env bash
# Quick start: installs the dependencies, builds, and trains the Fashion-MNIST MLP on 2 local
# ranks for 10 epochs. Extra arguments go to the example (e.g. --strategy "AllReduce<Native>").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh --if-missing
bash scripts/build.sh --target fashion_mnist
root_flag=""
if [ "$(id -u)" = 0 ]; then root_flag="--allow-run-as-root"; fi
mpirun -np 2 $root_flag --oversubscribe --bind-to none build/examples/fashion_mnist --epochs 10 "$@"
