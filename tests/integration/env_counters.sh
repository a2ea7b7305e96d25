# Shared by the tests of middleware (test_ucx, test_mpi): one run's device tree (`softrdma
# env`) for every process of the test, so that the port counters, summed over the run's
# processes and kept after they exit, show what crossed softrdma0. Source after lib.sh and
# pairs.sh (whose scratch TMPDIR takes the tree with it). A test whose processes run in a
# namespace sets env_in to the prefix that enters it (pairs.sh's srv_in) first, so that the
# tree is made there (its GID table: that namespace's addresses).
unset SOFTRDMA_VERBOSE
eval "$(${env_in+"${env_in[@]}"} "$SOFTRDMA" env)" || { fail "softrdma env"; finish; }
cleanup_dirs+=("$SYSFS_PATH")	# made in $XDG_RUNTIME_DIR when that is set; goes last at exit
port_counters=$SYSFS_PATH/class/infiniband/softrdma0/ports/1/counters

# bytes_sent: the bytes softrdma0 has sent in this run (port_xmit_data counts 4-octet words).
bytes_sent() { echo $(($(cat "$port_counters/port_xmit_data") * 4)); }

# at_least LABEL VALUE MIN
at_least() {
	[ "$2" -ge "$3" ] 2>/dev/null && pass "$1: $2 >= $3" || fail "$1: '$2', want at least $3"
}

# crossed_device LABEL BEFORE MIN: at least MIN bytes went out on softrdma0 since BEFORE
# (a bytes_sent).
crossed_device() {
	at_least "$1: bytes sent on softrdma0" $(($(bytes_sent) - $2)) "$3"
}
