# perftest and ibv_rc_pingpong between two network namespaces joined by a veth pair, on both
# engines. In each namespace `softrdma run` builds the GID table from that namespace's
# addresses; both sides use the GID of their veth address, the client dials the server's.
. "$(dirname "$0")/lib.sh"

if [ "$(id -u)" -ne 0 ]; then
	echo "skipped: needs root for network namespaces"
	exit 0
fi

scratch_dir logs
export TMPDIR=$logs	# `softrdma run` trees of a killed run go with the scratch dir
export SOFTRDMA_VERBOSE=1	# each side says which engine it started
bg_pids=()
# Names and addresses unique per run; the addresses exist only inside the two namespaces.
ns_srv=softrdma-$$-srv ns_cli=softrdma-$$-cli
veth_srv=srdma$$s veth_cli=srdma$$c
net=10.$((128 + $$ / 256 % 128)).$(($$ % 256))
ip_srv=$net.1 ip_cli=$net.2
cleanup() {
	local p
	for p in "${bg_pids[@]}"; do kill "$p" 2>/dev/null; done
	wait
	ip netns del "$ns_srv" 2>/dev/null
	ip netns del "$ns_cli" 2>/dev/null
	ip link del "$veth_srv" 2>/dev/null	# only if it never left this namespace
	rm -rf "${cleanup_dirs[@]}"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

setup_netns() {
	ip netns add "$ns_srv" &&
	ip netns add "$ns_cli" &&
	ip link add "$veth_srv" type veth peer name "$veth_cli" &&
	ip link set "$veth_srv" netns "$ns_srv" &&
	ip link set "$veth_cli" netns "$ns_cli" &&
	ip -n "$ns_srv" addr add "$ip_srv/24" dev "$veth_srv" &&
	ip -n "$ns_cli" addr add "$ip_cli/24" dev "$veth_cli" &&
	ip -n "$ns_srv" link set lo up && ip -n "$ns_srv" link set "$veth_srv" up &&
	ip -n "$ns_cli" link set lo up && ip -n "$ns_cli" link set "$veth_cli" up
}
if ! err=$(setup_netns 2>&1); then
	fail "cannot set up the namespaces $ns_srv and $ns_cli with a veth pair as root: $err"
	finish
fi
pass "namespaces $ns_srv ($ip_srv) and $ns_cli ($ip_cli) joined by $veth_srv-$veth_cli"
srv_in=(ip netns exec "$ns_srv")
cli_in=(ip netns exec "$ns_cli")

# gid_index NS IPV4: the index of IPV4's GID in the table `softrdma devices` shows in NS.
gid_index() {
	local gid
	gid=0000:0000:0000:0000:0000:ffff:$(printf '%02x%02x:%02x%02x' ${2//./ })
	ip netns exec "$1" "$SOFTRDMA" devices 2>&1 | awk -v gid="$gid" '$2 == gid { print $1 }'
}
gid_srv=$(gid_index "$ns_srv" "$ip_srv")
gid_cli=$(gid_index "$ns_cli" "$ip_cli")
if [ -z "$gid_srv" ] || [ -z "$gid_cli" ]; then
	fail "no GID for the veth address: server index '$gid_srv', client index '$gid_cli'"
	ip netns exec "$ns_srv" "$SOFTRDMA" devices >&2
	ip netns exec "$ns_cli" "$SOFTRDMA" devices >&2
	finish
fi
pass "GID index $gid_srv is $ip_srv in $ns_srv, $gid_cli is $ip_cli in $ns_cli"

# A fresh namespace has every port free; still take one nothing uses.
port=$((20000 + $$ % 600 * 20))
# next_port: sets $port to the next port no socket in the server's namespace uses.
next_port() {
	local i
	for ((i = 0; i < 200; i++)); do
		port=$((port >= 31999 ? 20000 : port + 1))
		[ -z "$("${srv_in[@]}" ss -tanH "( sport = :$port or dport = :$port )")" ] && return 0
	done
	fail "no free TCP port in 20000-31999 near $port"
	return 1
}

# run_pair LABEL SERVER_CMD... -- CLIENT_CMD...: both under `softrdma run` and `timeout`, the
# server in $ns_srv, the client in $ns_cli once the server listens on $port. Sets srv_out
# and cli_out; fails (showing both commands and outputs) unless both sides exit 0. With
# calibrate_retry=1, a run whose only fault is perftest's clock calibration returns 2.
run_pair() {
	local label=$1 srv=() cli=() spid cpid srv_rc cli_rc i side
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	cli=("$@")
	timeout -k 5 60 "${srv_in[@]}" "$SOFTRDMA" run -- "${srv[@]}" >"$logs/server" 2>&1 &
	spid=$!
	bg_pids=("$spid")
	for ((i = 0; i < 100; i++)); do
		[ -n "$("${srv_in[@]}" ss -ltnH "sport = :$port")" ] && break
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.1
	done
	if [ -z "$("${srv_in[@]}" ss -ltnH "sport = :$port")" ]; then
		kill "$spid" 2>/dev/null; wait "$spid"; srv_rc=$?
		fail "$label: server not listening on port $port after 10 s (exit $srv_rc): ${srv[*]}"
		sed 's/^/  server| /' "$logs/server" >&2
		srv_out="" cli_out="" bg_pids=()
		return 1
	fi
	timeout -k 5 60 "${cli_in[@]}" "$SOFTRDMA" run -- "${cli[@]}" >"$logs/client" 2>&1 &
	cpid=$!
	bg_pids+=("$cpid")
	wait "$cpid"; cli_rc=$?
	[ $cli_rc -ne 0 ] && kill "$spid" 2>/dev/null	# it would wait for its peer until timeout
	wait "$spid"; srv_rc=$?
	bg_pids=()
	srv_out=$(<"$logs/server") cli_out=$(<"$logs/client")
	if [ $srv_rc -eq 0 ] && [ $cli_rc -eq 0 ]; then
		pass "$label: both sides exit 0"
	elif [ "${calibrate_retry:-0}" = 1 ] && grep -q "^Can't produce a report" "$logs/client" "$logs/server" &&
		calib=$(grep -h '^Correlation coefficient r^2: .* < 0\.9$' "$logs/client" "$logs/server"); then
		# perftest samples its cycle counter against gettimeofday after the run and gives
		# up when the samples scatter, as they do when other processes take the CPUs.
		echo "note: $label: perftest could not calibrate its cycle counter ($(head -n1 <<<"$calib")); once more"
		return 2
	else
		fail "$label: server exited $srv_rc, client $cli_rc (124: timed out, 143: killed after the client failed)"
		echo "  server (in $ns_srv): ${srv[*]}" >&2
		sed 's/^/  server| /' "$logs/server" >&2
		echo "  client (in $ns_cli): ${cli[*]}" >&2
		sed 's/^/  client| /' "$logs/client" >&2
		return 1
	fi
	for side in server client; do
		expect_contains "$label: $side ran the $engine engine" "$(<"$logs/$side")" \
			"^softrdma: engine started \\(${engine/uring/io_uring}\\)\$"
	done
}

# side_out SIDE: the output of that side of the last pair.
side_out() { if [ "$1" = server ]; then echo "$srv_out"; else echo "$cli_out"; fi; }

# perftest prints a GID's bytes in decimal: 10.1.2.3 is ...:255:255:10:01:02:03.
pt_gid() { printf '^ GID: (00:){10}255:255:%02d:%02d:%02d:%02d$' ${1//./ }; }

# perf LABEL SIDES PATTERN PROGRAM ARGS...: one benchmark across the veth pair. Both sides
# must show both veth GIDs; each of SIDES must show the result line PATTERN.
# Run a second time only if perftest could not calibrate its clock the first time.
perf() {
	local label=$1 sides=$2 pattern=$3 side try rc calibrate_retry
	shift 3
	for try in 1 2; do
		next_port || return 1
		calibrate_retry=$((try == 1))
		run_pair "$label" "$@" -d softrdma0 -x "$gid_srv" -p "$port" -- \
			"$@" -d softrdma0 -x "$gid_cli" -p "$port" "$ip_srv"
		rc=$?
		[ $rc -ne 2 ] && break
	done
	[ $rc -eq 0 ] || return 1
	for side in server client; do
		expect_contains "$label: $side: GID of $ip_srv" "$(side_out $side)" "$(pt_gid "$ip_srv")"
		expect_contains "$label: $side: GID of $ip_cli" "$(side_out $side)" "$(pt_gid "$ip_cli")"
	done
	for side in $sides; do
		expect_contains "$label: $side result" "$(side_out $side)" "$pattern"
	done
}

# pingpong LABEL ITERS SIZE ARGS...: ibv_rc_pingpong across the veth pair.
pingpong() {
	local label=$1 iters=$2 size=$3 side me peer
	shift 3
	next_port || return 1
	run_pair "$label" ibv_rc_pingpong -g "$gid_srv" -p "$port" -n "$iters" -s "$size" "$@" -- \
		ibv_rc_pingpong -g "$gid_cli" -p "$port" -n "$iters" -s "$size" "$@" "$ip_srv" || return 1
	for side in server client; do
		me=$ip_srv peer=$ip_cli
		[ $side = client ] && me=$ip_cli peer=$ip_srv
		expect_contains "$label: $side: $iters iters" "$(side_out $side)" \
			"^$iters iters in [0-9.]+ seconds = [0-9.]+ usec/iter\$"
		expect_contains "$label: $side: $((2 * iters * size)) bytes" "$(side_out $side)" \
			"^$((2 * iters * size)) bytes in [0-9.]+ seconds"
		expect_contains "$label: $side: local GID $me" "$(side_out $side)" \
			"^  local address: .*GID ::ffff:${me//./\\.}\$"
		expect_contains "$label: $side: remote GID $peer" "$(side_out $side)" \
			"^  remote address: .*GID ::ffff:${peer//./\\.}\$"
	done
}

n=200
for engine in uring epoll; do
	export SOFTRDMA_ENGINE=$engine
	for t in ib_write_bw ib_read_bw ib_send_bw; do
		perf "$engine netns $t" "server client" "$(bw_line 65536 $n)" $t -n $n
	done
	perf "$engine netns ib_atomic_bw" "server client" "$(bw_line 8 $n)" ib_atomic_bw -n $n
	for t in ib_write_lat ib_send_lat; do
		perf "$engine netns $t" "server client" "$(lat_line 2 $n)" $t -n $n
	done
	# The server of ib_read_lat is passive and prints no result.
	perf "$engine netns ib_read_lat" client "$(lat_line 2 $n)" ib_read_lat -n $n
	pingpong "$engine netns rc_pingpong" 300 4096
	pingpong "$engine netns rc_pingpong -e 1 MiB" 20 1048576 -e
done
finish
