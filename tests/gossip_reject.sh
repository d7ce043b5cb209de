#!/bin/sh
# A job member sends a real peer a gossip REQ whose density and block no
# mask can hold (issue 18.2: a block longer than its stratum once made the
# responder divide by zero, SIGFPE). Over the real sealed transport, the
# peer must answer REFUSED, count it as gossip.bad_mask, leave its model
# alone and keep running; the same shape through `gossipctl set` is
# refused naming both keys.
. "${top_srcdir:-.}/tests/lib.sh"
NETPEER="$top_builddir/tests/netpeer"
need_data
base=$((25400 + $$ % 50 * 2))
S="$T/v.sock"

"$GOSSIPCTL" keygen "$T/job.key" >/dev/null || fail "keygen"
start v --control "$S" --max-steps 1000000 --eval-every 100000 --seed 3 \
	--listen "127.0.0.1:$base" --key-file "$T/job.key" --job rej
wait_socket "$S"
"$GOSSIPCTL" -s "$S" --json stats >"$T/st.json" || fail "stats"
d=$(json_get model <"$T/st.json" | $PYTHON -c 'import ast,sys; print(ast.literal_eval(sys.stdin.read())["parameters"])')

# REQ: u8 version, u8 mode (saps), u8 values (fp32), u8 0, u32 block,
# u64 nonce, u64 d, u64 count, f64 density, u64 step | count fp32 values.
# density 0.9 makes k = round(0.9 d) in 2 blocks of the given length: a
# block of floor(d/2) + 1 is one longer than the first stratum.
$PYTHON - "$d" "$T/req.bin" <<'PY' || fail "cannot write the request"
import struct, sys
d = int(sys.argv[1]); k = round(0.9 * d); block = d // 2 + 1
hdr = struct.pack('<BBBBIQQQdQ', 1, 0, 0, 0, block, 12345, d, k, 0.9, 0)
open(sys.argv[2], 'wb').write(hdr + struct.pack('<f', 1e3) * k)
PY
"$NETPEER" --listen "127.0.0.1:$((base + 1))" --key "$T/job.key" --job rej --id 99 \
	--peers "127.0.0.1:$base" --raw "80:$T/req.bin" --deadline 30 >"$T/np.log" 2>&1 ||
	fail "the sender failed: $(cat "$T/np.log")"
# REPLY: u8 version, u8 status (2 = REFUSED), ...
grep -q '^answer type 81 len [0-9]*: 01 02' "$T/np.log" ||
	fail "no REFUSED reply: $(cat "$T/np.log")"
kill -0 "$pid_v" 2>/dev/null || fail "the peer died: $(tail -5 "$T/v.log")"
"$GOSSIPCTL" -s "$S" --json stats >"$T/stats.json" || fail "stats after the request"
n=$($PYTHON -c 'import json,sys; print(json.load(sys.stdin)["gossip"]["bad_mask"])' <"$T/stats.json")
[ "$n" = 1 ] || fail "gossip.bad_mask is $n, wanted 1"
"$GOSSIPCTL" -s "$S" metrics >"$T/metrics" && grep -q "^gossipd_gossip_bad_mask 1$" "$T/metrics" ||
	fail "metrics lack gossipd_gossip_bad_mask 1"
ok "a REQ of density 0.9, block $((d / 2 + 1)) over $d values: REFUSED, counted, peer running"

# The same shape from the operator: refused, both keys named, nothing set.
"$GOSSIPCTL" -s "$S" set density 0.9 >/dev/null || fail "set density 0.9"
"$GOSSIPCTL" -s "$S" set mask_block $((d / 2 + 1)) 2>"$T/err" &&
	fail "set mask_block $((d / 2 + 1)) accepted at density 0.9"
grep -q "density" "$T/err" && grep -q "mask_block" "$T/err" ||
	fail "the refusal does not name both keys: $(cat "$T/err")"
"$GOSSIPCTL" -s "$S" --json stats >"$T/stats.json" || fail "stats after the set"
n=$($PYTHON -c 'import json,sys; print(json.load(sys.stdin)["gossip"]["block"])' <"$T/stats.json")
[ "$n" = 64 ] || fail "mask_block is $n after a refused set"
ok "set mask_block refused: $(cat "$T/err")"
"$GOSSIPCTL" -s "$S" leave >/dev/null
wait "$pid_v" || fail "the peer exited $?"

# And at start: exit 2, both keys named.
"$GOSSIPD" --foreground --control "$T/x.sock" --density 0.9 --mask-block $((d / 2 + 1)) \
	>"$T/out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "density 0.9 and mask_block" "$T/out" ||
	fail "start with that shape: exit $rc: $(cat "$T/out")"
ok "a peer started with that shape exits 2"
