# The port counters where tools look: one run's device tree (softrdma env) shared by a
# server and a client; ports/1/counters and hw_counters must show at least the bytes and
# packets the programs moved, live while they run, the same as `softrdma counters`, and
# the same through Prometheus' node_exporter (its infiniband collector, --path.sysfs at
# the run's tree, on loopback).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pairs.sh"	# TMPDIR: the scratch dir, so the env's tree goes with it
unset SOFTRDMA_VERBOSE
eval "$("$SOFTRDMA" env)" || { fail "softrdma env"; finish; }
port_dir=$SYSFS_PATH/class/infiniband/softrdma0/ports/1
c() { cat "$port_dir/counters/$1"; }
hw() { cat "$port_dir/hw_counters/$1"; }

# pair LABEL SERVER_ARGS... -- CLIENT_ARGS...: both processes directly in this shell's env.
pair() {
	local label=$1 srv=() spid rc=0
	shift
	while [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	timeout 60 "${srv[@]}" >"$logs/server" 2>&1 &
	spid=$!
	server_listens "$spid"
	timeout 60 "$@" >"$logs/client" 2>&1 || rc=$?
	wait "$spid" || rc=$?
	[ $rc -eq 0 ] && pass "$label: both sides exit 0" ||
		{ fail "$label: exit $rc"; sed 's/^/  | /' "$logs/server" "$logs/client" >&2; }
	return $rc
}

# at_least LABEL VALUE MIN
at_least() {
	[ "$2" -ge "$3" ] 2>/dev/null && pass "$1: $2 >= $3" || fail "$1: '$2', want at least $3"
}

next_port
n=2000 size=65536
before_tx=$(c port_xmit_data)
pair "ib_write_bw" ib_write_bw -d softrdma0 -x 0 -s $size -n $n -p "$port" -- \
	ib_write_bw -d softrdma0 -x 0 -s $size -n $n -p "$port" localhost
# Both processes have exited: their last counts are published.
xmit=$(c port_xmit_data) rcv=$(c port_rcv_data)
at_least "port_xmit_data (4-octet words) covers the $((n * size)) bytes written" \
	$(((xmit - before_tx) * 4)) $((n * size))
at_least "port_rcv_data covers them" $((rcv * 4)) $((n * size))
at_least "port_xmit_packets" "$(c port_xmit_packets)" $n
at_least "port_rcv_packets" "$(c port_rcv_packets)" $n
[ "$xmit" = "$rcv" ] && pass "one run sends what it receives ($xmit words)" ||
	fail "sent $xmit words, received $rcv"
[ "$(hw sent_pkts)" = "$(c port_xmit_packets)" ] && [ "$(hw rcvd_pkts)" = "$(c port_rcv_packets)" ] &&
	pass "hw_counters sent_pkts/rcvd_pkts are the port's packets" ||
	fail "sent_pkts $(hw sent_pkts) rcvd_pkts $(hw rcvd_pkts) vs $(c port_xmit_packets) $(c port_rcv_packets)"
[ "$(c port_rcv_errors)" = 0 ] && [ "$(c symbol_error)" = 0 ] && pass "no errors" ||
	fail "port_rcv_errors $(c port_rcv_errors)"

out=$("$SOFTRDMA" counters)
expect_contains "softrdma counters: port_xmit_data as in sysfs" "$out" "^port_xmit_data +$xmit\$"
expect_contains "softrdma counters: sent_pkts as in sysfs" "$out" "^sent_pkts +$(hw sent_pkts)\$"
out=$("$SOFTRDMA" counters --qp)
procs=$(grep -c '^process [0-9]* (ib_write_bw, exited)$' <<<"$out")
[ "$procs" = 2 ] && pass "--processes: both ib_write_bw processes" || fail "$procs processes in: $out"
expect_contains "--qp: the QPs' own counts" "$out" '^  qp 0x[0-9a-f]{6}$'
expect_contains "--qp: a QP received the data" "$out" "^    port_rcv_data +[0-9]{8,}\$"

# UD: each side sends n datagrams of size bytes (ibv_ud_pingpong's -s counts the GRH's 40).
next_port
n=500 size=2048
tx0=$(c port_xmit_data) p0=$(c port_xmit_packets) r0=$(hw rdma_recvs)
pair "ibv_ud_pingpong" ibv_ud_pingpong -g 0 -p "$port" -n $n -s $size -- \
	ibv_ud_pingpong -g 0 -p "$port" -n $n -s $size localhost
at_least "UD: port_xmit_packets grew by both sides' datagrams" $(($(c port_xmit_packets) - p0)) $((2 * n))
at_least "UD: port_xmit_data grew by their payloads" $((($(c port_xmit_data) - tx0) * 4)) \
	$((2 * n * (size - 40)))
at_least "UD: rdma_recvs counts the receives" $(($(hw rdma_recvs) - r0)) $((2 * n))

# Live: values move while a run goes on, at most a second behind.
next_port
ib_write_bw -d softrdma0 -x 0 -D 4 -p "$port" >"$logs/server" 2>&1 &
spid=$!
server_listens "$spid"
ib_write_bw -d softrdma0 -x 0 -D 4 -p "$port" localhost >"$logs/client" 2>&1 &
cpid=$!
sleep 1.5
a=$(c port_xmit_data)
sleep 1.5
b=$(c port_xmit_data)
wait "$cpid"; wait "$spid"
[ "$b" -gt "$a" ] && [ "$a" -gt "$xmit" ] && pass "live: $xmit, then $a, then $b words while the run goes on" ||
	fail "not live: $xmit, $a, $b"

# node_exporter reads the tree as it reads /sys (it multiplies the data counters by 4).
exporter=$(command -v prometheus-node-exporter || echo /usr/bin/prometheus-node-exporter)
if [ ! -x "$exporter" ]; then
	fail "prometheus-node-exporter is not installed (build.sh installs it)"
	finish
fi
next_port
# Not an RDMA program: without the soft device's preloads (a sanitizer build's among them).
plain=(env -u LD_PRELOAD -u LD_LIBRARY_PATH -u RDMAV_DRIVERS)
"${plain[@]}" "$exporter" --path.sysfs="$SYSFS_PATH" --collector.disable-defaults \
	--collector.infiniband --web.listen-address="127.0.0.1:$port" >"$logs/exporter" 2>&1 &
epid=$!
at_exit 'kill "$epid" 2>/dev/null; wait "$epid" 2>/dev/null'
metrics=""
for _ in $(seq 50); do
	metrics=$("${plain[@]}" curl -sf --max-time 5 "http://127.0.0.1:$port/metrics") && break
	sleep 0.1
done
[ -n "$metrics" ] && pass "node_exporter serves /metrics on 127.0.0.1:$port" ||
	{ fail "node_exporter did not answer"; sed 's/^/  | /' "$logs/exporter" >&2; finish; }
# metric_is LABEL NAME VALUE: the sample of NAME for softrdma0 port 1 is VALUE (Prometheus
# writes large ones as floats: 3.0951551732e+10).
metric_is() {
	local got
	got=$(awk -v n="$2{device=\"softrdma0\",port=\"1\"}" '$1 == n { print $2 }' <<<"$metrics")
	if [ -n "$got" ] && awk -v a="$got" -v b="$3" 'BEGIN { exit !(a + 0 == b + 0) }'; then
		pass "$1: $got"
	else
		fail "$1: node_exporter shows '$got', the tree $3"
	fi
}
metric_is "node_exporter: bytes transmitted (4 x port_xmit_data)" \
	node_infiniband_port_data_transmitted_bytes_total $(($(c port_xmit_data) * 4))
metric_is "node_exporter: bytes received" node_infiniband_port_data_received_bytes_total \
	$(($(c port_rcv_data) * 4))
metric_is "node_exporter: packets transmitted" node_infiniband_port_packets_transmitted_total \
	"$(c port_xmit_packets)"
metric_is "node_exporter: packets received" node_infiniband_port_packets_received_total \
	"$(c port_rcv_packets)"
expect_absent "node_exporter: no collector error" "$metrics" \
	'^node_scrape_collector_success\{collector="infiniband"\} 0'
finish
