# UCX on the soft device (issue 13): Debian's ucx_perftest between two processes of one run
# (softrdma env), over loopback, UCP tag matching (tag_lat, tag_bw) and RMA (ucp_put_bw,
# ucp_get), once over rc_verbs and once over ud_verbs. UCX may use nothing else: UCX_TLS
# names the verbs transport (rc_v is rc_verbs with ud_verbs only for its wire-up, as UCX's
# own alias has it; self is the process's loopback to itself) and UCX_NET_DEVICES the
# device. Each case checks that both sides exit 0 with a result, that UCX says it put the
# endpoint on that transport and device (UCX_LOG_LEVEL=info: "ep_cfg[0]: tag(rc_verbs/
# softrdma0:1)"), and that the port counters saw the bytes go out. No workaround variable
# is set: UCX runs as it would on a RoCE NIC.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pairs.sh"
. "$(dirname "$0")/env_counters.sh"

command -v ucx_perftest >/dev/null || { fail "ucx_perftest is not installed (ucx-utils; build.sh installs it)"; finish; }
export UCX_NET_DEVICES=softrdma0:1 UCX_LOG_LEVEL=info
unset UCX_UD_ETH_DGID_CHECK

# ucx_perftest's result: "Final: ITERS 50%ile average overall bw_avg bw_overall rate rate"
# (us, MB/s). The "average" columns are the moving average of the last report interval,
# which on a busy machine can hold no iteration (latency inf, bandwidth 0.00); the
# "overall" ones cover the whole run. So: a non-zero overall latency, and for a bandwidth
# test (final_line ITERS bw) a non-zero overall bandwidth; 8-byte messages may show 0.00 MB/s.
final_line() {
	local bw='[0-9.]+'
	[ "${2:-}" = bw ] && bw=$nz
	echo "^Final:$sp$1$sp[0-9.]+$sp([0-9.]+|inf)$sp$nz$sp([0-9.]+|inf)$sp$bw$sp"
}

# perftest_case TLS TL KIND TEST SIZE ITERS MIN_BYTES: one ucx_perftest pair; KIND is how
# UCX names the endpoint's use (tag, rma, rma_am: RMA made of active messages).
perftest_case() {
	local tls=$1 tl=$2 kind=$3 test=$4 size=$5 iters=$6 min=$7 label spid rc=0 before side
	label="$test over $tls"
	next_port || return 1
	before=$(bytes_sent)
	UCX_TLS=$tls timeout -k 5 30 ucx_perftest -p "$port" >"$logs/server" 2>&1 &
	spid=$!
	bg_pids=("$spid")
	server_listens "$spid"
	UCX_TLS=$tls timeout -k 5 30 ucx_perftest 127.0.0.1 -p "$port" -t "$test" -s "$size" \
		-n "$iters" >"$logs/client" 2>&1 || rc=$?
	[ $rc -eq 0 ] || kill "$spid" 2>/dev/null
	wait "$spid" || rc=$((rc ? rc : $?))
	bg_pids=()
	if [ $rc -ne 0 ]; then
		fail "$label: exit $rc"
		sed 's/^/  server| /' "$logs/server" >&2
		sed 's/^/  client| /' "$logs/client" >&2
		return 1
	fi
	pass "$label: both sides exit 0"
	expect_contains "$label: result" "$(<"$logs/client")" \
		"$(final_line "$iters" "$([ "$size" -ge 4096 ] && echo bw)")"
	# The figures, for the log: iterations, latency (us: median, average, overall),
	# bandwidth (MB/s: average, overall), messages per second.
	grep '^Final:' "$logs/client" | sed "s/^/  $label: /"
	for side in server client; do
		expect_contains "$label: $side's endpoint on $tl" "$(<"$logs/$side")" \
			"ep_cfg\\[[0-9]+\\]: $kind\\($tl/softrdma0:1\\)\$"
		expect_absent "$label: $side: no UCX error or warning" "$(<"$logs/$side")" \
			'UCX +(ERROR|WARN)'
	done
	crossed_device "$label" "$before" "$min"
}

# UCX lists the device's transports only if it can open the node (access R_OK|W_OK) and
# read the device's ports; then both verbs transports are on softrdma0:1.
info=$(UCX_LOG_LEVEL=warn timeout 30 ucx_info -d 2>&1)
for tl in rc_verbs ud_verbs; do
	grep -A1 -E "^# +Transport: $tl\$" <<<"$info" | grep -Eq '^# +Device: softrdma0:1$' &&
		pass "ucx_info -d: $tl on softrdma0:1" ||
		{ fail "ucx_info -d lists no $tl on softrdma0:1:"; echo "$info" >&2; }
done
expect_absent "ucx_info -d: no UCX error or warning" "$info" 'UCX +(ERROR|WARN)'

# A message of SIZE bytes ITERS times: the ping-pong sends it both ways.
lat_iters=2000 bw_iters=1000 size=65536
for tl in rc_verbs ud_verbs; do
	tls="${tl},self"
	[ $tl = rc_verbs ] && tls="rc_v,self"
	rma=rma
	[ $tl = ud_verbs ] && rma=rma_am	# UD has no RDMA: UCP emulates it over messages
	perftest_case "$tls" $tl tag tag_lat 8 $lat_iters $((2 * lat_iters * 8))
	perftest_case "$tls" $tl tag tag_bw $size $bw_iters $((bw_iters * size))
	perftest_case "$tls" $tl $rma ucp_put_bw $size $bw_iters $((bw_iters * size))
	perftest_case "$tls" $tl $rma ucp_get $size $bw_iters $((bw_iters * size))
done
finish
