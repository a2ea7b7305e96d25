# Shared by the tests that run a server and a client program over the soft device: a scratch
# directory for their logs, next_port (a free port on the server's side), server_listens (a
# wait for the server to listen on it), and run_pair.
# Source after lib.sh (and after netns.sh's netns_setup for two namespaces). The caller sets
# $engine (uring or epoll) before run_pair, and may set
#   srv_in cli_in  arrays: the prefix that runs a command on the server's or the client's
#                  side (`ip netns exec NS`); empty (loopback) by default
#   where_srv where_cli  how failure messages name the sides (" (in NS)"); empty by default
scratch_dir logs
export TMPDIR=$logs	# `softrdma run` trees of a killed run go with the scratch dir
export SOFTRDMA_VERBOSE=1	# each side says which engine it started
bg_pids=()
at_exit 'for p in "${bg_pids[@]}"; do kill "$p" 2>/dev/null; done; wait'
[ -n "${srv_in+set}" ] || srv_in=()
[ -n "${cli_in+set}" ] || cli_in=()
where_srv=${where_srv:-} where_cli=${where_cli:-}

srv_ss() { "${srv_in[@]}" ss "$@"; }

port=
# next_port: sets $port to a port no TCP socket on the server's side uses (lib.sh's free_port).
next_port() {
	port=$(free_port "${srv_in[@]}") && return 0
	fail "no free TCP port below the ephemeral range"
	return 1
}

# server_listens [PID]: waits until a TCP socket on the server's side listens on $port, for
# 10 s at most (less once PID, the server's wrapper, has exited), and says whether one does.
server_listens() {
	local i
	for ((i = 0; i < 100; i++)); do
		[ -n "$(srv_ss -ltnH "sport = :$port")" ] && return 0
		[ -z "${1:-}" ] || kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	[ -n "$(srv_ss -ltnH "sport = :$port")" ]
}

# perftest_fault: succeeds, saying what happened, when the last pair failed only for one of
# perftest's own faults, which a second run does not meet:
# - it samples its cycle counter against gettimeofday after the run and gives up when the
#   samples scatter, as they do when other processes take the CPUs (the complaint may follow
#   a result on the same line);
# - with -R its server destroys the listener of its control connection and listens on the
#   same port again only after a handshake over that connection, while the client connects
#   right after the same handshake. A client first is rejected (status 8, invalid service
#   ID, as a RoCE peer's CM answers), and perftest's retry then reuses the rdma_cm ids and
#   event channel it has just destroyed (rdma_cm_client_connection after
#   rdma_cm_destroy_cma in perftest 4.5-0.17; fixed upstream by 3d9d8d0, "Fix crashes and
#   logical flaws in RDMA CM connection retry"): a segmentation fault.
perftest_fault() {
	if grep -q "^Can't produce a report" "$logs/client" "$logs/server" && perftest_uncalibrated; then
		return 0	# it said why
	elif grep -q '^Event: RDMA_CM_EVENT_REJECTED; error: 8\.$' "$logs/client"; then
		echo "perftest's client connected before its server listened again (REJECTED, status 8)"
	else
		return 1
	fi
}

# perftest_uncalibrated: succeeds, saying so, when a side of the last pair could not
# calibrate its cycle counter: it fails (above) or, ib_send_lat's server, exits 0 and
# reports every figure as "inf".
perftest_uncalibrated() {
	local calib
	calib=$(grep -ho 'Correlation coefficient r^2: .* < 0\.9$' "$logs/client" "$logs/server") ||
		return 1
	echo "perftest could not calibrate its cycle counter ($(head -n1 <<<"$calib"))"
}

