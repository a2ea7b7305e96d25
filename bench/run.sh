#!/usr/bin/env bash
# The benchmark: softrdma against raw TCP on this machine, in one command.
#
#   bench/run.sh [BUILD_DIR]        (default: build)
#
# - perftest between two processes on softrdma0 (server in the background, client to
#   localhost): ib_write_bw/ib_read_bw/ib_send_bw and ib_write_bw -q 4 at 8 B-1 MiB
#   (large payloads take the same-host path), ib_write_bw/ib_send_bw again from 4 KiB with
#   SOFTRDMA_SAME_HOST=0 (every byte through TCP),
#   ib_write_lat/ib_read_lat/ib_send_lat at 8 B and 4 KiB (ib_write_lat at 8 B again with
#   packet capture on, SOFTRDMA_PCAP; at 8 B again over the TCP path, and with every WRITE
#   and READ as a frame, SOFTRDMA_DIRECT_WRITE=0, as ib_read_lat and ib_read_bw at 8 B), and
#   the message rate of 8-byte writes with a deep queue (also as frames);
# - small messages beside 2 x nproc busy loops: ib_write_lat and ib_write_bw at 8 B, and
#   qperf's TCP figures under the same load;
# - the raw-TCP reference at the same sizes: qperf tcp_bw and tcp_lat over loopback;
#   the softrdma and TCP runs of one size follow each other, round after round, so machine
#   noise hits both alike; every figure is the median of the rounds that worked;
# - scale (bench/qp_scale.c, bench/qp_procs.c): set-up time, RSS and fds for 1, 100 and 1000
#   connected RC QP pairs in one process and between two processes, with one 8-byte RDMA
#   WRITE on every QP, the CPU an idle process holding 1000 pairs
#   uses over 5 s, and ibv_reg_mr time for 4 KiB-1 GiB of untouched memory.
#
# Prints the comparison table (also bench/results/latest.md), writes
# bench/results/latest.json and plots bench/results/bandwidth.png. A run that fails or hangs
# (every run has a timeout) is recorded with its error and counted; nothing is retried.
# Missing Debian packages are installed when run as root; otherwise the script prints the
# apt-get line and stops. Environment: ROUNDS (5), RUN_TIMEOUT (s per run, 25),
# BUDGET_S (no new round starts that would end after this many seconds, 480),
# SOFTRDMA_ENGINE (passed through to the engine).
set -uo pipefail
repo=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
cd "$repo" || exit 1
build=${1:-build}
rounds=${ROUNDS:-5}
run_timeout=${RUN_TIMEOUT:-25}
budget=${BUDGET_S:-480}
results=bench/results

packages=(build-essential cmake pkg-config libibverbs-dev librdmacm-dev liburing-dev
	libcmocka-dev ibverbs-utils perftest qperf gnuplot-nox iproute2 procps)

. tools/packages.sh
install_missing run.sh "${packages[@]}"
for tool in ib_write_bw qperf gnuplot ss timeout; do
	command -v "$tool" >/dev/null || { echo "run.sh: $tool not found" >&2; exit 1; }
done
echo "run.sh: building $build"
{ cmake -S . -B "$build" >/dev/null && cmake --build "$build" -j "$(nproc)" >/dev/null; } ||
	{ echo "run.sh: the build failed (cmake --build $build)" >&2; exit 1; }
softrdma="$build/bin/softrdma"
qp_scale="$build/bin/qp_scale"
qp_procs="$build/bin/qp_procs"
if [ ! -x "$softrdma" ] || [ ! -x "$qp_scale" ] || [ ! -x "$qp_procs" ]; then
	echo "run.sh: $softrdma, $qp_scale or $qp_procs missing" >&2
	exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/softrdma-bench.XXXXXX")
