# Where io_uring is refused (Docker's default seccomp profile), the engine runs on epoll by
# itself; SOFTRDMA_ENGINE picks one explicitly.
. "$(dirname "$0")/lib.sh"
deny=("$SOFTRDMA_BUILD/bin/deny_syscall" io_uring_setup)
port=$((30000 + $$ % 20000))
pids=()
at_exit 'kill "${pids[@]}" 2>/dev/null'
scratch_dir logs

engine_of() { # ENV... -> the engine the provider starts
	env "$@" SOFTRDMA_VERBOSE=1 "$SOFTRDMA" run -- ibv_devinfo 2>&1 >/dev/null |
		sed -n 's/^softrdma: engine started (\(.*\))$/\1/p'
}
[ "$(engine_of)" = io_uring ] && pass "io_uring by default" || fail "default engine: '$(engine_of)'"
[ "$(engine_of SOFTRDMA_ENGINE=epoll)" = epoll ] && pass "SOFTRDMA_ENGINE=epoll" ||
	fail "SOFTRDMA_ENGINE=epoll gave '$(engine_of SOFTRDMA_ENGINE=epoll)'"
out=$(SOFTRDMA_VERBOSE=1 "$SOFTRDMA" run -- "${deny[@]}" ibv_devinfo 2>&1)
expect_contains "falls back to epoll when io_uring is refused" "$out" 'engine started \(epoll\)'

# Both peers without io_uring still move data.
"$SOFTRDMA" run -- "${deny[@]}" timeout 30 ibv_rc_pingpong -g 0 -p "$port" -n 200 -s 65536 \
	>"$logs/server" 2>&1 &
pids+=($!)
for _ in $(seq 100); do ss -ltn | grep -q ":$port " && break; sleep 0.05; done
out=$("$SOFTRDMA" run -- "${deny[@]}" timeout 30 ibv_rc_pingpong -g 0 -p "$port" -n 200 -s 65536 \
	localhost 2>&1)
expect_contains "client without io_uring" "$out" '^200 iters in'
wait "${pids[0]}"
expect_contains "server without io_uring" "$(cat "$logs/server")" '^200 iters in'
finish
