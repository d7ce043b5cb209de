#!/bin/bash
# Replays every fuzz target's corpus (tests/fuzz/corpus/NAME) through
# replay_NAME: a fast regression test of every input a fuzzer ever kept,
# crash inputs of fixed bugs included. Long fuzzing runs are by hand (README).
# Without a sanitizer in the build, glibc's malloc checks (libc_malloc_debug,
# MALLOC_CHECK_=3) still catch heap overflows at free time.
. "$(dirname "$0")/fleet.sh"

malloc_debug=
for lib in /lib/x86_64-linux-gnu/libc_malloc_debug.so.0 /usr/lib64/libc_malloc_debug.so.0; do
	[ -f "$lib" ] && { malloc_debug=$lib; break; }
done

failed=
for name in wire session control config idx ckpt member gossip pull share; do
	bin="$FLEET_BUILD/tests/fuzz/replay_$name"
	dir="$FLEET_TOP/tests/fuzz/corpus/$name"
	[ -x "$bin" ] || fleet_fail "$bin not built"
	[ -d "$dir" ] || fleet_fail "no corpus $dir"
	if [ -n "$malloc_debug" ] && ! grep -q __asan_init "$bin"; then
		LD_PRELOAD=$malloc_debug MALLOC_CHECK_=3 "$bin" "$dir" >"$FLEET_DIR/$name.log" 2>&1
	else
		"$bin" "$dir" >"$FLEET_DIR/$name.log" 2>&1
	fi ||
		{ tail -n 30 "$FLEET_DIR/$name.log" >&2; failed="$failed $name"; continue; }
	fleet_ok "$name: $(tail -n 1 "$FLEET_DIR/$name.log")"
done
[ -z "$failed" ] || fleet_fail "fuzz targets crashed on their corpus:$failed"