raw="$work/raw.tsv"	# test size round ok v1 v2 v3 v4 seconds error command
: >"$raw"
declare -A live	# background processes started here and not yet reaped
cleanup() {
	local p
	for p in "${!live[@]}"; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now() { date +%s.%N; }
t_start=$(now)
elapsed() { awk -v a="$t_start" -v b="$(now)" 'BEGIN { printf "%d", b - a }'; }

# A port below the ephemeral range that no socket uses (tools/free_port.sh).
. "$build/lib/softrdma/free_port.sh"
next_port() {
	port=$(free_port) || { echo "run.sh: no free TCP port" >&2; exit 1; }
}

# wait_port PORT PID: until PORT listens (at most 10 s), or the process PID is gone.
wait_port() {
	local i
	for i in $(seq 200); do
		ss -ltnH "sport = :$1" 2>/dev/null | grep -q . && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

# stop PID SECONDS: waits up to SECONDS for the (timeout-wrapped) process, then kills it and
# its process group (timeout forwards the signal to everything it started).
stop() {
	local i n=$(($2 * 20))
	for ((i = 0; i < n; i++)); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.05
	done
	kill "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	unset "live[$1]"
}

errors_of() { # LOG...: the first error lines of the logs, one line, JSON-safe
	# shellcheck disable=SC1003
	grep -h -iE 'fail|error|couldn|unable|scnt|timed out|usage' "$@" 2>/dev/null | head -5 |
		tr '\t"\\' '  /' | tr -s ' \n' ' ' | sed 's/^ //; s/ $//'
}

record() { # TEST SIZE ROUND OK V1 V2 V3 V4 SECONDS ERROR COMMAND
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$raw"
}

# perftest NAME SIZE ROUND PROGRAM ARGS...: one server/client pair on softrdma0. Bandwidth
# tests record MB/s (10^6 B/s; perftest prints MiB/s) and Mmsg/s; latency tests record
# t_avg, t_typical, t_min and the 99th percentile in µs.
perftest() {
	local name=$1 size=$2 round=$3 spid rc=0 t0 t1 log_s log_c kind vals err cmd secs
	shift 3
	next_port
	cmd="$* -d softrdma0 -x 0 -p $port [localhost]"
	log_s="$work/$name.$size.$round.server"
	log_c="$work/$name.$size.$round.client"
	timeout -k 2 "$run_timeout" "$softrdma" run -- "$@" -d softrdma0 -x 0 -p "$port" \
		>"$log_s" 2>&1 &
	spid=$!
	live[$spid]=1
	if ! wait_port "$port" "$spid"; then
		stop "$spid" 0
		record "$name" "$size" "$round" 0 - - - - 0 "server never listened: $(errors_of "$log_s")" "$cmd"
		return
	fi
	t0=$(now)
	timeout -k 2 "$run_timeout" "$softrdma" run -- "$@" -d softrdma0 -x 0 -p "$port" \
		localhost >"$log_c" 2>&1 || rc=$?
	t1=$(now)
	# A server whose client failed can wait forever (ib_send_bw does): stop it at once.
	if [ "$rc" -ne 0 ]; then stop "$spid" 0; else stop "$spid" 5; fi
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
	case $name in
	*_lat | *_lat_*) kind=lat ;;
	*) kind=bw ;;
	esac
	vals=$(awk -v kind="$kind" -v size="$size" -f bench/perftest.awk "$log_c")
	if [ "$rc" -eq 0 ] && [ -n "$vals" ]; then
		# shellcheck disable=SC2086
		record "$name" "$size" "$round" 1 $vals "$secs" "" "$cmd"
		printf '  %-14s %8s B  ok    %s (%ss)\n' "$name" "$size" "${vals%% *}" "$secs"
	else
		err=$(errors_of "$log_c" "$log_s")
		[ "$rc" -eq 124 ] && err="timed out after ${run_timeout}s; $err"
		record "$name" "$size" "$round" 0 - - - - "$secs" "exit $rc: $err" "$cmd"
		printf '  %-14s %8s B  FAIL  exit %s: %s\n' "$name" "$size" "$rc" "$err"
	fi
}

# tcp SIZE ROUND [SUFFIX]: qperf tcp_bw and tcp_lat over loopback (records bw as MB/s and
# Mmsg/s; latency, one way as qperf reports it, in µs), as tcp_bw$SUFFIX and tcp_lat$SUFFIX.
qperf_port=0
tcp() {
	local size=$1 round=$2 sfx=${3:-} rc=0 log="$work/tcp.$1.$2${3:-}" bw rate lat cmd
	cmd="qperf localhost -lp $qperf_port -t 1 -m $size -uu -v tcp_bw tcp_lat"
	# shellcheck disable=SC2086
	timeout -k 2 "$run_timeout" $cmd >"$log" 2>&1 || rc=$?
	read -r bw rate lat < <(awk '/^tcp_bw:/ { s = "bw" } /^tcp_lat:/ { s = "lat" }
		s == "bw" && $1 == "bw" { bw = $3 } s == "bw" && $1 == "msg_rate" { r = $3 }
		s == "lat" && $1 == "latency" { l = $3 }
		END { printf "%s %s %s\n", bw == "" ? "-" : bw / 1e6, r == "" ? "-" : r / 1e6,
		      l == "" ? "-" : l / 1e3 }' "$log")
	if [ "$rc" -eq 0 ] && [ "$bw" != - ]; then
		record "tcp_bw$sfx" "$size" "$round" 1 "$bw" "$rate" - - 0 "" "$cmd"
	else
		record "tcp_bw$sfx" "$size" "$round" 0 - - - - 0 "exit $rc: $(errors_of "$log")" "$cmd"
	fi
	if [ "$rc" -eq 0 ] && [ "$lat" != - ]; then
		record "tcp_lat$sfx" "$size" "$round" 1 "$lat" - - - 0 "" "$cmd"
	else
		record "tcp_lat$sfx" "$size" "$round" 0 - - - - 0 "exit $rc: $(errors_of "$log")" "$cmd"
	fi
	printf '  %-14s %8s B  %s  %s MB/s, %s µs one way\n' "tcp$sfx" "$size" \
		"$([ "$rc" -eq 0 ] && echo 'ok  ' || echo FAIL)" "$bw" "$lat"
}

# hog_start / hog_stop: 2 x nproc busy loops, as a loaded CI runner has (tests/stress/loaded.sh
# runs the tests beside the same).
hogs=()
hog_start() {
	local i
	for ((i = 0; i < 2 * $(nproc); i++)); do
		(while :; do :; done) &
		hogs+=($!)
		live[$!]=1
	done
}
hog_stop() {
	local p
	for p in "${hogs[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${hogs[@]}"; do wait "$p" 2>/dev/null; unset "live[$p]"; done
	hogs=()
}

sizes=(8 64 4096 65536 1048576)
iters() { # SIZE: perftest -n for a run of about 1-3 s here (perftest's client adds 1 s)
	case $1 in
	8 | 64 | 4096) echo 20000 ;;
	65536) echo 10000 ;;
	*) echo 2000 ;;
	esac
}

