#!/usr/bin/env bash
# softrdma beside the kernel's rxe in the same emulated guest, in one command:
#
#   bench/guest.sh [BUILD_DIR]        (default: build; built here first)
#
# Boots Debian bookworm's own kernel under QEMU (TCG, 2 vCPUs that poll when idle: a halted
# TCG vCPU takes milliseconds to wake) with an initramfs of Debian packages
# (tests/conformance/guest_lib.sh: the kernel with rdma_rxe, busybox, rdma-core's runtime,
# iproute2; here also perftest, qperf, bash and liburing) and softrdma from BUILD_DIR.
# In the guest, round after round and size by size, the same perftest runs between two
# processes (server in the background, client to 192.0.2.1) on rxe0 (bound to a dummy
# interface; -x the GID index of its IPv4 RoCE v2 GID) and on softrdma0 (under
# `softrdma run`, -x 0), one right after the other so that the guest's noise hits both alike:
#   ib_write_bw at 4 KiB, 64 KiB and 1 MiB; at 64 KiB also softrdma with
#   SOFTRDMA_SAME_HOST=0 (every byte through TCP); ib_write_lat and ib_send_lat at 8 B;
#   and plain TCP over the guest's loopback with qperf (tcp_bw at the same sizes, tcp_lat 8 B).
# Every figure is the median of the rounds that worked; a failed run is recorded with its
# error, not retried. Writes bench/results/guest.md (the table, printed too) and
# bench/results/guest.json (every run). About 10 minutes here.
# Needs root for apt-get (it installs qemu-system-x86, perftest, qperf and the build's
# packages if missing); the host's apt sources must be Debian bookworm's.
# Environment: ROUNDS (3), RUN_TIMEOUT (s per perftest process in the guest, 90),
# SIZES ("4096 65536 1048576"; empty: latency only), SMP (vCPUs, 2),
# GUEST_APPEND (added to the guest kernel's command line, "idle=poll").
set -euo pipefail

src=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
cd "$src"
build=${1:-build}
rounds=${ROUNDS:-3}
run_timeout=${RUN_TIMEOUT:-90}
sizes=${SIZES-4096 65536 1048576}
smp=${SMP:-2}
# Idle vCPUs poll instead of halting: a halted TCG vCPU takes milliseconds to wake, which
# would make every latency here the host's scheduling (rxe 8 B write 4 ms instead of 18 µs).
guest_append=${GUEST_APPEND-idle=poll}
lat_iters=1000
results=bench/results
work=$(mktemp -d /tmp/softrdma-guestbench.XXXXXX)
trap 'rm -rf "$work"' EXIT
guest_tag=guest.sh
# shellcheck source=tests/conformance/guest_lib.sh
. tests/conformance/guest_lib.sh
t_start=$(date +%s)

# 1. Tools, and softrdma built from this checkout.
[ "$(id -u)" -eq 0 ] && apt-get update -qq
need_packages qemu-system-x86 xz-utils build-essential cmake pkg-config libibverbs-dev \
	librdmacm-dev liburing-dev libcmocka-dev perftest qperf
say "building $build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target softrdma softrdma-preload softrdma-sysfs rdmacm-shim \
	-j "$(nproc)" >/dev/null
lib=$build/lib/softrdma

# 2. The guest's packages, and the libraries its programs link.
guest_kernel_package
guest_fetch "$kpkg" busybox-static libibverbs1 ibverbs-providers libnl-3-200 libnl-route-3-200 \
	iproute2 libc6 librdmacm1 perftest qperf bash liburing2
