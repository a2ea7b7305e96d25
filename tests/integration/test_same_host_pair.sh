# The same-host path between two processes: ibv_rc_pingpong with 64 KiB messages, each
# side checking every byte it receives (--chk), and the responders' same_host_payloads
# counter showing which path the payloads took: process_vm_readv by default, TCP when the
# path is switched off (SOFTRDMA_SAME_HOST=0) and when a seccomp filter refuses
# process_vm_readv, as a container profile may (then softrdma falls back by itself).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pairs.sh"
deny="$SOFTRDMA_BUILD/bin/deny_syscall"
engine=epoll	# the default engine (SOFTRDMA_POLL_PROGRESS on)

# payloads OUTPUT: the same_host_payloads that `softrdma counters` printed last in OUTPUT.
payloads() { sed -n 's/^same_host_payloads *\([0-9]*\)$/\1/p' <<<"$1" | tail -n 1; }

# pingpong LABEL WRAPPER...: a server and a client, each WRAPPER ibv_rc_pingpong, each
# printing its run's counters after it.
pingpong() {
	local label=$1 side
	shift
	next_port || return 1
	local args=(ibv_rc_pingpong -g 0 -p "$port" -n 100 -s 65536 --chk)
	run_pair "$label" sh -c '"$@" && "$0" counters' "$SOFTRDMA" "$@" "${args[@]}" -- \
		sh -c '"$@" && "$0" counters' "$SOFTRDMA" "$@" "${args[@]}" localhost || return 1
	for side in server client; do
		expect_contains "$label: $side: 100 iters, every byte checked" \
			"$(side_out "$side")" '^100 iters in [0-9.]+ seconds'
	done
}

if pingpong "same-host path"; then
	for side in server client; do
		n=$(payloads "$(side_out $side)")
		# Each side receives 100 SENDs of 64 KiB (or one fewer: the last may still be
		# in flight when the pingpong ends).
		[ "${n:-0}" -ge 99 ] && pass "same-host path: $side read $n payloads from its peer" ||
			fail "same-host path: $side read '${n:-none}' payloads from its peer, want >= 99"
	done
fi

for how in "SOFTRDMA_SAME_HOST=0" "seccomp refuses process_vm_readv"; do
	if [ "$how" = "SOFTRDMA_SAME_HOST=0" ]; then
		wrap=(env SOFTRDMA_SAME_HOST=0)
	else
		wrap=("$deny" process_vm_readv)
	fi
	pingpong "$how" "${wrap[@]}" || continue
	for side in server client; do
		n=$(payloads "$(side_out $side)")
		[ "$n" = 0 ] && pass "$how: $side: every payload crossed TCP" ||
			fail "$how: $side read '${n:-none}' payloads from its peer, want 0"
	done
done
finish