engine=${SOFTRDMA_ENGINE:-epoll, driven by polls too (the default; io_uring with SOFTRDMA_POLL_PROGRESS=0)}
rev=$(git -C "$repo" describe --always --dirty 2>/dev/null || echo unknown)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
echo "run.sh: softrdma $rev, engine $engine, $rounds rounds, $(nproc) cpus, load $load_start"

# --- scale: QP pairs, idle CPU, memory registration ------------------------------------
scale_json=()
echo "== scale (bench/qp_scale.c)"
for n in 1 100 1000; do
	idle=0
	[ "$n" -eq 1000 ] && idle=5
	out=$(timeout -k 2 120 "$softrdma" run -- "$qp_scale" pairs "$n" "$idle" 2>"$work/scale.err")
	rc=$?
	[ -n "$out" ] || out="{\"mode\": \"pairs\", \"pairs\": $n, \"ok\": false, \"failed_at\": \"exit $rc: $(errors_of "$work/scale.err")\"}"
	scale_json+=("$out")
	echo "  $out"
done
procs_json=()
for n in 1 100 1000; do
	out=$(timeout -k 2 120 "$softrdma" run -- "$qp_procs" "$n" 2>"$work/procs.err")
	rc=$?
	[ -n "$out" ] || out="{\"mode\": \"procs\", \"qps_per_process\": $n, \"ok\": false, \"failed_at\": \"exit $rc: $(errors_of "$work/procs.err")\"}"
	procs_json+=("$out")
	echo "  $out"
done
mr_json=$(timeout -k 2 120 "$softrdma" run -- "$qp_scale" mr 2>"$work/mr.err")
[ -n "$mr_json" ] || mr_json="{\"mode\": \"mr\", \"ok\": false, \"error\": \"$(errors_of "$work/mr.err")\"}"
echo "  $mr_json"

# --- the qperf server, for all rounds ----------------------------------------------------
next_port
qperf_port=$port
timeout -k 2 3600 qperf --listen_port "$qperf_port" >"$work/qperf.server" 2>&1 &
qperf_pid=$!
live[$qperf_pid]=1
wait_port "$qperf_port" "$qperf_pid" || { echo "run.sh: qperf server did not start" >&2; exit 1; }

