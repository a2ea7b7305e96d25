#!/usr/bin/env bash
# tests/compat/matrix.sh [VERSION...]: softrdma against real rdma-core releases.
#
# For each VERSION (default: system 56.1 58.0 61.0 64.0 65.0) it builds that release from
# source once, into a prefix cached by version, builds softrdma against the prefix (its
# libibverbs.pc, headers and libraries), checks kernel-abi/provider_abi.h against the
# release's own driver.h, checks that programs run with LD_LIBRARY_PATH=PREFIX/lib under
# `softrdma run` load that release and our provider, then runs the part of the suite below
# with the release's own programs (PATH=PREFIX/bin) and libraries. "system" is the
# installed rdma-core, used as it is.
#
# Sources, in this order: Debian's source packages (deb-src trixie and sid, through a
# private apt configuration: the system's apt sources are not touched), then
# ../shared/rdma-core/rdma-core-VERSION.tar.gz beside the checkout. A version found in
# neither is skipped with the reason, and the others still run; under CI (CI=true, or
# SOFTRDMA_COMPAT_REQUIRE_ALL=1) a skipped version fails the run.
#
# Environment: SOFTRDMA_COMPAT_CACHE (the built releases; default
# ${XDG_CACHE_HOME:-~/.cache}/softrdma/compat), SOFTRDMA_COMPAT_SHARED (default
# ../shared/rdma-core), SOFTRDMA_COMPAT_OFFLINE=1 (no download from Debian).
# Output: one line per version (source, configure, build, checks, tests, seconds), also in
# build-compat/matrix.txt; exit 1 if any version failed.
set -uo pipefail
src=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
. "$src/tools/packages.sh"

cache=${SOFTRDMA_COMPAT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/softrdma/compat}
shared=${SOFTRDMA_COMPAT_SHARED:-$src/../shared/rdma-core}
out_dir=$src/build-compat
require_all=${SOFTRDMA_COMPAT_REQUIRE_ALL:-}
[ "${CI:-}" = true ] && require_all=1
# Bump when the way a release is built changes: cached prefixes built otherwise are redone.
recipe="1: cmake -GNinja -DNO_MAN_PAGES=1 -DNO_PYVERBS=1, ninja install"

# The part of the suite run against each release: everything that crosses the line between
# softrdma and rdma-core (the private ABI, libibverbs' device discovery and inline verbs,
# the release's programs, librdmacm's public structures in the drop-in), none of what only
# exercises our engine, which does not change with the release and runs in full against the
# system's rdma-core, plain, under ASan/UBSan and TSan (./build.sh test):
compat_tests=(
	test_abi_layout		# our declarations against the release's driver.h
	test_wrong_abi		# the load-time check against this libibverbs
	test_devinfo		# the release's ibv_devices/ibv_devinfo read our sysfs tree
	test_device test_rc_access test_rc_ops test_rc_state test_srq test_uc test_mw test_ud
	test_same_host test_threads test_survival test_rc_hostile	# every verb, through its inline wrappers
	test_qp_ex test_cq_ex	# the ibv_wr_*/ibv_start_poll builders on this release's structs
	test_newer_verbs	# ibv_reg_mr_ex, ibv_alloc_buf, ibv_query_port_speed, EOPNOTSUPP ones
	test_cm			# rdma_cm through the drop-in, built on this release's rdma_cma.h
	test_rc_pingpong	# the release's ibv_rc_pingpong, both engines, poll and events
	test_ud_uc_srq		# the release's UD, UC and SRQ pingpongs, perftest -c UD and UC
	test_rdmacm_utils	# the release's rping, ucmatose, udaddy, rstream, ..., perftest -R
	test_conformance_rxe	# the 170 cases, compared with rxe's answers
)
# Left out, and why: the *_valgrind runs and test_faults_* (our memory and our fault
# injection: the same with any release), test_netns and test_rdmacm_netns (namespaces and
# routes), test_engine_fallback (io_uring/epoll choice), test_same_host_pair (our
# process_vm_readv path), the emu unit tests (no libibverbs in them), test_unprivileged
# (the cached prefix is the invoking user's; the .deb test runs as an unprivileged user),
# test_pyverbs_rxe (needs the release's pyverbs, not built, and Debian's is 44's),
# test_configure_version and test_demo (faked .pc files; the same programs as above), and
# test_perftest: perftest meets each release above through rdma_cm (-R: write, read, atomic,
# send and read latency) and UD/UC; what test_perftest adds (event mode, -q 4, 1 MiB, the -a
# sweep) is the engine's, and its ib_send_lat -e case fails now and then under load against
# any release, 44 included (IBV_WC_RETRY_EXC_ERR: an engine bug, not a release's).

