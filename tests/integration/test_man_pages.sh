# The man pages: lint-clean (mandoc -T lint, lexgrog), rendered by man without a warning,
# installed by cmake --install where man finds them, and naming the tool's real commands.
. "$(dirname "$0")/lib.sh"
: "${SOFTRDMA_SOURCE:?}"
pages=(softrdma.1 softrdma.7 softrdma-faults.7)
for tool in mandoc lexgrog man; do
	command -v $tool >/dev/null || { fail "$tool is missing (apt-get install mandoc man-db)"; finish; }
done

for p in "${pages[@]}"; do
	f="$SOFTRDMA_SOURCE/docs/$p"
	out=$(mandoc -T lint -W style "$f" 2>&1)
	[ -z "$out" ] && pass "$p: mandoc -T lint clean" || fail "$p: mandoc -T lint: $out"
	out=$(lexgrog "$f" 2>&1) && pass "$p: lexgrog finds its NAME: ${out#*: }" ||
		fail "$p: lexgrog: $out"
	out=$(MANWIDTH=80 man --warnings -l "$f" 2>&1 >/dev/null)
	[ -z "$out" ] && pass "$p: man -l renders without a warning" || fail "$p: man -l: $out"
done

# Installed where man looks for them.
scratch_dir prefix
cmake --install "$SOFTRDMA_BUILD" --prefix "$prefix" >/dev/null 2>&1 ||
	fail "cmake --install $SOFTRDMA_BUILD"
for page in "1 softrdma" "7 softrdma" "7 softrdma-faults"; do
	set -- $page
	out=$(MANPATH="$prefix/share/man" man -w "$1" "$2" 2>&1)
	[ "$out" = "$prefix/share/man/man$1/$2.$1.gz" ] && pass "man finds $2($1) installed" ||
		fail "man -w $1 $2: $out"
done
out=$(MANPATH="$prefix/share/man" MANWIDTH=80 man 1 softrdma 2>&1)
expect_contains "softrdma(1) is readable with man" "$out" '^SOFTRDMA\(1\)'

# softrdma(1) documents each command `softrdma help` lists.
for cmd in $("$SOFTRDMA" help | sed -n 's/^ *\(usage: \)\{0,1\}softrdma \([a-z]*\).*/\2/p'); do
	grep -q "^\.B $cmd\b" "$SOFTRDMA_SOURCE/docs/softrdma.1" && pass "softrdma(1) documents $cmd" ||
		fail "softrdma(1) does not document '$cmd'"
done
finish