# --- rounds: softrdma and TCP, size by size ---------------------------------------------
done_rounds=0
round_s=0
round_load=()
for ((r = 1; r <= rounds; r++)); do
	if [ "$r" -gt 1 ] && [ $(($(elapsed) + round_s)) -gt "$budget" ]; then
		echo "run.sh: stopping after $done_rounds rounds (another would pass ${budget}s)"
		break
	fi
	r0=$(elapsed)
	round_load+=("\"$(cut -d' ' -f1 /proc/loadavg)\"")
	echo "== round $r of $rounds ($(elapsed)s elapsed, load $(cut -d' ' -f1-3 /proc/loadavg))"
	for s in "${sizes[@]}"; do
		n=$(iters "$s")
		tcp "$s" "$r"
		perftest write_bw "$s" "$r" ib_write_bw -s "$s" -n "$n"
		perftest read_bw "$s" "$r" ib_read_bw -s "$s" -n "$n"
		perftest send_bw "$s" "$r" ib_send_bw -s "$s" -n "$n"
		perftest write_bw_q4 "$s" "$r" ib_write_bw -q 4 -s "$s" -n "$((n / 4))"
		if [ "$s" -ge 4096 ]; then
			# The same payloads with the same-host path off: every byte through TCP.
			perftest write_bw_tcp "$s" "$r" env SOFTRDMA_SAME_HOST=0 ib_write_bw -s "$s" -n "$n"
			perftest send_bw_tcp "$s" "$r" env SOFTRDMA_SAME_HOST=0 ib_send_bw -s "$s" -n "$n"
		fi
		if [ "$s" -eq 8 ] || [ "$s" -eq 4096 ]; then
			perftest write_lat "$s" "$r" ib_write_lat -s "$s" -n 3000
			perftest read_lat "$s" "$r" ib_read_lat -s "$s" -n 3000
			perftest send_lat "$s" "$r" ib_send_lat -s "$s" -n 3000
		fi
	done
	# Message rate: 8-byte writes, 512 deep, posted 16 at a time (perftest's MsgRate).
	perftest msgrate 8 "$r" ib_write_bw -s 8 -t 512 -l 16 -n 48000
	# What packet capture costs when on (off, it is the write_lat run above).
	perftest pcap_write_lat 8 "$r" env SOFTRDMA_PCAP="$work/capture.pcapng" \
		ib_write_lat -s 8 -n 3000
	rm -f "$work"/capture.*pcapng
	# Small messages (docs/performance.md): 8 B latency over the TCP path too, and the
	# 8 B runs again beside 2 x nproc busy loops, with TCP's under the same load.
	perftest write_lat_tcp 8 "$r" env SOFTRDMA_SAME_HOST=0 ib_write_lat -s 8 -n 3000
	perftest write_bw_tcp 8 "$r" env SOFTRDMA_SAME_HOST=0 ib_write_bw -s 8 -n "$(iters 8)"
	# And with every WRITE as a frame (no direct placement): what the responder's thread costs.
	perftest write_lat_frames 8 "$r" env SOFTRDMA_DIRECT_WRITE=0 ib_write_lat -s 8 -n 3000
	perftest write_bw_frames 8 "$r" env SOFTRDMA_DIRECT_WRITE=0 ib_write_bw -s 8 -n "$(iters 8)"
	perftest msgrate_frames 8 "$r" env SOFTRDMA_DIRECT_WRITE=0 ib_write_bw -s 8 -t 512 -l 16 -n 48000
	perftest read_lat_frames 8 "$r" env SOFTRDMA_DIRECT_WRITE=0 ib_read_lat -s 8 -n 3000
	perftest read_bw_frames 8 "$r" env SOFTRDMA_DIRECT_WRITE=0 ib_read_bw -s 8 -n "$(iters 8)"
	hog_start
	tcp 8 "$r" _loaded
	# Fewer iterations: on a busy 2-core machine 3000 round trips can pass RUN_TIMEOUT.
	perftest write_lat_loaded 8 "$r" ib_write_lat -s 8 -n 1000
	perftest write_bw_loaded 8 "$r" ib_write_bw -s 8 -n 5000
	perftest write_lat_frames_loaded 8 "$r" env SOFTRDMA_DIRECT_WRITE=0 ib_write_lat -s 8 -n 1000
	hog_stop
	done_rounds=$r
	round_s=$(($(elapsed) - r0))