usage() {
	sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "$0"
	exit "${1:-0}"
}

log() { echo "matrix: $*" >&2; }

# The private apt configuration: deb-src lines for trixie and sid, lists in the cache.
apt_dir=$cache/apt
apt_opts=()
apt_state=""	# "", ok or failed: the lists are fetched once per run
apt_setup() {
	[ -n "$apt_state" ] && { [ "$apt_state" = ok ]; return; }
	apt_state=failed
	mkdir -p "$apt_dir/sources.list.d" "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
	: >"$apt_dir/sources.list"
	cat >"$apt_dir/sources.list.d/deb-src.sources" <<-EOF
		Types: deb-src
		URIs: http://deb.debian.org/debian
		Suites: trixie sid
		Components: main
		Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
	EOF
	apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list"
		-o "Dir::Etc::SourceParts=$apt_dir/sources.list.d"
		-o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
		-o "APT::Sandbox::User=$(id -un)")
	if ! apt-get "${apt_opts[@]}" -qq update >"$apt_dir/update.log" 2>&1; then
		log "apt-get update of the deb-src lists failed (see $apt_dir/update.log)"
		return 1
	fi
	apt_state=ok
}

# debian_source VERSION DIR: the upstream tarball of VERSION from Debian's source package,
# into DIR; prints its path. Only the .orig.tar.gz is needed (apt checks it against the
# signed index; the .dsc and debian.tar are not used).
debian_source() {
	local version=$1 dir=$2 debver
	[ -n "${SOFTRDMA_COMPAT_OFFLINE:-}" ] && return 1
	command -v apt-get >/dev/null || return 1
	apt_setup || return 1
	debver=$(apt-cache "${apt_opts[@]}" showsrc rdma-core 2>/dev/null |
		sed -n "s/^Version: \(${version//./\\.}-.*\)/\1/p" | sort -V | tail -n 1)
	[ -n "$debver" ] || return 1
	mkdir -p "$dir"
	(cd "$dir" && apt-get "${apt_opts[@]}" -qq source --download-only "rdma-core=$debver") \
		>"$dir/apt-source.log" 2>&1
	[ -f "$dir/rdma-core_$version.orig.tar.gz" ] || {
		log "Debian has rdma-core $debver, but its .orig.tar.gz did not download ($dir/apt-source.log)"
		return 1
	}
	echo "$dir/rdma-core_$version.orig.tar.gz"
}

# find_source VERSION DIR: prints "ORIGIN TARBALL", or returns 1 saying why there is none.
find_source() {
	local version=$1 dir=$2 tarball debian="not in Debian's trixie/sid sources"
	[ -n "${SOFTRDMA_COMPAT_OFFLINE:-}" ] && debian="Debian not asked (SOFTRDMA_COMPAT_OFFLINE)"
	if tarball=$(debian_source "$version" "$dir"); then
		echo "debian $tarball"
	elif [ -f "$shared/rdma-core-$version.tar.gz" ]; then
		echo "shared $shared/rdma-core-$version.tar.gz"
	elif [ ! -d "$shared" ]; then
		log "$version: $debian, and $shared is absent (a clone without ../shared): skipped"
		return 1
	else
		log "$version: $debian, and not in $shared: skipped"
		return 1
	fi
}