# run_pair LABEL SERVER_CMD... -- CLIENT_CMD...: both under `softrdma run` and `timeout`, the
# client once the server listens on TCP port $port. Sets srv_out and cli_out; fails (showing
# both commands and outputs) unless both sides exit 0, then checks that each side started
# the $engine engine. Variables of the caller change that:
#   server_stays=1  the server serves until it is killed (cmtime): it must still run when the
#                   client is done, and is then stopped;
#   uses_device=0   the programs never open the device (rsockets are kernel TCP sockets);
#   perftest_retry=1  a run that failed only for perftest's own faults returns 2;
#   in_env=1        both run in the test's own device tree (env_counters.sh's `softrdma env`),
#                   not each under `softrdma run`, so the run's port counters add up there.
run_pair() {
	local label=$1 srv=() cli=() spid cpid srv_rc cli_rc side stopped=0 why note="" via=()
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	cli=("$@")
	[ "${in_env:-0}" = 1 ] || via=("$SOFTRDMA" run --)
	timeout -k 5 60 "${srv_in[@]}" "${via[@]}" "${srv[@]}" >"$logs/server" 2>&1 &
	spid=$!
	bg_pids=("$spid")
	if ! server_listens "$spid"; then
		kill "$spid" 2>/dev/null; wait "$spid"; srv_rc=$?
		fail "$label: server not listening on port $port after 10 s (exit $srv_rc): ${srv[*]}"
		sed 's/^/  server| /' "$logs/server" >&2
		srv_out="" cli_out="" bg_pids=()
		return 1
	fi
	timeout -k 5 60 "${cli_in[@]}" "${via[@]}" "${cli[@]}" >"$logs/client" 2>&1 &
	cpid=$!
	bg_pids+=("$cpid")
	wait "$cpid"; cli_rc=$?
	if [ "${server_stays:-0}" = 1 ] && kill -0 "$spid" 2>/dev/null; then
		stopped=1
		kill "$spid" 2>/dev/null
	elif [ $cli_rc -ne 0 ]; then
		kill "$spid" 2>/dev/null	# it would wait for its peer until timeout
	fi
	wait "$spid"; srv_rc=$?
	if [ $stopped = 1 ] && [ $srv_rc = 143 ]; then	# the SIGTERM it was stopped with
		srv_rc=0 note=" (the server stopped once the client was done)"
	fi
	bg_pids=()
	srv_out=$(<"$logs/server") cli_out=$(<"$logs/client")
	if [ $srv_rc -eq 0 ] && [ $cli_rc -eq 0 ] && [ "${perftest_retry:-0}" = 1 ] &&
		why=$(perftest_uncalibrated); then
		echo "note: $label: $why; once more"
		return 2
	elif [ $srv_rc -eq 0 ] && [ $cli_rc -eq 0 ]; then
		pass "$label: both sides exit 0$note"
	elif [ "${perftest_retry:-0}" = 1 ] && why=$(perftest_fault); then
		echo "note: $label: $why; once more"
		return 2
	else
		if [ "${server_stays:-0}" = 1 ] && [ $stopped = 0 ]; then
			fail "$label: server exited $srv_rc by itself (it serves until stopped), client $cli_rc"
		else
			fail "$label: server exited $srv_rc, client $cli_rc (124: timed out, 143: killed after the client failed)"
		fi
		echo "  server$where_srv: ${srv[*]}" >&2
		sed 's/^/  server| /' "$logs/server" >&2
		echo "  client$where_cli: ${cli[*]}" >&2
		sed 's/^/  client| /' "$logs/client" >&2
		return 1
	fi
	[ "${uses_device:-1}" = 1 ] || return 0
	for side in server client; do
		expect_contains "$label: $side ran the $engine engine" "$(<"$logs/$side")" \
			"^softrdma: engine started \\(${engine/uring/io_uring}\\)\$"
	done
}

# side_out SIDE: the output of that side of the last pair.
side_out() { if [ "$1" = server ]; then echo "$srv_out"; else echo "$cli_out"; fi; }

# perftest_pair LABEL PROGRAM ARGS...: one perftest benchmark on loopback, the server on
# GID 0, the client to localhost; run a second time only after one of perftest's own faults.
perftest_pair() {
	local label=$1 try rc perftest_retry
	shift
	for try in 1 2; do
		next_port || return 1
		perftest_retry=$((try == 1))
		run_pair "$label" "$@" -d softrdma0 -x 0 -p "$port" -- "$@" -d softrdma0 -x 0 -p "$port" localhost
		rc=$?
		[ $rc -ne 2 ] && return $rc
	done
}

# perftest_result LABEL SIDES PATTERN: the result line on each of SIDES ("client",
# "server client") of the last pair.
perftest_result() {
	local side
	for side in $2; do
		expect_contains "$1: $side result" "$(side_out "$side")" "$3"
	done
}
