#!/usr/bin/env bash
# What libsoftrdma-preload.so costs the calls it interposes but does not handle: runs
# interpose_cost alternately without and with the interposer, 5 rounds each, and prints
# the median of each. Usage: bench/interpose.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
bin="$build/bin/interpose_cost"
preload="$build/lib/softrdma/libsoftrdma-preload.so"
[ -x "$bin" ] && [ -e "$preload" ] || { echo "build first: cmake --build $build" >&2; exit 1; }

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for round in 1 2 3 4 5; do
	"$bin" >>/tmp/interpose.plain.$$
	LD_PRELOAD="$preload" SOFTRDMA_DEV_NODE=/dev/infiniband/uverbs0 "$bin" >>/tmp/interpose.pre.$$
done
for key in stat_ns open_close_ns socket_close_ns; do
	plain=$(sed -E "s/.*\"$key\": ([0-9.]+).*/\1/" /tmp/interpose.plain.$$ | median)
	pre=$(sed -E "s/.*\"$key\": ([0-9.]+).*/\1/" /tmp/interpose.pre.$$ | median)
	printf '%-16s without %8s ns   with interposer %8s ns\n' "$key" "$plain" "$pre"
done
rm -f /tmp/interpose.plain.$$ /tmp/interpose.pre.$$