done
stop "$qperf_pid" 0
runtime=$(elapsed)
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# --- summary -----------------------------------------------------------------------------
# shellcheck source=bench/summary.sh
. bench/summary.sh
nan() { [ -n "$1" ] && echo "$1" || echo NaN; }
tcp_lat_for() { # TEST SIZE: the TCP figure a latency test compares with
	local b
	b=$(med tcp_lat "$2")
	# perftest reports a READ's whole round trip; qperf (and ib_write/send_lat) half of one.
	[ "$1" = read_lat ] && [ -n "$b" ] && b=$(awk -v v="$b" 'BEGIN { print 2 * v }')
	echo "$b"
}
# jget: value of "key" in the one-line JSON objects qp_scale prints (flat, no nesting).
jget_awk='function jget(s, k,   v) {
	if (!match(s, "\"" k "\": (\"[^\"]*\"|[^,}]*)")) return ""
	v = substr(s, RSTART + length(k) + 4, RLENGTH - length(k) - 4); gsub(/"/, "", v); return v }'

mkdir -p "$results"
md="$results/latest.md"
{
	echo "| test | size | softrdma: median (min-max) | TCP (qperf): median (min-max) | ratio of medians (>1: softrdma ahead) | softrdma runs ok |"
	echo "| --- | --- | --- | --- | --- | --- |"
	for t in write_bw write_bw_tcp read_bw send_bw send_bw_tcp write_bw_q4; do
		case $t in
		write_bw_q4) label="BW write, 4 QPs" ;;
		*_tcp) label="BW ${t%_bw_tcp}, TCP path only" ;;
		*) label="BW ${t%_bw}" ;;
		esac
		for s in "${sizes[@]}"; do
			[ "${t%_tcp}" != "$t" ] && [ "$s" -lt 4096 ] && continue
			a=$(med "$t" "$s")
			b=$(med tcp_bw "$s")
			echo "| $label | $(human "$s") | $(fmt "$a" MB/s "$(rng "$t" "$s")") | $(fmt "$b" MB/s "$(rng tcp_bw "$s")") | $(ratio "$a" "$b") | $(oks "$t" "$s") |"
		done
	done
	for t in write_lat send_lat read_lat; do
		what="one way"
		[ "$t" = read_lat ] && what="round trip"
		for s in 8 4096; do
			a=$(med "$t" "$s")
			b=$(tcp_lat_for "$t" "$s")
			tr=$(rng tcp_lat "$s")
			[ "$t" = read_lat ] && [ -n "$tr" ] && tr="$(echo "$tr" | awk -F- '{ printf "%.1f-%.1f", 2 * $1, 2 * $2 }')"
			echo "| lat ${t%_lat} ($what, avg) | $(human "$s") | $(fmt "$a" µs "$(rng "$t" "$s")") | $(fmt "$b" µs "$tr") | $(ratio "$b" "$a") | $(oks "$t" "$s") |"
		done
	done
	a=$(med pcap_write_lat 8)
	b=$(med write_lat 8)
	echo "| lat write (one way, avg), packet capture on; beside it: capture off | 8 B | $(fmt "$a" µs "$(rng pcap_write_lat 8)") | $(fmt "$b" µs "$(rng write_lat 8)") | $(ratio "$b" "$a") | $(oks pcap_write_lat 8) |"
	a=$(med msgrate 8 6)
	b=$(med tcp_bw 8 6)
	echo "| msg rate, 8 B writes | 8 B | $(fmt "$a" M/s "$(rng msgrate 8 6)") | $(fmt "$b" M/s "$(rng tcp_bw 8 6)") | $(ratio "$a" "$b") | $(oks msgrate 8) |"
	echo
	echo "| small messages, 8 B | softrdma: median (min-max) | TCP (qperf): median (min-max) | ratio of medians (>1: softrdma ahead) | softrdma runs ok |"
	echo "| --- | --- | --- | --- | --- |"
	# rate_row LABEL TEST: TEST's 8 B message rate against qperf's.
	rate_row() {
		local a b
		a=$(med "$2" 8 6)
		b=$(med tcp_bw 8 6)
		echo "| $1 | $(fmt "$a" M/s "$(rng "$2" 8 6)") | $(fmt "$b" M/s "$(rng tcp_bw 8 6)") | $(ratio "$a" "$b") | $(oks "$2" 8) |"
	}
	rate_row "msg rate, writes without posting lists (ib_write_bw -s 8)" write_bw
	rate_row "msg rate without posting lists, WRITEs as frames (SOFTRDMA_DIRECT_WRITE=0)" write_bw_frames
	rate_row "msg rate without posting lists, TCP path only (SOFTRDMA_SAME_HOST=0)" write_bw_tcp
	rate_row "msg rate, writes in posting lists of 16 (ib_write_bw -s 8 -t 512 -l 16)" msgrate
	rate_row "the same, WRITEs as frames (SOFTRDMA_DIRECT_WRITE=0)" msgrate_frames
	rate_row "msg rate, READs without posting lists (ib_read_bw -s 8)" read_bw
	rate_row "the same, READs as frames (SOFTRDMA_DIRECT_WRITE=0)" read_bw_frames
	for t in read_lat read_lat_frames; do
		label=""
		[ "$t" = read_lat_frames ] && label=", READs as frames (SOFTRDMA_DIRECT_WRITE=0)"
		a=$(med "$t" 8 6)
		b=$(tcp_lat_for read_lat 8)
		echo "| lat read p50 (t_typical, round trip)$label | $(fmt "$a" µs "$(rng "$t" 8 6)") | $(fmt "$b" µs) | $(ratio "$b" "$a") | $(oks "$t" 8) |"
		echo "| lat read p99$label | $(fmt "$(med "$t" 8 8)" µs "$(rng "$t" 8 8)") | | | $(oks "$t" 8) |"
	done
	for t in write_lat write_lat_tcp write_lat_frames write_lat_loaded write_lat_frames_loaded; do
		case $t in
		write_lat) label="" tl=tcp_lat ;;
		write_lat_tcp) label=", TCP path only" tl=tcp_lat ;;
		write_lat_frames) label=", WRITEs as frames (SOFTRDMA_DIRECT_WRITE=0)" tl=tcp_lat ;;
		write_lat_loaded) label=", beside 2 x nproc busy loops" tl=tcp_lat_loaded ;;
		*) label=", as frames, beside 2 x nproc busy loops" tl=tcp_lat_loaded ;;
		esac
		a=$(med "$t" 8 6)
		b=$(med "$tl" 8)
		echo "| lat write p50 (t_typical)$label | $(fmt "$a" µs "$(rng "$t" 8 6)") | $(fmt "$b" µs "$(rng "$tl" 8)") | $(ratio "$b" "$a") | $(oks "$t" 8) |"
		echo "| lat write p99$label | $(fmt "$(med "$t" 8 8)" µs "$(rng "$t" 8 8)") | | | $(oks "$t" 8) |"
	done
	a=$(med write_bw_loaded 8 6)
	b=$(med tcp_bw_loaded 8 6)
	echo "| msg rate without posting lists, beside 2 x nproc busy loops | $(fmt "$a" M/s "$(rng write_bw_loaded 8 6)") | $(fmt "$b" M/s "$(rng tcp_bw_loaded 8 6)") | $(ratio "$a" "$b") | $(oks write_bw_loaded 8) |"
	a=$(med write_lat_loaded 8 6)
	b=$(med write_lat 8 6)
	echo "| lat write p50: loaded ÷ quiet (target ≤ 2) | $(ratio "$a" "$b") | | | |"
	echo
	echo "TCP's latency is qperf's average (it gives no percentiles), one way."
	echo
	echo "| same-host path ÷ TCP path (SOFTRDMA_SAME_HOST=0) | size | same-host | TCP path | ratio |"
	echo "| --- | --- | --- | --- | --- |"
	for t in write send; do
		for s in 4096 65536 1048576; do
			a=$(med "${t}_bw" "$s")
			b=$(med "${t}_bw_tcp" "$s")
			echo "| BW $t | $(human "$s") | $(fmt "$a" MB/s) | $(fmt "$b" MB/s) | $(ratio "$a" "$b") |"
		done
	done
	echo
	echo "| connected RC QP pairs | set-up (create + INIT/RTR/RTS) | per pair | RSS after | RSS per pair | fds | one 8 B write on each QP | ok |"
	echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
	for j in "${scale_json[@]}"; do
		echo "$j" | awk "$jget_awk"'{
			printf "| %s | %.1f ms | %s µs | %.1f MiB | %s KiB | %s | %.1f ms | %s%s |\n",
			       jget($0, "pairs"), jget($0, "setup_s") * 1000, jget($0, "setup_us_per_pair"),
			       jget($0, "rss_kb_after_writes") / 1024, jget($0, "rss_kb_per_pair"),
			       jget($0, "fds_after"), jget($0, "writes_s") * 1000, jget($0, "ok"),
			       jget($0, "failed_at") == "" ? "" : " (" jget($0, "failed_at") ")" }'
	done
	echo
	echo "| RC QPs per process, two processes (bench/qp_procs.c) | set-up, both sides connected | RSS per QP (parent, child) | one 8 B write on each QP | ok |"
	echo "| --- | --- | --- | --- | --- |"
	for j in "${procs_json[@]}"; do
		echo "$j" | awk "$jget_awk"'{
			printf "| %s | %.1f ms | %s KiB, %s KiB | %.1f ms | %s%s |\n", jget($0, "qps_per_process"),
			       jget($0, "setup_s") * 1000, jget($0, "rss_kb_per_qp_parent"),
			       jget($0, "rss_kb_per_qp_child"), jget($0, "writes_s") * 1000, jget($0, "ok"),
			       jget($0, "failed_at") == "" ? "" : " (" jget($0, "failed_at") ")" }'
	done
	for j in "${scale_json[@]}"; do
		echo "$j" | awk "$jget_awk"'jget($0, "idle_s") > 0 {
			printf "\nIdle: a process holding %s connected pairs used %s%% of one CPU over %s s (utime+stime of all threads: /proc/self/stat, 10 ms ticks; getrusage: %s%%).\n",
			       jget($0, "pairs"), jget($0, "idle_cpu_pct"), jget($0, "idle_s"), jget($0, "idle_cpu_pct_rusage") }'
	done
	echo
	echo "| ibv_reg_mr, untouched mmap | median | min | max | ibv_dereg_mr median | RSS change |"
	echo "| --- | --- | --- | --- | --- | --- |"
	echo "$mr_json" | tr '{' '\n' | grep '"bytes"' | awk "$jget_awk"'{
		b = jget($0, "bytes") + 0
		if (b >= 1073741824) h = (b / 1073741824) " GiB"
		else if (b >= 1048576) h = (b / 1048576) " MiB"
		else h = (b / 1024) " KiB"
		printf "| %s | %s µs | %s µs | %s µs | %s µs | %+d KiB |\n", h, jget($0, "reg_us_median"),
		       jget($0, "reg_us_min"), jget($0, "reg_us_max"), jget($0, "dereg_us_median"),
		       jget($0, "rss_kb_registered") - jget($0, "rss_kb_before") }'
	echo
	echo "Medians of $done_rounds interleaved rounds; ${runtime}s in all; engine $engine; softrdma $rev;"
	echo "load average $load_start at the start, $load_end at the end. MB/s = 10^6 bytes/s (perftest's"
	echo "MiB/s converted). Latency: perftest t_avg against qperf tcp_lat (one way, half a round trip)."
} >"$md"
echo
cat "$md"

