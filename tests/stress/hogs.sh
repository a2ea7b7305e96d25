# shellcheck shell=bash
# CPU hogs for the stress scripts: 2 x nproc CPU-bound loops (stress-ng if installed, else
# one shell loop each). Sourced; start_hogs puts their pids in hogs, stop_hogs ends them.
hogs=()
hog_count=$(($(nproc) * 2))

start_hogs() {
	local i
	if command -v stress-ng >/dev/null; then
		stress-ng --cpu "$hog_count" --quiet >/dev/null 2>&1 &
		hogs+=($!)
		return
	fi
	for ((i = 0; i < hog_count; i++)); do
		sh -c 'while :; do :; done' &
		hogs+=($!)
	done
}

stop_hogs() {
	local p
	for p in "${hogs[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${hogs[@]}"; do wait "$p" 2>/dev/null; done
	hogs=()
}
