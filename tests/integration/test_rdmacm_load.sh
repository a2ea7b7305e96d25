# Debian's cmtime and rping, as test_rdmacm_utils runs them, several times each while
# twice as many busy loops as the machine has cores take the CPUs. Both once
# failed only on a loaded runner: a cmtime pair that never finished (killed at 60 s) and
# an rping client that exited 255 after its 100 verified pings. Their cause, two races
# between rdma_destroy_id and a thread blocked in rdma_get_cm_event, is reproduced on
# its own by test_cm_stress; this checks that the programs now come through the load.
# SOFTRDMA_LOAD_ROUNDS (default 5) sets how many times each runs.
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/pairs.sh"
. "$(dirname "$0")/rdmacm_cases.sh"

rounds=${SOFTRDMA_LOAD_ROUNDS:-5}
hogs=()
at_exit 'kill "${hogs[@]}" 2>/dev/null'
for ((i = 0; i < 2 * $(nproc); i++)); do
	(while :; do :; done) &
	hogs+=($!)
done
echo "${#hogs[@]} busy loops on $(nproc) cores"

engine=uring
export SOFTRDMA_ENGINE=$engine
for ((r = 1; r <= rounds; r++)); do
	case_cmtime 127.0.0.1
	case_rping "loaded rping $r/$rounds" 127.0.0.1
done
finish