# --- JSON ----------------------------------------------------------------------------------
json="$results/latest.json"
{
	printf '{\n  "meta": {"date": "%s", "host": "%s", "kernel": "%s", "cpus": %s, "softrdma": "%s",\n' \
		"$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(hostname)" "$(uname -r)" "$(nproc)" "$rev"
	printf '    "engine": "%s", "perftest": "%s", "qperf": "%s", "rounds": %s, "runtime_s": %s,\n' \
		"$engine" "$(dpkg-query -W -f='${Version}' perftest 2>/dev/null)" \
		"$(dpkg-query -W -f='${Version}' qperf 2>/dev/null)" "$done_rounds" "$runtime"
	printf '    "loadavg_start": "%s", "loadavg_end": "%s", "loadavg_1min_per_round": [%s],\n' \
		"$load_start" "$load_end" "$(IFS=,; echo "${round_load[*]}")"
	printf '    "command": "bench/run.sh %s", "rounds_requested": %s, "run_timeout_s": %s,\n' \
		"$build" "$rounds" "$run_timeout"
	printf '    "units": {"bw": "MB/s (10^6 B/s)", "msgrate": "million messages/s", "lat": "us, perftest t_avg; write/send/tcp one way, read round trip"}},\n'
	printf '  "bandwidth": ['
	sep=""
	for s in "${sizes[@]}"; do
		b=$(med tcp_bw "$s")
		printf '%s\n    {"size": %s, "tcp": %s' "$sep" "$s" "$(jnum "$b")"
		for t in write_bw write_bw_tcp read_bw send_bw send_bw_tcp write_bw_q4; do
			k=${t/_bw/}
			a=$(med "$t" "$s")
			printf ', "%s": %s, "%s_vs_tcp": %s, "%s_ok": "%s"' "$k" "$(jnum "$a")" "$k" \
				"$(jnum "$(ratio "$a" "$b")")" "$k" "$(oks "$t" "$s")"
		done
		printf '}'
		sep=","
	done
	printf '\n  ],\n  "latency": ['
	sep=""
	for t in write_lat send_lat read_lat; do
		for s in 8 4096; do
			a=$(med "$t" "$s")
			b=$(tcp_lat_for "$t" "$s")
			printf '%s\n    {"test": "%s", "size": %s, "avg_us": %s, "typical_us": %s, "min_us": %s, "p99_us": %s, "tcp_us": %s, "tcp_over_softrdma": %s, "ok": "%s"}' \
				"$sep" "$t" "$s" "$(jnum "$a")" "$(jnum "$(med "$t" "$s" 6)")" "$(jnum "$(med "$t" "$s" 7)")" \
				"$(jnum "$(med "$t" "$s" 8)")" "$(jnum "$b")" "$(jnum "$(ratio "$b" "$a")")" "$(oks "$t" "$s")"
			sep=","
		done
	done
	a=$(med msgrate 8 6)
	b=$(med tcp_bw 8 6)
	printf '\n  ],\n  "capture": {"test": "ib_write_lat -s 8, SOFTRDMA_PCAP", "avg_us": %s, "off_avg_us": %s, "off_over_on": %s, "ok": "%s"},' \
		"$(jnum "$(med pcap_write_lat 8)")" "$(jnum "$(med write_lat 8)")" \
		"$(jnum "$(ratio "$(med write_lat 8)" "$(med pcap_write_lat 8)")")" "$(oks pcap_write_lat 8)"
	printf '\n  "msgrate": {"test": "ib_write_bw -s 8 -t 512 -l 16", "mmsg_s": %s, "tcp_8B_mmsg_s": %s, "ratio": %s, "ok": "%s"},\n' \
		"$(jnum "$a")" "$(jnum "$b")" "$(jnum "$(ratio "$a" "$b")")" "$(oks msgrate 8)"
	printf '  "small": {"msgrate_no_lists_mmsg_s": %s, "tcp_mmsg_s": %s, "lat_p50_us": %s, "lat_p99_us": %s, "tcp_path_lat_p50_us": %s, "tcp_path_lat_p99_us": %s, "tcp_lat_us": %s,\n' \
		"$(jnum "$(med write_bw 8 6)")" "$(jnum "$(med tcp_bw 8 6)")" "$(jnum "$(med write_lat 8 6)")" \
		"$(jnum "$(med write_lat 8 8)")" "$(jnum "$(med write_lat_tcp 8 6)")" \
		"$(jnum "$(med write_lat_tcp 8 8)")" "$(jnum "$(med tcp_lat 8)")"
	printf '    "frames": {"msgrate_no_lists_mmsg_s": %s, "lat_p50_us": %s, "lat_p99_us": %s, "loaded_lat_p50_us": %s, "loaded_lat_p99_us": %s},\n' \
		"$(jnum "$(med write_bw_frames 8 6)")" "$(jnum "$(med write_lat_frames 8 6)")" \
		"$(jnum "$(med write_lat_frames 8 8)")" "$(jnum "$(med write_lat_frames_loaded 8 6)")" \
		"$(jnum "$(med write_lat_frames_loaded 8 8)")"
	printf '    "loaded": {"lat_p50_us": %s, "lat_p99_us": %s, "tcp_lat_us": %s, "msgrate_no_lists_mmsg_s": %s, "tcp_mmsg_s": %s, "lat_p50_loaded_over_quiet": %s}},\n' \
		"$(jnum "$(med write_lat_loaded 8 6)")" "$(jnum "$(med write_lat_loaded 8 8)")" \
		"$(jnum "$(med tcp_lat_loaded 8)")" "$(jnum "$(med write_bw_loaded 8 6)")" \
		"$(jnum "$(med tcp_bw_loaded 8 6)")" \
		"$(jnum "$(ratio "$(med write_lat_loaded 8 6)" "$(med write_lat 8 6)")")"
	printf '  "scale": ['
	sep=""
	for j in "${scale_json[@]}"; do
		printf '%s\n    %s' "$sep" "$j"
		sep=","
	done
	printf '\n  ],\n  "procs": ['
	sep=""
	for j in "${procs_json[@]}"; do
		printf '%s\n    %s' "$sep" "$j"
		sep=","
	done
	printf '\n  ],\n  "mr": %s,\n  "runs": [' "$mr_json"
	runs_json
	printf '\n  ]\n}\n'
} >"$json"

