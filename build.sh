#!/usr/bin/env bash
# The two commands of the README:
#   ./build.sh demo   install what is missing, build, run the demo on the soft device
#   ./build.sh test   install what is missing, build, run the whole test suite
#                     (a normal build, an ASan/UBSan build, the TSan tests, the fuzzers
#                     for a bounded time: docs/fuzzing.md)
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")"
. tools/packages.sh

packages=(build-essential cmake pkg-config libibverbs-dev librdmacm-dev liburing-dev
	libcmocka-dev ibverbs-utils rdmacm-utils perftest iproute2 util-linux passwd valgrind
	python3-pyverbs clang-14 libclang-rt-14-dev	# clang: libFuzzer (tests/fuzz)
	prometheus-node-exporter curl)	# test_counters reads the sysfs counters through it

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
	install_missing build.sh "${packages[@]}"
	build build
	(cd build && ctest --output-on-failure -j 2)
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
	;;
*)
	echo "usage: ./build.sh demo | test" >&2
	exit 2
	;;
esac
