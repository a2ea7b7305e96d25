# A peer whose host is gone without a word (its link cut: no FIN, no RST, nothing) is found
# through TCP's own liveness (docs/semantics.md, "Liveness: a slow or stopped peer"), not
# waited for as a stopped process is. ib_write_bw and ib_read_lat run between two network
# namespaces joined by a veth pair; once the client's traffic is under way, the server's
# end of the pair is set down, and the client must end in IBV_WC_RETRY_EXC_ERR (perftest's
# "Failed status 12") within its QP's give-up time, plus what TCP needs to notice: two
# retransmissions (0.2 + 0.4 s: ib_write_bw's WRITEs are in flight), or two keepalive probes
# a second apart (ib_read_lat's READ request has arrived, its response is what is lost).
# Both clients always have a request outstanding: a QP with none, beside a NIC as here,
# would learn nothing of the cut.
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/netns.sh"

give_up_ms=$(( (4096 << 14) * 8 / 1000000 ))	# perftest: timeout 14, retry_cnt 7
notice_ms=3000		# two keepalive probes a second apart, the next ACK timeout, a busy machine
exit_ms=15000		# the client's own exit, the wrapper's cleanup

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# gid_index SIDE IPV4: the index of IPV4's GID on SIDE (srv or cli), as test_netns.sh finds it.
gid_index() {
	local gid side_in="${1}_in[@]"
	gid=0000:0000:0000:0000:0000:ffff:$(printf '%02x%02x:%02x%02x' ${2//./ })
	"${!side_in}" "$SOFTRDMA" devices 2>&1 | awk -v gid="$gid" '$2 == gid { print $1 }'
}

# cut_mid_run LABEL PROGRAM ARGS...: the pair across the veth; the link cut once the client
# has printed its header (as its run starts) and $settle seconds more.
cut_mid_run() {
	local label=$1 i t0 took said cli_rc spid cpid
	shift
	ip -n "$ns_srv" link set "$veth_srv" up	# again, after the last case
	next_port || return 1
	timeout -k 5 60 "${srv_in[@]}" "$SOFTRDMA" run -- "$@" -d softrdma0 -x "$gid_srv" -p "$port" \
		>"$logs/server" 2>&1 &
	spid=$!
	bg_pids=("$spid")
	server_listens "$spid"
	timeout -k 5 60 "${cli_in[@]}" "$SOFTRDMA" run -- stdbuf -oL "$@" -d softrdma0 -x "$gid_cli" \
		-p "$port" "$ip_srv" >"$logs/client" 2>&1 &
	cpid=$!
	bg_pids+=("$cpid")
	for ((i = 0; i < 200; i++)); do
		grep -q '^ *#bytes' "$logs/client" && break
		kill -0 "$cpid" 2>/dev/null || break
		sleep 0.05
	done
	sleep "$settle"
	if ! kill -0 "$cpid" 2>/dev/null || ! grep -q '^ *#bytes' "$logs/client"; then
		fail "$label: the client never got under way"
		sed 's/^/  client| /' "$logs/client" >&2
		return 1
	fi
	t0=$(now_ms)
	ip -n "$ns_srv" link set "$veth_srv" down
	said=""
	while [ $(($(now_ms) - t0)) -lt "$exit_ms" ]; do
		[ -z "$said" ] && grep -q '^ *Failed status 12:' "$logs/client" && said=$(($(now_ms) - t0))
		kill -0 "$cpid" 2>/dev/null || break
		sleep 0.01
	done
	took=$(($(now_ms) - t0))
	[ -z "$said" ] && grep -q '^ *Failed status 12:' "$logs/client" && said=$took
	if kill -0 "$cpid" 2>/dev/null; then
		fail "$label: the client still runs $took ms after the link was cut"
		kill "$cpid" 2>/dev/null
	fi
	wait "$cpid"; cli_rc=$?
	if [ -z "$said" ]; then
		fail "$label: the client never said IBV_WC_RETRY_EXC_ERR (Failed status 12)"
		sed 's/^/  client| /' "$logs/client" >&2
	else
		echo "$label: IBV_WC_RETRY_EXC_ERR $said ms after the link was cut (give-up time $give_up_ms ms), exit ($cli_rc) after $took ms"
		if [ "$said" -le $((give_up_ms + notice_ms)) ]; then
			pass "$label: IBV_WC_RETRY_EXC_ERR within $((give_up_ms + notice_ms)) ms"
		else
			fail "$label: IBV_WC_RETRY_EXC_ERR only $said ms after the link was cut"
		fi
	fi
	# The server waits for its peer for ever, as it would beside a NIC: it is stopped.
	kill "$spid" 2>/dev/null
	wait "$spid"
	bg_pids=()
}

netns_setup c
gid_srv=$(gid_index srv "$ip_srv")
gid_cli=$(gid_index cli "$ip_cli")
[ -n "$gid_srv" ] && [ -n "$gid_cli" ] || { fail "no GID for the veth addresses"; finish; }
. "$(dirname "$0")/pairs.sh"
settle=0.1 cut_mid_run "ib_write_bw" ib_write_bw -n 100000
# Its READs start a moment after its header (perftest samples its clock first).
settle=1.5 cut_mid_run "ib_read_lat" ib_read_lat -n 1000000
finish
