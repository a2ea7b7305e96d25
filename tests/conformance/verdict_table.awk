# What tests/conformance/compare.sh and tests/pyverbs/compare.sh share: both read a
# differences.txt of "name | what softrdma may answer | why" lines, give every name a verdict
# (same, differs-documented or differs) and write the same side-by-side table, so that the
# two tables in docs/ keep one shape.
#
# The program that includes this fills order[1..n], verdict[] and count[] (by verdict), and
# defines rxe_cell(name), soft_cell(name) and verdict_cell(name): the cells of a name's row.

function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }

# A line of differences.txt into f[1..3], trimmed. 0 for a comment or a blank line, and for a
# malformed line, which it reports and counts in bad.
function read_difference(line, f,    n) {
	if (line ~ /^#/ || line ~ /^[ \t]*$/)
		return 0
	n = split(line, f, "|")
	f[1] = trim(f[1]); f[2] = trim(f[2]); f[3] = trim(f[3])
	if (n != 3 || f[1] == "" || f[3] == "") {
		printf "differences.txt: malformed line: %s\n", line
		bad++
		return 0
	}
	return 1
}

# The table into file: "# title", the intro (whole lines), the verdicts counted, then a row a
# name; noun is what a name is ("case", "test").
function write_table(file, title, intro, noun, n,    i, c) {
	print "# " title > file
	print "" > file
	printf "%s", intro > file
	print "" > file
	printf "%d %ss: %d same, %d differ as documented, %d differ.\n\n", n, noun,
		count["same"], count["differs-documented"], count["differs"] > file
	print "| " toupper(substr(noun, 1, 1)) substr(noun, 2) " | rxe | softrdma | Verdict |" > file
	print "| --- | --- | --- | --- |" > file
	for (i = 1; i <= n; i++) {
		c = order[i]
		printf "| %s | %s | %s | %s |\n", c, rxe_cell(c), soft_cell(c), verdict_cell(c) > file
	}
}
