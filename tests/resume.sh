#!/bin/bash
# Checkpoints and --resume with a real daemon: a run resumed from a
# mid-way checkpoint ends bit-identical to the uninterrupted run (same step
# count, optimizer state, sample order); corrupt or mismatched checkpoints
# are refused and left untouched.
. "$(dirname "$0")/fleet.sh"
fleet_need_data
common="--max-steps 600 --checkpoint-every 200 --checkpoint-keep 10 --eval-samples 500 --seed 3"

fleet_gossipd full --checkpoint-dir "$FLEET_DIR/full" $common
fleet_wait_exit full 60 || fleet_fail "uninterrupted run failed: $(fleet_tail full 3)"
for s in 200 400 600; do
	[ -f "$FLEET_DIR/full/$(printf 'ckpt-%012d.gdc' $s)" ] || fleet_fail "no checkpoint at step $s"
done

mkdir -p "$FLEET_DIR/part"
cp "$FLEET_DIR/full/ckpt-000000000400.gdc" "$FLEET_DIR/part/"
fleet_gossipd part --checkpoint-dir "$FLEET_DIR/part" --resume $common
fleet_wait_exit part 60 || fleet_fail "resumed run failed: $(fleet_tail part 3)"
grep -q "resumed from .*ckpt-000000000400.gdc at step 400" "$FLEET_DIR/part.log" ||
	fleet_fail "no resume message: $(cat "$FLEET_DIR/part.log")"
cmp "$FLEET_DIR/full/ckpt-000000000600.gdc" "$FLEET_DIR/part/ckpt-000000000600.gdc" ||
	fleet_fail "resumed run differs from the uninterrupted one"
fleet_ok "resume from step 400 ends bit-identical to the uninterrupted run"

# A flipped byte in the newest checkpoint: refused, exit 1, file untouched.
f="$FLEET_DIR/part/ckpt-000000000600.gdc"
cp "$f" "$FLEET_DIR/orig"
$PYTHON - "$f" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[len(b) // 2] ^= 0x10
open(p, "wb").write(b)
PY
cp "$f" "$FLEET_DIR/flipped"
"$GOSSIPD" --foreground --control "$FLEET_DIR/x.sock" --checkpoint-dir "$FLEET_DIR/part" --resume $common \
	>"$FLEET_DIR/corrupt.log" 2>&1
rc=$?
[ $rc -eq 1 ] || fleet_fail "corrupt checkpoint: exit $rc, wanted 1"
grep -q "refusing" "$FLEET_DIR/corrupt.log" || fleet_fail "no refusal: $(cat "$FLEET_DIR/corrupt.log")"
cmp -s "$f" "$FLEET_DIR/flipped" || fleet_fail "the refused checkpoint was modified"
fleet_ok "flipped byte refused ($(grep -o 'refusing.*' "$FLEET_DIR/corrupt.log" | head -c 120))"

# Another model shape: refused.
"$GOSSIPD" --foreground --control "$FLEET_DIR/y.sock" --checkpoint-dir "$FLEET_DIR/full" --resume \
	--model 784-64-10 $common >"$FLEET_DIR/shape.log" 2>&1
rc=$?
[ $rc -eq 1 ] || fleet_fail "mismatched model: exit $rc, wanted 1"
grep -q "refusing.*model" "$FLEET_DIR/shape.log" || fleet_fail "no refusal: $(cat "$FLEET_DIR/shape.log")"
fleet_ok "checkpoint of another model refused"

# --resume with an empty directory starts fresh.
"$GOSSIPD" --foreground --control "$FLEET_DIR/z.sock" --checkpoint-dir "$FLEET_DIR/empty" --resume \
	--max-steps 20 --eval-samples 200 >"$FLEET_DIR/fresh.log" 2>&1 || fleet_fail "fresh resume failed"
grep -q "starting fresh" "$FLEET_DIR/fresh.log" || fleet_fail "no fresh-start message"
fleet_ok "--resume with no checkpoint starts fresh"
