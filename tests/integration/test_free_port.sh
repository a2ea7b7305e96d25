# tools/free_port.sh, the one port picker of the tests, benchmarks and demo: callers that
# run side by side are never handed the same port, the marks that ensure it expire, and a
# marks directory planted by someone else is not used.
. "$(dirname "$0")/lib.sh"

scratch_dir run
export XDG_RUNTIME_DIR=$run
marks=$run/softrdma-ports-$(id -u)

# Four callers whose random start is the same port (RANDOM seeded alike), 20 ports each.
pick20() { RANDOM=7; for ((k = 0; k < 20; k++)); do free_port || echo fail; done; }
for j in 1 2 3 4; do pick20 >"$run/picked.$j" & done
wait
all=$(cat "$run"/picked.*)
[ "$(grep -c . <<<"$all")" = 80 ] && ! grep -q fail <<<"$all" &&
	pass "80 ports handed out to 4 callers at once" || fail "picks: $(tr '\n' ' ' <<<"$all")"
dups=$(sort <<<"$all" | uniq -d)
[ -z "$dups" ] && pass "no port handed out twice, though every caller started at the same one" ||
	fail "handed out twice: $(tr '\n' ' ' <<<"$dups")"
[ "$(stat -c '%a %u' "$marks")" = "700 $(id -u)" ] && pass "the marks are private (0700, ours)" ||
	fail "marks directory: $(stat -c '%a %u' "$marks")"

# Marks older than 10 minutes go at the next call; fresh ones stay.
mkdir "$marks/20001" "$marks/20002"
touch -d '11 minutes ago' "$marks/20001"
free_port >/dev/null
[ ! -e "$marks/20001" ] && pass "a mark 11 minutes old is swept" || fail "an old mark stayed"
[ -d "$marks/20002" ] && pass "a fresh mark stays" || fail "a fresh mark was swept"

# A link planted where the marks go: free_port still answers, and marks nothing there.
rm -rf "$marks"
mkdir "$run/elsewhere"
ln -s "$run/elsewhere" "$marks"
p=$(free_port) && pass "with a planted link: port $p" || fail "no port with a planted link"
[ -z "$(ls -A "$run/elsewhere")" ] && pass "nothing marked through the planted link" ||
	fail "marked through the link: $(ls "$run/elsewhere")"
finish
