#!/bin/sh
# Replays every fuzz target's corpus (tests/fuzz/corpus/NAME) through
# replay_NAME: a fast regression test of every input a fuzzer ever kept,
# crash inputs of fixed bugs included. Long fuzzing runs are by hand (README).
. "$(dirname "$0")/lib.sh"

for name in wire session control config idx ckpt member gossip; do
	bin="$top_builddir/tests/fuzz/replay_$name"
	dir="$top_srcdir/tests/fuzz/corpus/$name"
	[ -x "$bin" ] || fail "$bin not built"
	[ -d "$dir" ] || fail "no corpus $dir"
	"$bin" "$dir" >"$T/$name.log" 2>&1 ||
		{ tail -n 30 "$T/$name.log" >&2; fail "fuzz target $name crashed on its corpus"; }
	ok "$name: $(tail -n 1 "$T/$name.log")"
done
