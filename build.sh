#!/usr/bin/env bash
# The two commands of the README:
#   ./build.sh demo   install what is missing, build, run the demo on the soft device
#   ./build.sh test   install what is missing, build, run the whole test suite
#                     (a normal build and its timed tests under a CPU hog
#                     (tests/stress/loaded.sh), an ASan/UBSan build, the TSan tests, the fuzzers
#                     for a bounded time: docs/fuzzing.md; then the rdma-core releases of
#                     tests/compat/matrix.sh and, as root, the .deb in a clean Debian root)
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")"
. tools/packages.sh

packages=(build-essential cmake pkg-config libibverbs-dev librdmacm-dev liburing-dev
	libcmocka-dev ibverbs-utils rdmacm-utils perftest iproute2 util-linux passwd valgrind
	python3-pyverbs libfabric-bin libfabric1	# libfabric: test_libfabric (fi_pingpong)
	ucx-utils	# UCX's ucx_perftest and ucx_info: test_ucx
	openmpi-bin libopenmpi-dev mpich libmpich-dev	# test_mpi: both MPIs (on UCX), their mpicc and mpi.h
	clang-14 libclang-rt-14-dev	# clang: libFuzzer (tests/fuzz)
	prometheus-node-exporter curl	# test_counters reads the sysfs counters through it
	mandoc man-db	# the man pages' lint (test_man_pages)
	tshark)	# test_pcap decodes captures with it (its wireshark-common has mergecap)
# Only for the test command: building rdma-core releases (tests/compat), the .deb in a clean
# root (tests/package).
test_packages=(ninja-build libnl-3-dev libnl-route-3-dev debian-archive-keyring debootstrap git)

build() { # DIR [CMAKE ARGS...]
	local dir=$1
	shift
	cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
	cmake --build "$dir" -j "$(nproc)"
}

case "${1:-}" in
demo)
	install_missing build.sh "${packages[@]}"
	build build
	build/bin/softrdma demo
	;;
test)
	install_missing build.sh "${packages[@]}" "${test_packages[@]}"
	build build
	(cd build && ctest --output-on-failure -j 2)
	# The tests that time a peer, once more beside 2 x nproc busy loops (docs/semantics.md,
	# "Liveness"): a loaded machine must not turn slowness into errors.
	tests/stress/loaded.sh --rounds 1 --build build
	build build-sanitize -DSOFTRDMA_SANITIZE=ON
	(cd build-sanitize && ctest --output-on-failure -j 2)
	# ThreadSanitizer: threads sharing QPs and CQs, and the RC tests (label tsan).
	build build-tsan -DSOFTRDMA_TSAN=ON
	(cd build-tsan && ctest --output-on-failure -j 2 -L tsan)
	# libFuzzer, with clang: each harness for SOFTRDMA_FUZZ_SECONDS (30), then every input
	# that ever crashed one (tests/fuzz/regressions). Only what the harnesses need is built.
	CC=clang-14 cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSOFTRDMA_FUZZ=ON >/dev/null
	cmake --build build-fuzz -j "$(nproc)" --target fuzz_stream fuzz_completer fuzz_ud fuzz_cm \
		softrdma softrdma-preload softrdma-sysfs
	(cd build-fuzz && ctest --output-on-failure -L fuzz)
	# Real rdma-core releases, one per private provider ABI, each built once from source and
	# cached; the system's (44 on bookworm) ran the whole suite above.
	tests/compat/matrix.sh 56.1 58.0 61.0 64.0 65.0
	# The package as a user installs it: docs/ci.md's steps in a debootstrap root.
	if [ "$(id -u)" -eq 0 ]; then
		tests/package/test_deb.sh
	else
		echo "build.sh: tests/package/test_deb.sh skipped: it needs root (debootstrap, chroot)" >&2
	fi
	;;
*)
	echo "usage: ./build.sh demo | test" >&2
	exit 2
	;;
esac
