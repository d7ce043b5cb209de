#!/bin/sh
# Checkpoints and --resume with a real daemon: a run resumed from a
# mid-way checkpoint ends bit-identical to the uninterrupted run (same step
# count, optimizer state, sample order); corrupt or mismatched checkpoints
# are refused and left untouched.
. "$(dirname "$0")/lib.sh"
need_data
common="--max-steps 600 --checkpoint-every 200 --checkpoint-keep 10 --eval-samples 500 --seed 3"

start full --control "$T/full.sock" --checkpoint-dir "$T/full" $common
wait_exit "$pid_full" 60 || fail "uninterrupted run failed: $(tail -3 "$T/full.log")"
for s in 200 400 600; do
	[ -f "$T/full/$(printf 'ckpt-%012d.gdc' $s)" ] || fail "no checkpoint at step $s"
done

mkdir -p "$T/part"
cp "$T/full/ckpt-000000000400.gdc" "$T/part/"
start part --control "$T/part.sock" --checkpoint-dir "$T/part" --resume $common
wait_exit "$pid_part" 60 || fail "resumed run failed: $(tail -3 "$T/part.log")"
grep -q "resumed from .*ckpt-000000000400.gdc at step 400" "$T/part.log" ||
	fail "no resume message: $(cat "$T/part.log")"
cmp "$T/full/ckpt-000000000600.gdc" "$T/part/ckpt-000000000600.gdc" ||
	fail "resumed run differs from the uninterrupted one"
ok "resume from step 400 ends bit-identical to the uninterrupted run"

# A flipped byte in the newest checkpoint: refused, exit 1, file untouched.
f="$T/part/ckpt-000000000600.gdc"
cp "$f" "$T/orig"
$PYTHON - "$f" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[len(b) // 2] ^= 0x10
open(p, "wb").write(b)
PY
cp "$f" "$T/flipped"
"$GOSSIPD" --foreground --control "$T/x.sock" --checkpoint-dir "$T/part" --resume $common \
	>"$T/corrupt.log" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "corrupt checkpoint: exit $rc, wanted 1"
grep -q "refusing" "$T/corrupt.log" || fail "no refusal: $(cat "$T/corrupt.log")"
cmp -s "$f" "$T/flipped" || fail "the refused checkpoint was modified"
ok "flipped byte refused ($(grep -o 'refusing.*' "$T/corrupt.log" | head -c 120))"

# Another model shape: refused.
"$GOSSIPD" --foreground --control "$T/y.sock" --checkpoint-dir "$T/full" --resume \
	--model 784-64-10 $common >"$T/shape.log" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "mismatched model: exit $rc, wanted 1"
grep -q "refusing.*model" "$T/shape.log" || fail "no refusal: $(cat "$T/shape.log")"
ok "checkpoint of another model refused"

# --resume with an empty directory starts fresh.
"$GOSSIPD" --foreground --control "$T/z.sock" --checkpoint-dir "$T/empty" --resume \
	--max-steps 20 --eval-samples 200 >"$T/fresh.log" 2>&1 || fail "fresh resume failed"
grep -q "starting fresh" "$T/fresh.log" || fail "no fresh-start message"
ok "--resume with no checkpoint starts fresh"
