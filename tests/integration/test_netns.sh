# perftest and ibv_rc_pingpong between two network namespaces joined by a veth pair, on both
# engines. In each namespace `softrdma run` builds the GID table from that namespace's
# addresses; both sides use the GID of their veth address, the client dials the server's.
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/netns.sh"
netns_setup n
. "$(dirname "$0")/pairs.sh"

# gid_index SIDE IPV4: the index of IPV4's GID in the table `softrdma devices` shows on
# SIDE (srv or cli: in its namespace, attached to its veth).
gid_index() {
	local gid side_in="${1}_in[@]"
	gid=0000:0000:0000:0000:0000:ffff:$(printf '%02x%02x:%02x%02x' ${2//./ })
	"${!side_in}" "$SOFTRDMA" devices 2>&1 | awk -v gid="$gid" '$2 == gid { print $1 }'
}
gid_srv=$(gid_index srv "$ip_srv")
gid_cli=$(gid_index cli "$ip_cli")
if [ -z "$gid_srv" ] || [ -z "$gid_cli" ]; then
	fail "no GID for the veth address: server index '$gid_srv', client index '$gid_cli'"
	"${srv_in[@]}" "$SOFTRDMA" devices >&2
	"${cli_in[@]}" "$SOFTRDMA" devices >&2
	finish
fi
pass "GID index $gid_srv is $ip_srv in $ns_srv, $gid_cli is $ip_cli in $ns_cli"

# perftest prints a GID's bytes in decimal: 10.1.2.3 is ...:255:255:10:01:02:03.
pt_gid() { printf '^ GID: (00:){10}255:255:%02d:%02d:%02d:%02d$' ${1//./ }; }

# perf LABEL SIDES PATTERN PROGRAM ARGS...: one benchmark across the veth pair. Both sides
# must show both veth GIDs; each of SIDES must show the result line PATTERN.
# Run a second time only after one of perftest's own faults.
perf() {
	local label=$1 sides=$2 pattern=$3 side try rc perftest_retry
	shift 3
	for try in 1 2; do
		next_port || return 1
		perftest_retry=$((try == 1))
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
