# Shared by the tests that run a server and a client program over the soft device: a scratch
# directory for their logs, free ports below the ephemeral range, and run_pair. Source after
# lib.sh; the caller sets $engine (uring or epoll) before run_pair.
scratch_dir logs
export TMPDIR=$logs	# `softrdma run` trees of a killed run go with the scratch dir
export SOFTRDMA_VERBOSE=1	# each side says which engine it started
bg_pids=()
trap 'for p in "${bg_pids[@]}"; do kill "$p" 2>/dev/null; done; wait; rm -rf "${cleanup_dirs[@]}"' EXIT
trap 'exit 130' INT TERM

# Ports below the ephemeral range (where the engine's own listeners are), offset by $$.
port=$((20000 + $$ % 600 * 20))
# next_port: sets $port to the next port no socket on this host uses.
next_port() {
	local i
	for ((i = 0; i < 200; i++)); do
		port=$((port >= 31999 ? 20000 : port + 1))
		[ -z "$(ss -tanH "( sport = :$port or dport = :$port )")" ] && return 0
	done
	fail "no free TCP port in 20000-31999 near $port"
	return 1
}

# run_pair LABEL SERVER_CMD... -- CLIENT_CMD...: both under `softrdma run` and `timeout`;
# the client starts once the server listens on $port. Sets srv_out and cli_out; fails
# (showing both commands and outputs) unless both sides exit 0. With calibrate_retry=1, a
# run whose only fault is perftest's clock calibration returns 2 instead of failing.
run_pair() {
	local label=$1 srv=() cli=() spid cpid srv_rc cli_rc i side
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	cli=("$@")
	timeout -k 5 60 "$SOFTRDMA" run -- "${srv[@]}" >"$logs/server" 2>&1 &
	spid=$!
	bg_pids=("$spid")
	for ((i = 0; i < 100; i++)); do
		[ -n "$(ss -ltnH "sport = :$port")" ] && break
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.1
	done
	if [ -z "$(ss -ltnH "sport = :$port")" ]; then
		kill "$spid" 2>/dev/null; wait "$spid"; srv_rc=$?
		fail "$label: server not listening on port $port after 10 s (exit $srv_rc): ${srv[*]}"
		sed 's/^/  server| /' "$logs/server" >&2
		srv_out="" cli_out="" bg_pids=()
		return 1
	fi
	timeout -k 5 60 "$SOFTRDMA" run -- "${cli[@]}" >"$logs/client" 2>&1 &
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
		echo "  server: ${srv[*]}" >&2
		sed 's/^/  server| /' "$logs/server" >&2
		echo "  client: ${cli[*]}" >&2
		sed 's/^/  client| /' "$logs/client" >&2
		return 1
	fi
	for side in server client; do
		expect_contains "$label: $side ran the $engine engine" "$(<"$logs/$side")" \
			"^softrdma: engine started \\(${engine/uring/io_uring}\\)\$"
	done
}


# perftest_pair LABEL PROGRAM ARGS...: one perftest benchmark, the server on GID 0, the client
# to localhost; run a second time only if perftest could not calibrate its clock the first time.
perftest_pair() {
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

# perftest_result LABEL SIDES PATTERN: the result line on each of SIDES ("client",
# "server client") of the last pair.
perftest_result() {
	local side out
	for side in $2; do
		out=$srv_out
		[ "$side" = client ] && out=$cli_out
		expect_contains "$1: $side result" "$out" "$3"
	done
}