guest_fetch_libs "$root"/usr/bin/ib_* "$root"/usr/bin/qperf "$root"/bin/bash \
	"$root"/bin/ip "$root"/usr/bin/rdma \
	"$root"/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so \
	"$lib"/*.so "$lib"/softrdma-sysfs "$lib"/rdmacm/librdmacm.so.1
guest_vmlinux

# 3. The initramfs: softrdma as installed (bin/softrdma finds lib/softrdma beside it),
# the perftest parser, and the runs.
guest_initrd crc32_generic dummy ib_core ib_uverbs rdma_rxe
mkdir -p "$initrd/softrdma/bin" "$initrd/softrdma/lib"
cp "$build/bin/softrdma" "$initrd/softrdma/bin/"
cp -a "$lib" "$initrd/softrdma/lib/"
cp bench/perftest.awk "$initrd/perftest.awk"
guest_pack <<EOF
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
ip link set lo up
port=20000
runs=/tmp/runs
mkdir -p \$runs
uptime_s() { cut -d' ' -f1 /proc/uptime; }
# pair TEST SIZE ROUND DEVICE PROGRAM ARGS...: one perftest server/client pair on DEVICE;
# prints its line of the summary (bench/summary.sh's format), prefixed RAW.
pair() {
	test=\$1 size=\$2 round=\$3 dev=\$4
	shift 4
	port=\$((port + 1))
	if [ "\$dev" = rxe0 ]; then via="" x=\$g; else via="/softrdma/bin/softrdma run --" x=0; fi
	log=\$runs/\$test.\$size.\$round
	timeout $run_timeout \$via "\$@" -F -d \$dev -x \$x -p \$port >\$log.server 2>&1 &
	spid=\$!
	i=0
	while ! netstat -ltn 2>/dev/null | grep -q ":\$port " && [ \$i -lt 300 ]; do
		sleep 0.1
		i=\$((i + 1))
	done
	t0=\$(uptime_s)
	timeout $run_timeout \$via "\$@" -F -d \$dev -x \$x -p \$port 192.0.2.1 >\$log.client 2>&1
	rc=\$?
	t1=\$(uptime_s)
	# A server whose client failed can wait for ever: everything of this run goes.
	[ \$rc -eq 0 ] || killall -q ib_write_bw ib_write_lat ib_send_lat
	wait \$spid
	case \$test in *_lat*) kind=lat ;; *) kind=bw ;; esac
	vals=\$(awk -v kind=\$kind -v size=\$size -f /perftest.awk \$log.client)
	secs=\$(awk -v a=\$t0 -v b=\$t1 'BEGIN { printf "%.2f", b - a }')
	ok=1 err=""
	if [ \$rc -ne 0 ] || [ -z "\$vals" ]; then
		ok=0 vals="- - - -"
		err="exit \$rc\$([ \$rc -eq 0 ] && echo ', no figure or 0 in its output'): \$(grep -h -iE 'fail|error|couldn|unable|timed out' \$log.client \$log.server | head -3 | tr '\t\n' '  ')"
	fi
	printf 'RAW\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \$test \$size \$round \$ok \$vals \
		\$secs "\$err" "\$* -F -d \$dev -x \$x"
}
# tcp TEST SIZE ROUND: qperf over the loopback, tcp_bw in MB/s or tcp_lat in µs (one way).
tcp() {
	out=\$(timeout $run_timeout qperf 127.0.0.1 -lp 19999 -t 1 -m \$2 -uu \$1 2>&1)
	v=\$(echo "\$out" | awk '\$1 == "bw" { print \$3 / 1e6 } \$1 == "latency" { print \$3 / 1e3 }')
	if [ -n "\$v" ]; then ok=1 err=""; else ok=0 v=- err=\$(echo "\$out" | head -1); fi
	printf 'RAW\t%s\t%s\t%s\t%s\t%s\t-\t-\t-\t0\t%s\t%s\n' \$1 \$2 \$3 \$ok \$v "\$err" "qperf -m \$2 \$1"
}
qperf --listen_port 19999 >/dev/null 2>&1 &
sleep 1
echo "===BENCH BEGIN==="
for r in \$(seq $rounds); do
	for s in $sizes; do
		n=\$((131072000 / s))
		[ \$n -gt 2000 ] && n=2000
		pair write_bw_rxe \$s \$r rxe0 ib_write_bw -s \$s -n \$n
		pair write_bw_softrdma \$s \$r softrdma0 ib_write_bw -s \$s -n \$n
		[ \$s -eq 65536 ] &&
			pair write_bw_softrdma_tcp \$s \$r softrdma0 env SOFTRDMA_SAME_HOST=0 ib_write_bw -s \$s -n \$n
		tcp tcp_bw \$s \$r
	done
	for t in write_lat send_lat; do
		pair \${t}_rxe 8 \$r rxe0 ib_\$t -s 8 -n $lat_iters
		pair \${t}_softrdma 8 \$r softrdma0 ib_\$t -s 8 -n $lat_iters
	done
	tcp tcp_lat 8 \$r
	echo "round \$r done at \$(uptime_s) s"
done
echo "===BENCH END==="
for f in \$runs/*; do
	grep -qiE 'fail|error|couldn|unable' \$f || continue
	echo "--- \$f"
	tail -n 8 \$f
done
EOF

# 4. Boot, and keep the runs' lines.
t_boot=$(date +%s)
guest_boot 3600 -smp "$smp"
guest_finished '===BENCH END===' || exit 1
guest_s=$(($(date +%s) - t_boot))
raw=$work/raw.tsv
# (quotes and backslashes of error messages would break the JSON)
guest_between '===BENCH BEGIN===' '===BENCH END===' | grep '^RAW' | cut -f2- | tr '"\\' "'/" >"$raw"
sed -n '/^===BENCH END===$/,$p' "$work/console.txt" | sed 1d >"$work/failures"
guest_info=$(grep -m1 '^guest:' "$work/console.txt" | cut -d' ' -f2-)

# 5. The summary.
# shellcheck source=bench/summary.sh
. bench/summary.sh
siw_bw=101 rxe_ref_bw=21 tcp_ref_bw=286 siw_lat=117 rxe_ref_lat=42
mkdir -p "$results"
md=$results/guest.md
{
	echo "| test | size | rxe | softrdma | softrdma, TCP path only (SOFTRDMA_SAME_HOST=0) | TCP (qperf) | softrdma ÷ rxe (>1: softrdma ahead) | runs ok (rxe, softrdma) |"
	echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
	for s in $sizes; do
		a=$(med write_bw_rxe "$s")
		b=$(med write_bw_softrdma "$s")
		c=-
		[ "$s" -eq 65536 ] && c=$(fmt "$(med write_bw_softrdma_tcp "$s")" MB/s "$(rng write_bw_softrdma_tcp "$s")")
		echo "| ib_write_bw | $(human "$s") | $(fmt "$a" MB/s "$(rng write_bw_rxe "$s")") | $(fmt "$b" MB/s "$(rng write_bw_softrdma "$s")") | $c | $(fmt "$(med tcp_bw "$s")" MB/s "$(rng tcp_bw "$s")") | $(ratio "$b" "$a") | $(oks write_bw_rxe "$s"), $(oks write_bw_softrdma "$s") |"
	done
	for t in write_lat send_lat; do
		for col in 6 5; do
			a=$(med "${t}_rxe" 8 $col)
			b=$(med "${t}_softrdma" 8 $col)
			c=-
			[ "$t" = write_lat ] && [ $col -eq 5 ] && c=$(fmt "$(med tcp_lat 8)" µs "$(rng tcp_lat 8)")
			echo "| ib_$t, $([ $col -eq 6 ] && echo t_typical || echo t_avg) (one way) | 8 B | $(fmt "$a" µs "$(rng "${t}_rxe" 8 $col)") | $(fmt "$b" µs "$(rng "${t}_softrdma" 8 $col)") | - | $c | $(ratio "$a" "$b") | $(oks "${t}_rxe" 8), $(oks "${t}_softrdma" 8) |"
		done
	done
	echo
	bw=$(med write_bw_softrdma 65536)
	lat=$(med write_lat_softrdma 8 6)
	lat_rxe=$(med write_lat_rxe 8 6)
	verdict() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { print (a >= b ? "met" : "not met") }' || echo "not measured"; }
	echo "Targets: bandwidth at 64 KiB ≥ 2 × siw ($((2 * siw_bw)) MB/s): $(fmt "$bw" MB/s), $(verdict "$bw" $((2 * siw_bw)));"
	echo "ib_write_lat at 8 B (t_typical) ≤ rxe's in the same guest ($(fmt "$lat_rxe" µs)): $(fmt "$lat" µs), $(verdict "$lat_rxe" "$lat")."
	echo
	echo "Reference figures for this kind of machine in such a guest (not measured here; siw is not"
	echo "in Debian's kernel): ib_write_bw 64 KiB rxe ≈ $rxe_ref_bw MB/s, siw ≈ $siw_bw MB/s, plain TCP ≈ $tcp_ref_bw MB/s;"
	echo "ib_write_lat 64 B rxe ≈ $rxe_ref_lat µs, siw ≈ $siw_lat µs."
	echo
	echo "Medians (min-max) of $rounds interleaved rounds in one guest: Debian $kpkg ($guest_info),"
	echo "QEMU TCG, $smp vCPUs, 1 GiB, kernel command line +'$guest_append'; $guest_s s in the guest, $(($(date +%s) - t_start)) s in all; softrdma"
	echo "$(git describe --always --dirty 2>/dev/null || echo unknown). MB/s = 10^6 B/s. ib_write_bw -n: 2000"
	echo "messages, at most 125 MiB; latency -n $lat_iters, t_typical is perftest's median, t_avg its mean (both"
	echo "one way). Every perftest with -F (its CPU-clock check fails under TCG). TCP: qperf tcp_bw -t 1,"
	echo "tcp_lat (one way) over lo. Latency ratio: rxe ÷ softrdma."
} >"$md"
echo
cat "$md"
if [ -s "$work/failures" ]; then
	say "runs that failed, the ends of their logs:"
	cat "$work/failures" >&2
fi

json=$results/guest.json
{
	printf '{\n  "meta": {"date": "%s", "guest": "Debian %s (%s)", "qemu": "TCG, %s vCPUs, 1 GiB, +%s",\n' \
		"$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$kpkg" "$guest_info" "$smp" "$guest_append"
	printf '    "softrdma": "%s", "perftest": "%s", "rounds": %s, "guest_s": %s, "total_s": %s,\n' \
		"$(git describe --always --dirty 2>/dev/null || echo unknown)" \
		"$(cd "$debs" && ls perftest_*.deb | sed 's/^perftest_//; s/_amd64.deb//')" \
		"$rounds" "$guest_s" "$(($(date +%s) - t_start))"
	printf '    "command": "bench/guest.sh %s", "units": {"bw": "MB/s (10^6 B/s)", "lat": "us, one way; values per run: t_avg, t_typical, t_min, p99"},\n' "$build"
	printf '    "reference": {"rxe_write_bw_64k": %s, "siw_write_bw_64k": %s, "tcp_bw_64k": %s, "rxe_write_lat_64": %s, "siw_write_lat_64": %s}},\n' \
		$rxe_ref_bw $siw_bw $tcp_ref_bw $rxe_ref_lat $siw_lat
	printf '  "bandwidth": ['
	sep=""
	for s in $sizes; do
		a=$(med write_bw_rxe "$s")
		b=$(med write_bw_softrdma "$s")
		printf '%s\n    {"test": "ib_write_bw", "size": %s, "rxe": %s, "softrdma": %s, "softrdma_tcp_path": %s, "tcp": %s, "softrdma_over_rxe": %s}' \
			"$sep" "$s" "$(jnum "$a")" "$(jnum "$b")" "$(jnum "$(med write_bw_softrdma_tcp "$s")")" \
			"$(jnum "$(med tcp_bw "$s")")" "$(jnum "$(ratio "$b" "$a")")"
		sep=","
	done
	printf '\n  ],\n  "latency": ['
	sep=""
	for t in write_lat send_lat; do
		a=$(med "${t}_rxe" 8 6)
		b=$(med "${t}_softrdma" 8 6)
		printf '%s\n    {"test": "ib_%s", "size": 8, "rxe_typical": %s, "softrdma_typical": %s, "rxe_avg": %s, "softrdma_avg": %s, "rxe_over_softrdma_typical": %s}' \
			"$sep" "$t" "$(jnum "$a")" "$(jnum "$b")" "$(jnum "$(med "${t}_rxe" 8)")" \
			"$(jnum "$(med "${t}_softrdma" 8)")" "$(jnum "$(ratio "$a" "$b")")"
		sep=","
	done
	printf '\n  ],\n  "tcp_lat_8": %s,\n  "runs": [' "$(jnum "$(med tcp_lat 8)")"
	runs_json
	printf '\n  ]\n}\n'
} >"$json"
say "$(($(date +%s) - t_start)) s; wrote $md and $json"
