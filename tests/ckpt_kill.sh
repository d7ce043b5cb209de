#!/bin/bash
# kill -9 while checkpoints are being written: a peer that writes one every
# few steps (a write takes about as long as the steps between two) is
# SIGKILLed 20 times at random moments. Before each restart every
# ckpt-*.gdc in the directory must verify on its own (size, header, BLAKE2b
# checksum, step in the name; checked here in Python, independently of
# src/ckpt.c), the newest step never goes back, and `--resume` must load the
# newest one: "resumed from <it>", never a refusal; the temporary file a
# kill in the middle of a write left is gone, with a log line, once the
# next run has started. Random, but no timing
# can fail it: a kill before any file is written, or between writes, is as
# good a trial as one in the middle of a write.
. "$(dirname "$0")/fleet.sh"
fleet_need_data
KILLS=20
C="$FLEET_DIR/ckpt"
common="--control $FLEET_DIR/p.sock --checkpoint-dir $C --checkpoint-every 5 --checkpoint-keep 3
	--max-steps 1000000 --eval-samples 200 --seed 5"

# verify DIR: prints the newest step, fails on any file that does not check.
verify() {
	$PYTHON - "$1" <<'PY'
import hashlib, os, re, struct, sys
d = sys.argv[1]
best = -1
for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
    m = re.fullmatch(r"ckpt-(\d{12})\.gdc", name)
    if not m:
        continue
    b = open(os.path.join(d, name), "rb").read()
    def bad(why):
        sys.exit(f"{name}: {why} ({len(b)} bytes)")
    if len(b) < 160 or b[:8] != b"GDCKPT\r\n":
        bad("truncated or bad magic")
    dd, step = struct.unpack_from("<QQ", b, 56)
    if len(b) != 128 + 8 * dd + 32:
        bad(f"size does not match d = {dd}")
    if hashlib.blake2b(b[:-32], digest_size=32).digest() != b[-32:]:
        bad("checksum mismatch")
    if step != int(m.group(1)):
        bad(f"header step {step}")
    best = max(best, step)
print(best)
PY
}

rng=$$
rand() { rng=$(((rng * 1103515245 + 12345) % 2147483648)); echo $((rng / 65536 % $1)); }

prev=-1
resumed=0
k=0
while [ $k -lt $KILLS ]; do
	k=$((k + 1))
	newest=$(verify "$C" 2>&1) || fleet_fail "kill $((k - 1)) left a bad checkpoint: $newest"
	[ "$newest" -ge "$prev" ] || fleet_fail "newest checkpoint went back from $prev to $newest"
	prev=$newest
	rm -f "$FLEET_DIR/p.sock"
	# What the last kill cut short, if anything: gone once the next run
	# starts (its own temporary files have other names).
	mapfile -t torn < <(find "$C" -maxdepth 1 -name '.ckpt-*' 2>/dev/null)
	fleet_gossipd "p$k" $common --resume
	if [ "$newest" -ge 0 ]; then
		fleet_wait_log "p$k" "resumed from $C/ckpt-$(printf %012d "$newest").gdc at step $newest" \
			"resume from step $newest" 20
		resumed=$((resumed + 1))
	else
		fleet_wait_log "p$k" "starting fresh" "start fresh" 20
	fi
	fleet_wait_log "p$k" "training .* from step" "start training" 20
	for f in "${torn[@]}"; do
		[ ! -e "$f" ] || fleet_fail "p$k started and left $f, the temporary file of a killed write"
		grep -qF "checkpoint: removed $f " "$FLEET_DIR/p$k.log" || fleet_fail "p$k: no log line for removing $f"
	done
	# 0 to 0.3 s: from before the first write of this run to several writes in.
	sleep "0.$(rand 3)$(rand 10)"
	fleet_kill KILL "p$k"
	fleet_wait_exit "p$k" 10
	! grep -Eiq "refusing|corrupt|checksum" "$FLEET_DIR/p$k.log" || fleet_fail "p$k: $(grep -Ei "refusing|corrupt|checksum" "$FLEET_DIR/p$k.log")"
done
newest=$(verify "$C" 2>&1) || fleet_fail "the last kill left a bad checkpoint: $newest"
[ "$newest" -ge "$prev" ] || fleet_fail "newest checkpoint went back from $prev to $newest"
# Last: a resume that runs to its end through the loader in src/ckpt.c.
fleet_gossipd last $common --resume --max-steps $((newest + 20))
fleet_wait_exit last 30 || fleet_fail "final resume failed: $(fleet_tail last 3)"
grep -q "resumed from .* at step $newest" "$FLEET_DIR/last.log" || fleet_fail "final resume: $(head -3 "$FLEET_DIR/last.log")"
# A save that a kill interrupted left its temporary file; the next start
# removed it.
[ -z "$(find "$C" -name '.ckpt-*')" ] || fleet_fail "temporary files left: $(find "$C" -name '.ckpt-*')"
torn=$(cat "$FLEET_DIR"/p*.log "$FLEET_DIR/last.log" | grep -c "checkpoint: removed " || true)
fleet_ok "$KILLS SIGKILLs ($torn in the middle of a write), $resumed resumes, every checkpoint intact; newest step $newest"
