#!/usr/bin/env bash
# The soak: two processes on softrdma0 moving data for a given time, every byte
# checked (bench/soak.c), not part of the test suite.
#
#   bench/soak.sh [SECONDS] [MAX_BYTES] [BUILD_DIR]     (default: 600 s, 1 MiB, build)
#
# The client sends messages of 1 byte to MAX_BYTES, each filled from its sequence number;
# the server regenerates and compares every byte and checks the order; the last message
# says how many were sent. Prints progress every 10 s and the totals; exits 0 only when
# everything sent was received, in order, intact. SOFTRDMA_FAULTS and SOFTRDMA_ENGINE pass
# through (e.g. SOFTRDMA_FAULTS="all:drop=0.1%" soaks the retransmission path too).
set -uo pipefail
repo=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
seconds=${1:-600} max=${2:-1048576} build=${3:-$repo/build}
softrdma=$build/bin/softrdma soak=$build/bin/soak_rdma
[ -x "$soak" ] || { echo "soak.sh: build first ($soak missing)" >&2; exit 2; }
logs=$(mktemp -d "${TMPDIR:-/tmp}/softrdma-soak.XXXXXX")
trap 'kill $spid 2>/dev/null; wait; rm -rf "$logs"' EXIT

. "$build/lib/softrdma/free_port.sh"
port=$(free_port) || { echo "soak.sh: no free TCP port" >&2; exit 1; }
"$softrdma" run -- "$soak" server "$port" "$max" >"$logs/server" 2>&1 &
spid=$!
for ((i = 0; i < 100; i++)); do
	[ -n "$(ss -ltnH "sport = :$port")" ] && break
	sleep 0.1
done
start=$(date +%s)
timeout -k 5 $((seconds + 120)) "$softrdma" run -- "$soak" client 127.0.0.1 "$port" "$seconds" "$max" |
	tee "$logs/client"
crc=${PIPESTATUS[0]}
# A failed client leaves the server waiting for its last message: it gets 10 s.
timeout $(( crc == 0 ? 60 : 10 )) tail --pid="$spid" -f /dev/null || kill "$spid"
wait "$spid"; src=$?
cat "$logs/server"
echo "soak: $(($(date +%s) - start)) s, client exit $crc, server exit $src"
[ "$crc" -eq 0 ] && [ "$src" -eq 0 ]