stamp_of() { echo "$(sha256sum <"$1" | cut -d' ' -f1) $recipe"; }

# build_release VERSION: the release built and installed into $cache/rdma-core-VERSION
# (prefix/, and driver-include/: its build tree's include/, where driver.h is), once per
# source and recipe. Sets origin (debian or shared). Returns 2 when there is no source, 1 when the build failed.
build_release() {
	local version=$1 dir=$cache/rdma-core-$1 found tarball
	mkdir -p "$dir"
	exec 9>"$dir/.lock"
	flock 9
	# Cached: built with this recipe, from the tarball it was built from if that is still
	# there (a clone without ../shared keeps what it built before).
	if [ -f "$dir/stamp" ] && [ "$(cut -d' ' -f2- "$dir/stamp")" = "$recipe" ] &&
		read -r origin tarball <"$dir/source" &&
		{ [ ! -f "$tarball" ] || [ "$(stamp_of "$tarball")" = "$(cat "$dir/stamp")" ]; }; then
		exec 9>&-
		return 0
	fi
	# The lists once, here: find_source runs in a subshell, which would forget them.
	[ -n "${SOFTRDMA_COMPAT_OFFLINE:-}" ] || ! command -v apt-get >/dev/null || apt_setup
	found=$(find_source "$version" "$dir/download") || { exec 9>&-; return 2; }
	origin=${found%% *}
	tarball=${found#* }
	log "$version: building rdma-core from $tarball (once; cached in $dir)"
	rm -rf "$dir/src" "$dir/build" "$dir/prefix" "$dir/driver-include" "$dir/stamp"
	mkdir -p "$dir/src"
	if tar -xzf "$tarball" -C "$dir/src" --strip-components=1 &&
		cmake -GNinja -S "$dir/src" -B "$dir/build" -DNO_MAN_PAGES=1 -DNO_PYVERBS=1 \
			-DCMAKE_INSTALL_PREFIX="$dir/prefix" >"$dir/build.log" 2>&1 &&
		ninja -C "$dir/build" -j "$(nproc)" install >>"$dir/build.log" 2>&1 &&
		cp -rL "$dir/build/include" "$dir/driver-include"; then
		echo "$origin $tarball" >"$dir/source"
		stamp_of "$tarball" >"$dir/stamp"
		rm -rf "$dir/src" "$dir/build"
		exec 9>&-
		return 0
	fi
	log "$version: the rdma-core build failed; the end of $dir/build.log:"
	tail -n 20 "$dir/build.log" >&2
	exec 9>&-
	return 1
}

# loads_release PREFIX BUILD PABI: `softrdma run` with LD_LIBRARY_PATH=PREFIX/lib runs the
# release's ibv_devinfo on the release's libibverbs, which loads our provider.
loads_release() {
	local prefix=$1 build=$2 pabi=$3 out
	out=$("$build/bin/softrdma" run -- env LD_DEBUG=libs ibv_devinfo -l 2>&1)
	grep -q "calling init: $prefix/lib/libibverbs.so.1\$" <<<"$out" &&
		grep -q "calling init: $build/lib/softrdma/libsoftrdma-rdmav$pabi.so\$" <<<"$out" &&
		grep -q '^[[:space:]]*softrdma0$' <<<"$out" && return 0
	log "the release's ibv_devinfo did not load $prefix/lib/libibverbs.so.1 and libsoftrdma-rdmav$pabi.so:"
	grep -E 'calling init: .*(ibverbs|softrdma)|softrdma0|found' <<<"$out" | head -n 20 >&2
	return 1
}

# run_version VERSION: prints one result line.
run_version() {
	local version=$1 start=$SECONDS prefix="" build=$out_dir/$1 origin="system" rc pabi
	local cmake_args=() env_path=$PATH env_ld=${LD_LIBRARY_PATH:-} regex
	local configure=- compile=- checks=- tests=- total
	result() { printf '%-7s %-7s configure %-6s build %-6s checks %-6s tests %-24s %4ss\n' \
		"$version" "$origin" "$configure" "$compile" "$checks" "$tests" "$((SECONDS - start))"; }
	if [ "$version" != system ]; then
		build_release "$version"
		rc=$?
		[ $rc -eq 2 ] && { origin=none; configure=skipped; result; return 2; }
		[ $rc -ne 0 ] && { configure=failed; result; return 1; }
		prefix=$cache/rdma-core-$version/prefix
		cmake_args=(-DCMAKE_PREFIX_PATH="$prefix"
			-DSOFTRDMA_RELEASE_INCLUDE="$cache/rdma-core-$version/driver-include")
		env_path=$prefix/bin:$PATH
		env_ld=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	fi
	configure=failed
	PKG_CONFIG_PATH=${prefix:+$prefix/lib/pkgconfig}${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH} \
		cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${cmake_args[@]}" \
		>"$build.configure.log" 2>&1 || { tail -n 20 "$build.configure.log" >&2; result; return 1; }
	configure=ok
	compile=failed
	cmake --build "$build" -j "$(nproc)" >"$build.build.log" 2>&1 ||
		{ grep -E 'error|Error' "$build.build.log" | head -n 20 >&2; result; return 1; }
	compile=ok
	pabi=$(sed -n 's/.*provider ABI IBVERBS_PRIVATE_\([0-9]*\),.*/\1/p' "$build.configure.log")
	checks=failed
	if [ -n "$prefix" ]; then
		PATH=$env_path LD_LIBRARY_PATH=$env_ld loads_release "$prefix" "$build" "$pabi" ||
			{ result; return 1; }
	fi
	checks=ok
	regex="^($(IFS='|'; echo "${compat_tests[*]}"))\$"
	(cd "$build" && PATH=$env_path LD_LIBRARY_PATH=$env_ld \
		ctest --output-on-failure -j 2 -R "$regex" >"$build.ctest.log" 2>&1)
	rc=$?
	total=$(grep -Eo 'tests failed out of [0-9]+' "$build.ctest.log" | grep -Eo '[0-9]+$')
	if [ $rc -ne 0 ]; then
		tests="$(grep -Eo '[0-9]+ tests failed' "$build.ctest.log" | grep -Eo '^[0-9]+') of ${total:-?} failed"
		sed -n '/The following tests FAILED/,$p' "$build.ctest.log" >&2
		log "$version: the failed tests' output is in $build.ctest.log"
		result
		return 1
	fi
	tests="${total:-?} passed"
	result
}

case "${1:-}" in -h | --help) usage 0 ;; -*) usage 2 >&2 ;; esac
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(system 56.1 58.0 61.0 64.0 65.0)

install_missing matrix.sh build-essential cmake pkg-config ninja-build libnl-3-dev \
	libnl-route-3-dev debian-archive-keyring
mkdir -p "$cache" "$out_dir"
failed=0
skipped=0
: >"$out_dir/matrix.txt"
for v in "${versions[@]}"; do
	run_version "$v" >"$out_dir/line" # not in a subshell: the apt lists are fetched once
	rc=$?
	tee -a "$out_dir/matrix.txt" <"$out_dir/line"
	case $rc in 0) ;; 2) skipped=$((skipped + 1)) ;; *) failed=$((failed + 1)) ;; esac
done
[ $skipped -gt 0 ] && log "$skipped version(s) skipped: no source (see above)"
if [ $skipped -gt 0 ] && [ -n "$require_all" ]; then
	log "under CI every version must run (CI=true or SOFTRDMA_COMPAT_REQUIRE_ALL=1)"
	failed=$((failed + skipped))
fi
[ $failed -eq 0 ]
