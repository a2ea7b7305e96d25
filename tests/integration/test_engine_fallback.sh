# Where io_uring is refused (Docker's default seccomp profile), the engine runs on epoll by
# itself; SOFTRDMA_ENGINE picks one explicitly. epoll is also the default while polls drive
# the engine (SOFTRDMA_POLL_PROGRESS, on unless 0); io_uring without them.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pairs.sh"
deny=("$SOFTRDMA_BUILD/bin/deny_syscall" io_uring_setup)
engine=epoll

engine_of() { # ENV... -> the engine the provider starts
	env "$@" SOFTRDMA_VERBOSE=1 "$SOFTRDMA" run -- ibv_devinfo 2>&1 >/dev/null |
		sed -n 's/^softrdma: engine started (\(.*\))$/\1/p'
}
[ "$(engine_of)" = epoll ] && pass "epoll by default" || fail "default engine: '$(engine_of)'"
[ "$(engine_of SOFTRDMA_POLL_PROGRESS=0)" = io_uring ] && pass "io_uring without poll progress" ||
	fail "SOFTRDMA_POLL_PROGRESS=0 gave '$(engine_of SOFTRDMA_POLL_PROGRESS=0)'"
[ "$(engine_of SOFTRDMA_ENGINE=uring)" = io_uring ] && pass "SOFTRDMA_ENGINE=uring" ||
	fail "SOFTRDMA_ENGINE=uring gave '$(engine_of SOFTRDMA_ENGINE=uring)'"
[ "$(engine_of SOFTRDMA_ENGINE=epoll)" = epoll ] && pass "SOFTRDMA_ENGINE=epoll" ||
	fail "SOFTRDMA_ENGINE=epoll gave '$(engine_of SOFTRDMA_ENGINE=epoll)'"
# The fallback itself: what io_uring's refusal leaves when io_uring is the engine wanted.
export SOFTRDMA_POLL_PROGRESS=0
out=$(SOFTRDMA_VERBOSE=1 "$SOFTRDMA" run -- "${deny[@]}" ibv_devinfo 2>&1)
expect_contains "falls back to epoll when io_uring is refused" "$out" 'engine started \(epoll\)'

# Both peers without io_uring still move data.
if next_port; then
	args=(ibv_rc_pingpong -g 0 -p "$port" -n 200 -s 65536)
	run_pair "both peers without io_uring" "${deny[@]}" "${args[@]}" -- \
		"${deny[@]}" "${args[@]}" localhost &&
		for side in server client; do
			expect_contains "$side without io_uring" "$(side_out $side)" '^200 iters in'
		done
fi
finish
