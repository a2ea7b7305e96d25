# A peer that is slow is not a peer that is gone (docs/semantics.md, "Liveness: a slow or
# stopped peer"). The passive (server) side of ib_write_bw, ib_send_lat -e and rping is
# stopped (SIGSTOP) for 3 s in the middle of its run, as a debugger or a starved machine
# stops it, then continued: a NIC would have answered for it meanwhile, so both sides end
# well, with no error completion. Then the server of ib_write_bw, ib_send_bw and rping is
# killed (SIGKILL) mid-run: its kernel closes its streams, and the client ends in an error
# within its QP's give-up time (rping: on rdma_cm's disconnect, sooner).
#
# perftest takes no timeout or retry count: its QPs have timeout 14 (4.096 us x 2^14, about
# 67 ms) and retry_cnt 7, so a NIC gives up after 8 x 67 = 537 ms; rping's, set by the
# drop-in librdmacm, are the same. Loopback only; each run lasts a few seconds.
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/pairs.sh"

stop_s=3
# What perftest and rping say of a failed completion (rping's server says "state 10" of every
# disconnect, the normal end too).
error_completion='[Cc]ompletion with error|Failed status|completion (failed|error) status|RETRY_EXC'
give_up_ms=$(( (4096 << 14) * 8 / 1000000 ))	# timeout x (retry_cnt + 1)
# What a killed peer's client may take beyond that to say so (a busy machine delays its
# threads; tests/stress/loaded.sh), and to exit.
said_slack_ms=2000
exit_ms=15000
stopped_pid=
at_exit '[ -n "$stopped_pid" ] && kill -CONT "$stopped_pid" 2>/dev/null'

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# is_below PID ROOT: ROOT is PID's parent, grandparent, ...
is_below() {
	local p=$1
	while [ -n "$p" ] && [ "$p" -gt 1 ]; do
		p=$(ps -o ppid= -p "$p" | tr -d ' ')
		[ "$p" = "$2" ] && return 0
	done
	return 1
}

# prog_pid ROOT NAME: the process named NAME below ROOT (timeout -> softrdma run -> NAME).
prog_pid() {
	local i c
	for ((i = 0; i < 100; i++)); do
		for c in $(pgrep -x "$2"); do
			is_below "$c" "$1" && { echo "$c"; return 0; }
		done
		sleep 0.1
	done
	return 1
}

