# Debian's unmodified perftest between two processes on loopback, on both engines: every
# RC benchmark, several QPs, 1 MiB messages and the -a size sweep. Each must finish and
# report a non-zero bandwidth or latency.
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/pairs.sh"

nz='([1-9][0-9]*\.[0-9]+|0\.[0-9]*[1-9][0-9]*)'	# a non-zero decimal
# Result lines: "#bytes #iterations peak average msgrate" with a non-zero average, and
# "#bytes #iterations t_min t_max t_typical t_avg ..." with non-zero typical and average.
sp='[[:space:]]+'	# perftest separates its columns with spaces and tabs
bw_line() { echo "^ *$1$sp$2$sp[0-9.]+$sp$nz$sp[0-9.]+"; }
lat_line() { echo "^ *$1$sp$2$sp[0-9.]+$sp[0-9.]+$sp$nz$sp$nz"; }

# perf LABEL PROGRAM ARGS...: one benchmark, the server on GID 0, the client to localhost;
# run a second time only if perftest could not calibrate its clock the first time.
perf() {
	local label=$1 try rc calibrate_retry
	shift
	for try in 1 2; do
		next_port || return 1
		calibrate_retry=$((try == 1))
		run_pair "$label" "$@" -d softrdma0 -x 0 -p "$port" -- "$@" -d softrdma0 -x 0 -p "$port" localhost
		rc=$?
		[ $rc -ne 2 ] && return $rc
	done
}

# result LABEL SIDES PATTERN: the result line on each of SIDES ("client", "server client").
result() {
	local side out
	for side in $2; do
		out=$srv_out
		[ "$side" = client ] && out=$cli_out
		expect_contains "$1: $side result" "$out" "$3"
	done
}

n=200
for engine in uring epoll; do
	export SOFTRDMA_ENGINE=$engine
	for t in ib_write_bw ib_read_bw ib_send_bw; do
		perf "$engine $t" $t -n $n && result "$engine $t" "server client" "$(bw_line 65536 $n)"
	done
	perf "$engine ib_atomic_bw" ib_atomic_bw -n $n &&
		result "$engine ib_atomic_bw" "server client" "$(bw_line 8 $n)"
	for t in ib_write_lat ib_send_lat; do
		perf "$engine $t" $t -n $n && result "$engine $t" "server client" "$(lat_line 2 $n)"
	done
	# The server of ib_read_lat is passive and prints no result.
	perf "$engine ib_read_lat" ib_read_lat -n $n && result "$engine ib_read_lat" client "$(lat_line 2 $n)"

	# Four QPs: the iterations column counts all of them.
	perf "$engine ib_write_bw -q 4" ib_write_bw -n 100 -q 4 &&
		result "$engine ib_write_bw -q 4" "server client" "$(bw_line 65536 400)"
	perf "$engine ib_write_bw 1 MiB" ib_write_bw -n 50 -s 1048576 &&
		result "$engine ib_write_bw 1 MiB" "server client" "$(bw_line 1048576 50)"

	# -a: every size from 2 to 2^23 bytes on the client; the server prints the last one.
	label="$engine ib_write_bw -a"
	if perf "$label" ib_write_bw -n 20 -a; then
		missing=""
		for ((b = 2; b <= 8388608; b *= 2)); do
			grep -Eq -- "$(bw_line $b 20)" <<<"$cli_out" || missing+=" $b"
		done
		[ -z "$missing" ] && pass "$label: client results for all 23 sizes" ||
			{ fail "$label: no result with a non-zero bandwidth for sizes$missing in:"; echo "$cli_out" >&2; }
		result "$label" server "$(bw_line 8388608 20)"
	fi
done
finish
