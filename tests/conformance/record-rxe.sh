#!/usr/bin/env bash
# Records rxe's answers to the conformance program (tests/conformance/rxe.ref) and rxe's
# outcome of each test of rdma-core's pyverbs suite (tests/pyverbs/rxe.results).
#
#   tests/conformance/record-rxe.sh
#
# Boots Debian bookworm's own kernel under QEMU (TCG: no KVM needed) with an initramfs made
# only of Debian packages fetched with apt-get download (the kernel image, whose modules
# include rdma_rxe; busybox-static; rdma-core's runtime; iproute2 for `ip` and `rdma`; and
# the libraries those need; Python and python3-pyverbs with its tests), plus the conformance
# program built from this checkout. The guest binds rxe0 to a dummy interface, runs the
# program and the pyverbs suite against it and prints their output between markers on the
# serial console (the guest's machinery: guest_lib.sh beside this); this script keeps them.
# Takes a few minutes. The packages come from the
# host's apt sources, which must be Debian bookworm's.
# Needs root for apt-get (it installs qemu-system-x86 and the build's packages if missing).
set -euo pipefail

src=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
out=$src/tests/conformance/rxe.ref
pyverbs_out=$src/tests/pyverbs/rxe.results
# Waits in the guest: TCG runs 10-15 times slower than the host.
guest_wait_ms=${RXE_WAIT_MS:-30000}
guest_quiet_ms=${RXE_QUIET_MS:-3000}
guest_pyverbs_s=${RXE_PYVERBS_S:-1200}
work=$(mktemp -d /tmp/softrdma-rxe.XXXXXX)
trap 'rm -rf "$work"' EXIT
guest_tag=record-rxe
# shellcheck source=tests/conformance/guest_lib.sh
. "$src/tests/conformance/guest_lib.sh"

# 1. Tools, and the program built from this checkout.
[ "$(id -u)" -eq 0 ] && apt-get update -qq
need_packages qemu-system-x86 xz-utils build-essential cmake pkg-config libibverbs-dev \
	librdmacm-dev liburing-dev libcmocka-dev python3-pyverbs
say "building the conformance program"
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$work/build" --target softrdma-conformance -j "$(nproc)" >/dev/null
prog=$work/build/bin/softrdma-conformance

# 2. The packages: the kernel that linux-image-amd64 names today, and the libraries the
# guest's programs link.
guest_kernel_package
guest_fetch "$kpkg" busybox-static libibverbs1 ibverbs-providers libnl-3-200 libnl-route-3-200 \
	iproute2 libc6 python3.11-minimal libpython3.11-minimal libpython3.11-stdlib \
	libpython3.11 python3-pyverbs librdmacm1
pydir=$root/usr/lib/python3/dist-packages/pyverbs
guest_fetch_libs "$prog" "$root"/bin/ip "$root"/usr/bin/rdma \
	"$root"/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so \
	"$root"/usr/bin/python3.11 "$pydir"/*.so "$pydir"/providers/*/*.so \
	"$root"/usr/lib/python3.11/lib-dynload/*.so

# 3. The kernel, uncompressed.
guest_vmlinux

# 4. The initramfs: the packages' files, the modules rxe needs, the program and an /init.
guest_initrd crc32_generic dummy ib_core ib_uverbs rdma_rxe rdma_ucm
# The pyverbs suite as Debian ships it (partly gzipped), and the runner that prints one
# line per test.
cp -r "$root/usr/share/doc/rdma-core/tests" "$initrd/pyverbs-tests"
gunzip -f "$initrd"/pyverbs-tests/*.gz
cp "$src/tests/pyverbs/run_suite.py" "$initrd/run_suite.py"
ln -sf python3.11 "$initrd/usr/bin/python3"
cp "$prog" "$initrd/softrdma-conformance"
guest_pack <<EOF
/softrdma-conformance -d rxe0 -g "\${g:-1}" -w $guest_wait_ms -q $guest_quiet_ms >/tmp/out 2>/tmp/err
echo "===CONFORMANCE BEGIN==="
cat /tmp/out
echo "===CONFORMANCE END==="
echo "stderr:"; cat /tmp/err
timeout $guest_pyverbs_s /usr/bin/python3 /run_suite.py /pyverbs-tests --dev rxe0 --gid "\${g:-1}" \
	>/tmp/pyverbs 2>/tmp/pyverbs.err
echo "===PYVERBS BEGIN==="
cat /tmp/pyverbs
echo "===PYVERBS END==="
echo "===PYVERBS STDERR BEGIN==="
cat /tmp/pyverbs.err
echo "===PYVERBS STDERR END==="
EOF

# 5. Boot, and keep what the guest printed between the markers.
start=$(date +%s)
guest_boot 3600
guest_finished '===CONFORMANCE END===' || exit 1
{
	echo "# rxe's answers to softrdma-conformance, recorded by tests/conformance/record-rxe.sh"
	echo "# guest: Debian $kpkg ($(grep -m1 '^guest:' "$work/console.txt" | cut -d' ' -f2-))"
	echo "# rdma-core: $(cd "$debs" && ls libibverbs1_*.deb | sed 's/^libibverbs1_//; s/_amd64.deb//')"
	guest_between '===CONFORMANCE BEGIN===' '===CONFORMANCE END==='
} >"$out"
if grep -q '^===PYVERBS END===' "$work/console.txt"; then
	{
		echo "# rxe's outcome of each pyverbs test (python3-pyverbs $(cd "$debs" &&
			ls python3-pyverbs_*.deb | sed 's/^python3-pyverbs_//; s/_amd64.deb//')),"
		echo "# recorded by tests/conformance/record-rxe.sh on $kpkg"
		guest_between '===PYVERBS BEGIN===' '===PYVERBS END===' | sort
	} >"$pyverbs_out"
	guest_between '===PYVERBS STDERR BEGIN===' '===PYVERBS STDERR END===' >"$work/pyverbs.err"
	say "pyverbs on rxe: $(grep -v '^#' "$pyverbs_out" | cut -d' ' -f2 | sort | uniq -c |
		tr -s ' \n' ' ')"
	say "why each rxe test failed: $pyverbs_out.log"
	cp "$work/pyverbs.err" "$pyverbs_out.log"
else
	say "the pyverbs suite did not finish in the guest"
fi
say "$(grep -vc '^#' "$out") cases recorded in $out; $(($(date +%s) - start)) s in the guest"
