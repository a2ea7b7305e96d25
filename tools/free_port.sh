# free_port.sh: the one free-port picker of softrdma's scripts (the tool's demo, the
# integration tests, the benchmarks). Source it; it defines one function and runs nothing.
# The build copies it next to the tool's other parts (build/lib/softrdma/, installed in
# lib/softrdma/).
#
# free_port [PREFIX...]: prints a TCP port below the ephemeral range (where the engines' own
# listeners and every client's connections take theirs) that no TCP socket uses, in any
# state, and that no other call handed out in the last 10 minutes; fails when 200 tries find
# none. PREFIX runs ss where the port will be used (`ip netns exec NS` for a server in a
# namespace). Each call starts at a random port.
#
# Why the marks: between this check and the server's bind, a second caller (a test running
# beside, a second suite, a helper's worktree) could be handed the same port, and its
# client would then talk to our server. A handed-out port is marked with mkdir (atomic:
# one caller wins) in a directory of the user's own; marks older than 10 minutes go. A
# directory there that is not ours (planted) means no marks, only the check.
free_port() {
	local lo=20000 hi p i marks
	hi=$(($(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768) - 1))
	[ "$hi" -gt "$lo" ] || lo=1024
	marks=${XDG_RUNTIME_DIR:-/tmp}/softrdma-ports-$(id -u)
	mkdir -m 700 "$marks" 2>/dev/null
	if [ -d "$marks" ] && [ ! -L "$marks" ] && [ -O "$marks" ]; then
		find "$marks" -mindepth 1 -maxdepth 1 -mmin +10 -exec rmdir {} + 2>/dev/null
	else
		marks=
	fi
	p=$((lo + (RANDOM * 32768 + RANDOM) % (hi - lo + 1)))
	for ((i = 0; i < 200; i++)); do
		if [ -z "$("$@" ss -tanH "( sport = :$p or dport = :$p )" 2>/dev/null)" ] &&
			{ [ -z "$marks" ] || mkdir "$marks/$p" 2>/dev/null; }; then
			echo "$p"
			return 0
		fi
		p=$((p >= hi ? lo : p + 1))
	done
	return 1
}
