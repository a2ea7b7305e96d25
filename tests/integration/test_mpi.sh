# Two MPIs on the soft device through UCX (issue 13): Debian's Open MPI (pml ucx, osc ucx)
# and MPICH (ch4:ucx), each running tests/tools/mpi_check.c on 2 ranks of one run
# (softrdma env) on this host: a ping-pong of 8 B to 1 MiB and MPI_Put/MPI_Get through a
# window, every byte checked by the receiving rank. Neither may carry the data any other
# way: UCX is limited to rc_verbs (ud_verbs for its wire-up) and softrdma0; Open MPI to its
# UCX components, with no BTL but self; MPICH told that no two ranks share a node
# (MPIR_CVAR_NOLOCAL), so it does not use its shared memory. UCX says on which transport
# each endpoint went (UCX_LOG_LEVEL=info) and the port counters show the bytes went out on
# softrdma0. mpi_check is built in the scratch directory with each MPI's own mpicc.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pairs.sh"
. "$(dirname "$0")/env_counters.sh"

src=${SOFTRDMA_SOURCE:-$(dirname "$0")/../..}/tests/tools/mpi_check.c
export UCX_NET_DEVICES=softrdma0:1 UCX_TLS=rc_v,self UCX_LOG_LEVEL=info
unset UCX_UD_ETH_DGID_CHECK	# rc_verbs' wire-up goes over ud_verbs, which needs no workaround
# What mpi_check moves at least, both ways: 200 round trips of 8 B, 4 KiB and 64 KiB, 20 of
# 1 MiB, then 1 MiB put and 1 MiB got.
min_bytes=$((2 * 200 * (8 + 4096 + 65536) + 2 * 20 * 1048576 + 2 * 1048576))

# mpi_case NAME MPICC MPIRUN ARGS...: builds mpi_check with MPICC, runs it with MPIRUN -np 2.
mpi_case() {
	local name=$1 mpicc=$2 mpirun=$3 exe before rc=0 out
	shift 3
	for tool in "$mpicc" "$mpirun"; do
		command -v "$tool" >/dev/null ||
			{ fail "$name: $tool is not installed (build.sh installs it)"; return 1; }
	done
	exe=$logs/mpi_check.$name
	# The compiler is not an RDMA program: without the soft device's preloads.
	env -u LD_PRELOAD "$mpicc" -O2 -Wall -Wextra -Werror -o "$exe" "$src" ||
		{ fail "$name: $mpicc cannot build $src"; return 1; }
	before=$(bytes_sent)
	timeout -k 5 60 "$mpirun" -np 2 "$@" "$exe" >"$logs/$name" 2>&1 || rc=$?
	out=$(<"$logs/$name")
	if [ $rc -ne 0 ]; then
		fail "$name: $mpirun exited $rc (124: timed out)"
		sed 's/^/  | /' <<<"$out" >&2
		return 1
	fi
	pass "$name: both ranks exit 0"
	grep -E '^(ping-pong|rma:)' <<<"$out" | sed "s/^/  $name: /"	# the figures, for the log
	for size in 8 4096 65536 1048576; do
		expect_contains "$name: ping-pong of $size bytes, data checked" "$out" \
			"^ping-pong $size bytes: [0-9]+ round trips checked, $nz us one way"
	done
	expect_contains "$name: MPI_Put and MPI_Get, data checked" "$out" \
		'^rma: MPI_Put and MPI_Get of 1048576 bytes checked'
	expect_contains "$name: all data checked" "$out" '^mpi_check: all data checked$'
	# Each rank's endpoint to the other: tag matching (and RMA) on rc_verbs over softrdma0.
	[ "$(grep -Ec 'ep_cfg\[[0-9]+\]: tag\(rc_verbs/softrdma0:1\)' <<<"$out")" -ge 2 ] &&
		pass "$name: both ranks' tag endpoints on rc_verbs/softrdma0:1" ||
		{ fail "$name: no rc_verbs tag endpoint for both ranks in:"; echo "$out" >&2; }
	expect_absent "$name: no endpoint on another transport" "$out" \
		'ep_cfg.*(tcp|posix|sysv|cma|knem|xpmem)/'
	crossed_device "$name" "$before" "$min_bytes"
}

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi_case openmpi mpicc.openmpi mpirun.openmpi --allow-run-as-root \
	--mca pml ucx --mca osc ucx --mca btl self
expect_contains "openmpi: MPI_Put/MPI_Get through osc ucx on rc_verbs" "$(<"$logs/openmpi")" \
	'ep_cfg\[[0-9]+\]: rma\(rc_verbs/softrdma0:1\)'
MPIR_CVAR_NOLOCAL=1 mpi_case mpich mpicc.mpich mpirun.mpich
finish
