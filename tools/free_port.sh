# free_port.sh: the one free-port picker of softrdma's scripts (the tool's demo, the
# integration tests, the benchmarks). Source it; it defines one function and runs nothing.
# The build copies it next to the tool's other parts (build/lib/softrdma/, installed in
# lib/softrdma/).
#
# free_port [PREFIX...]: prints a TCP port below the ephemeral range (where the engines' own
# listeners and every client's connections take theirs) that no TCP socket uses, in any
# state; fails when 200 tries find none. PREFIX runs ss where the port will be used
# (`ip netns exec NS` for a server in a namespace). Each call starts at a random port, so
# the calls of one script, and of scripts running side by side, rarely meet.
free_port() {
	local lo=20000 hi p i
	hi=$(($(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768) - 1))
	[ "$hi" -gt "$lo" ] || lo=1024
	p=$((lo + (RANDOM * 32768 + RANDOM) % (hi - lo + 1)))
	for ((i = 0; i < 200; i++)); do
		if [ -z "$("$@" ss -tanH "( sport = :$p or dport = :$p )" 2>/dev/null)" ]; then
			echo "$p"
			return 0
		fi
		p=$((p >= hi ? lo : p + 1))
	done
	return 1
}