# --- plot ----------------------------------------------------------------------------------
dat="$work/bw.dat"
for s in "${sizes[@]}"; do
	echo "$s $(nan "$(med tcp_bw "$s")") $(nan "$(med write_bw "$s")") $(nan "$(med read_bw "$s")") $(nan "$(med send_bw "$s")") $(nan "$(med write_bw_tcp "$s")")"
done >"$dat"
gnuplot <<GNUPLOT 2>"$work/gnuplot.err" || echo "run.sh: gnuplot failed: $(cat "$work/gnuplot.err")" >&2
set terminal pngcairo noenhanced size 900,560 font ",11"
set output "$results/bandwidth.png"
set title "Bandwidth vs message size, softrdma (perftest) and TCP (qperf), loopback, $(nproc) cores\nmedian of $done_rounds interleaved rounds, $(date -u +%Y-%m-%d), softrdma $rev"
set logscale xy
set xlabel "message size"
set ylabel "MB/s (10^6 bytes/s)"
set xtics ("8 B" 8, "64 B" 64, "4 KiB" 4096, "64 KiB" 65536, "1 MiB" 1048576)
set format y "%g"
set grid
set key top left
set label 1 "no point: no run of that size worked (bench/results/latest.md)" at graph 0.99, graph 0.03 right font ",9"
plot "$dat" using 1:2 with linespoints lw 2 pt 7 title "TCP (qperf tcp_bw)", \
     "$dat" using 1:3 with linespoints lw 2 pt 5 title "softrdma RDMA WRITE (ib_write_bw)", \
     "$dat" using 1:4 with linespoints lw 2 pt 9 title "softrdma RDMA READ (ib_read_bw)", \
     "$dat" using 1:5 with linespoints lw 2 pt 11 title "softrdma SEND (ib_send_bw)", \
     "$dat" using 1:6 with linespoints lw 2 pt 13 dt 2 title "softrdma RDMA WRITE, TCP path only (SOFTRDMA_SAME_HOST=0)"
GNUPLOT
echo
echo "run.sh: ${runtime}s; wrote $json, $md and $results/bandwidth.png"