# start_pair SERVER_CMD... -- CLIENT_CMD...: the server under `softrdma run`, then, once it
# listens on $port, the client, its output line-buffered into a FIFO that under_way reads:
# until release_client, a client that writes much (rping -v) stops at the FIFO's capacity
# (64 KiB), so its run cannot be over before the test acts, however fast the machine.
# Sets spid, cpid (the wrappers), srv_pid (the server program itself) and cli_fd.
start_pair() {
	local srv=() cli=() listens
	while [ $# -gt 0 ] && [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	cli=("$@")
	timeout -k 5 90 "$SOFTRDMA" run -- "${srv[@]}" >"$logs/server" 2>&1 &
	spid=$!
	bg_pids=("$spid")
	server_listens "$spid"; listens=$?
	srv_pid=$(prog_pid "$spid" "${srv[0]}") || { fail "${srv[*]}: no server process"; return 1; }
	[ $listens -eq 0 ] || { fail "${srv[*]}: not listening on $port"; return 1; }
	rm -f "$logs/client.fifo" && mkfifo "$logs/client.fifo" && : >"$logs/client" || return 1
	timeout -k 5 90 "$SOFTRDMA" run -- stdbuf -oL "${cli[@]}" >"$logs/client.fifo" 2>&1 &
	cpid=$!
	bg_pids+=("$cpid")
	exec {cli_fd}<"$logs/client.fifo"
}

# srv_bytes: what the server's process has received over TCP so far (its streams and its
# control connection).
srv_bytes() {
	ss -tinpH state established 2>/dev/null | awk -v tag="pid=$srv_pid," '
		index($0, tag) { mine = 1; next }
		mine && match($0, /bytes_received:[0-9]+/) { n += substr($0, RSTART + 15, RLENGTH - 15) }
		{ mine = 0 }
		END { print n + 0 }'
}

# under_way LABEL PATTERN MIN [BYTES]: reads the client's output (30 s at most for a line)
# until MIN lines match PATTERN, then (perftest prints nothing while it runs, and sets up for
# a while after its header) waits until the server has received BYTES more: until the
# traffic is under way.
under_way() {
	local n=0 line base i
	while [ "$n" -lt "$3" ] && IFS= read -r -t 30 -u "$cli_fd" line; do
		printf '%s\n' "$line" >>"$logs/client"
		[[ $line =~ $2 ]] && n=$((n + 1))
	done
	if [ "$n" -ge "$3" ] && [ -n "${4:-}" ]; then
		base=$(srv_bytes)
		for ((i = 0; i < 3000; i++)); do
			[ "$(srv_bytes)" -ge $((base + $4)) ] && return 0
			kill -0 "$cpid" 2>/dev/null || break
			sleep 0.01
		done
		n=0
	fi
	[ "$n" -ge "$3" ] && return 0
	release_client
	fail "$1: the client never got under way"
	sed 's/^/  client| /' "$logs/client" >&2
	return 1
}

# release_client: the rest of the client's output goes to its log as it comes.
release_client() {
	cat <&"$cli_fd" >>"$logs/client" &
	drain_pid=$!
	exec {cli_fd}<&-
}

show_both() {
	sed 's/^/  server| /' "$logs/server" >&2
	sed 's/^/  client| /' "$logs/client" >&2
}

# stop_cont LABEL PATTERN MIN DONE: once the client is under way, stops the server for
# $stop_s s, during which the client must neither end nor print DONE (its last result: the
# stop fell in the middle of the run), and continues it; both sides must then exit 0, with
# no error completion on either.
stop_cont() {
	local label=$1 t0 took srv_rc cli_rc
	under_way "$label" "$2" "$3" $traffic || return 1
	kill -STOP "$srv_pid"
	stopped_pid=$srv_pid
	t0=$(now_ms)
	release_client
	sleep "$stop_s"
	if ! kill -0 "$cpid" 2>/dev/null; then
		fail "$label: the client ended while the server was stopped"
	elif grep -Eq -- "$4" "$logs/client"; then
		fail "$label: the run was over before the server was stopped"
	else
		pass "$label: the client waits, mid-run, while the server is stopped"
	fi
	kill -CONT "$srv_pid"
	stopped_pid=
	wait "$cpid"; cli_rc=$?
	wait "$spid"; srv_rc=$?
	wait "$drain_pid"
	took=$(($(now_ms) - t0))
	bg_pids=()
	echo "$label: both sides done $took ms after the stop began"
	if [ $srv_rc -eq 0 ] && [ $cli_rc -eq 0 ]; then
		pass "$label: both sides exit 0 after a ${stop_s} s stop"
	else
		fail "$label: server exited $srv_rc, client $cli_rc"
		show_both
		return 1
	fi
	expect_contains "$label: the client's result" "$(<"$logs/client")" "$4"
	if grep -Eq "$error_completion" "$logs/server" "$logs/client"; then
		fail "$label: an error completion:"
		grep -EH "$error_completion" "$logs/server" "$logs/client" >&2
	else
		pass "$label: no error completion"
	fi
}

# kill_peer LABEL PATTERN MIN DONE ERROR: kills the server once the client is under way and
# (it must not print DONE, its last result) before its run is over; the client must say ERROR within give_up_ms + said_slack_ms, and
# exit within exit_ms.
kill_peer() {
	local label=$1 t0 said="" took cli_rc
	under_way "$label" "$2" "$3" $traffic || return 1
	t0=$(now_ms)
	kill -KILL "$srv_pid"
	release_client
	while [ $(($(now_ms) - t0)) -lt "$exit_ms" ]; do
		[ -z "$said" ] && grep -Eq -- "$5" "$logs/client" && said=$(($(now_ms) - t0))
		kill -0 "$cpid" 2>/dev/null || break
		sleep 0.01
	done
	took=$(($(now_ms) - t0))
	[ -z "$said" ] && grep -Eq -- "$5" "$logs/client" && said=$took
	if kill -0 "$cpid" 2>/dev/null; then
		fail "$label: the client still runs $took ms after its peer was killed"
		kill "$cpid" 2>/dev/null
	fi
	wait "$cpid"; cli_rc=$?
	wait "$drain_pid"
	wait "$spid"
	bg_pids=()
	# Its last result can only have come before the kill.
	grep -Eq -- "$4" "$logs/client" && fail "$label: the run was over before its peer was killed"
	if [ -z "$said" ]; then
		fail "$label: the client never said /$5/"
		show_both
		return 1
	fi
	echo "$label: the client said why $said ms after its peer was killed (give-up time $give_up_ms ms), exited ($cli_rc) after $took ms"
	if [ "$said" -le $((give_up_ms + said_slack_ms)) ]; then
		pass "$label: the client ends in an error within $((give_up_ms + said_slack_ms)) ms"
	else
		fail "$label: the client ended in an error only $said ms after its peer was killed"
	fi
	case_rc "$label" "$cli_rc"
}

# perftest exits non-zero when a completion fails; rping's client ends its loop quietly
# (exit 0) on the disconnect, having said so on stderr.
case_rc() {
	if [ "$prog" = rping ] || [ "$2" -ne 0 ]; then
		pass "$1: exit status $2"
	else
		fail "$1: the client exited 0 though its peer was killed"
	fi
}

perftest_args() { echo "-d softrdma0 -x 0 -p $port"; }

for how in stop kill; do
	# ib_write_bw: 100000 WRITEs of 64 KiB (a second or two unloaded); perftest prints its
	# header as it starts. (Not -D: a stop inside its timed window leaves 0 iterations.)
	prog=ib_write_bw traffic=65536	# a thousand WRITEs (by reference, on one host) or one
	next_port || break
	# As frames: the stream's liveness is what is tried here. Placed directly (the default
	# on one host), a WRITE into a stopped process lands as on a NIC, without waiting for
	# it (test_rc_state: test_stopped_peer_answers_late), and no byte crosses TCP.
	export SOFTRDMA_DIRECT_WRITE=0
	# shellcheck disable=SC2046
	start_pair ib_write_bw -n 100000 $(perftest_args) -- ib_write_bw -n 100000 $(perftest_args) localhost
	started=$?
	unset SOFTRDMA_DIRECT_WRITE
	if [ $started -eq 0 ]; then
		if [ $how = stop ]; then
			stop_cont "$how ib_write_bw" '^ *#bytes' 1 "$(bw_line 65536 100000)"
		else
			kill_peer "$how ib_write_bw" '^ *#bytes' 1 "$(bw_line 65536 100000)" \
				'^ *Failed status (12|5):'
		fi
	fi

	# ib_send_lat -e: SENDs both ways, waited for on completion channels, 10000 round trips.
	# Not killed: between round trips its client has nothing outstanding, only a receive
	# posted, and a QP like that learns nothing of a peer that is gone, beside a NIC as here
	# (without rdma_cm to say so). ib_send_bw's client always has SENDs in flight.
	if [ $how = stop ]; then
		prog=ib_send_lat traffic=8192	# a couple of hundred round trips
		next_port || break
		# shellcheck disable=SC2046
		start_pair ib_send_lat -e -n 10000 $(perftest_args) -- \
			ib_send_lat -e -n 10000 $(perftest_args) localhost &&
			stop_cont "$how ib_send_lat -e" '^ *#bytes' 1 "$(lat_line 2 10000)"
	else
		prog=ib_send_bw traffic=65536
		next_port || break
		# shellcheck disable=SC2046
		start_pair ib_send_bw -n 100000 $(perftest_args) -- \
			ib_send_bw -n 100000 $(perftest_args) localhost &&
			kill_peer "$how ib_send_bw" '^ *#bytes' 1 "$(bw_line 65536 100000)" \
				'^ *Failed status (12|5):'
	fi

	# rping: 2000 verified pings (under a second unloaded, a minute on a busy machine), the
	# client printing each.
	prog=rping traffic=	# its lines say; the FIFO holds it back (start_pair)
	next_port || break
	if start_pair rping -s -a 127.0.0.1 -p "$port" -C 2000 -- \
		rping -c -a 127.0.0.1 -p "$port" -C 2000 -v -V; then
		if [ $how = stop ]; then
			stop_cont "$how rping" '^ping data: ' 100 '^ping data: rdma-ping-1999: '
		else
			kill_peer "$how rping" '^ping data: ' 100 '^ping data: rdma-ping-1999: ' \
				'DISCONNECT EVENT|state 10|status [0-9]+'
		fi
	fi
done
finish
