#!/usr/bin/env bash
# abi_layout.sh RELEASE_PROGRAM OURS_PROGRAM: the two builds of abi_layout.c print the same
# layout, or the difference is shown and the test fails.
set -uo pipefail
release=$("$1") || { echo "FAIL: $1 did not run" >&2; exit 1; }
ours=$("$2") || { echo "FAIL: $2 did not run" >&2; exit 1; }
if ! diff <(echo "$release") <(echo "$ours") >&2; then
	echo "FAIL: kernel-abi/provider_abi.h differs from the release's driver.h (< release, > ours)" >&2
	exit 1
fi
echo "ok: $(grep -c '^verbs_context_ops\.' <<<"$release") ops and $(grep -c '^sizeof' <<<"$release") structures laid out as the release's driver.h lays them out"
