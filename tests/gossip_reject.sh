#!/bin/bash
# A job member sends a real peer a gossip REQ whose density and block no
# mask can hold (issue 18.2: a block longer than its stratum once made the
# responder divide by zero, SIGFPE). Over the real sealed transport, the
# peer must answer REFUSED, count it as gossip.bad_mask, leave its model
# alone and keep running; the same shape through `gossipctl set` is
# refused naming both keys.
. "$(dirname "$0")/fleet.sh"
fleet_need_data

fleet_keygen "$FLEET_DIR/job.key"
peer() {
	fleet_port vport
	fleet_gossipd v --max-steps 1000000 --eval-every 100000 --seed 3 \
		--listen "127.0.0.1:$vport" --key-file "$FLEET_DIR/job.key" --job rej
	fleet_wait_up v
}
fleet_up peer
fleet_ctl v --json stats >"$FLEET_DIR/st.json" || fleet_fail "stats"
d=$(fleet_json .model.parameters <"$FLEET_DIR/st.json")

# REQ: u8 version, u8 mode (saps), u8 values (fp32), u8 0, u32 block,
# u64 nonce, u64 d, u64 count, f64 density, u64 step | count fp32 values.
# density 0.9 makes k = round(0.9 d) in 2 blocks of the given length: a
# block of floor(d/2) + 1 is one longer than the first stratum.
$PYTHON - "$d" "$FLEET_DIR/req.bin" <<'PY' || fleet_fail "cannot write the request"
import struct, sys
d = int(sys.argv[1]); k = round(0.9 * d); block = d // 2 + 1
hdr = struct.pack('<BBBBIQQQdQ', 1, 0, 0, 0, block, 12345, d, k, 0.9, 0)
open(sys.argv[2], 'wb').write(hdr + struct.pack('<f', 1e3) * k)
PY
fleet_port port
"$NETPEER" --listen "127.0.0.1:$port" --key "$FLEET_DIR/job.key" --job rej --id 99 \
	--peers "127.0.0.1:$vport" --raw "80:$FLEET_DIR/req.bin" --deadline 30 >"$FLEET_DIR/np.log" 2>&1 ||
	fleet_fail "the sender failed: $(cat "$FLEET_DIR/np.log")"
# REPLY: u8 version, u8 status (2 = REFUSED), ...
grep -q '^answer type 81 len [0-9]*: 01 02' "$FLEET_DIR/np.log" ||
	fleet_fail "no REFUSED reply: $(cat "$FLEET_DIR/np.log")"
fleet_alive "$(fleet_pid v)" || fleet_fail "the peer died: $(fleet_tail v)"
fleet_ctl v --json stats >"$FLEET_DIR/stats.json" || fleet_fail "stats after the request"
n=$(fleet_json .gossip.bad_mask <"$FLEET_DIR/stats.json")
[ "$n" = 1 ] || fleet_fail "gossip.bad_mask is $n, wanted 1"
fleet_ctl v metrics >"$FLEET_DIR/metrics" && grep -q "^gossipd_gossip_bad_mask_total 1$" "$FLEET_DIR/metrics" ||
	fleet_fail "metrics lack gossipd_gossip_bad_mask_total 1"
fleet_ok "a REQ of density 0.9, block $((d / 2 + 1)) over $d values: REFUSED, counted, peer running"

# The same shape from the operator: refused, both keys named, nothing set.
fleet_ctl v set density 0.9 >/dev/null || fleet_fail "set density 0.9"
fleet_ctl v set mask_block $((d / 2 + 1)) 2>"$FLEET_DIR/err" &&
	fleet_fail "set mask_block $((d / 2 + 1)) accepted at density 0.9"
grep -q "density" "$FLEET_DIR/err" && grep -q "mask_block" "$FLEET_DIR/err" ||
	fleet_fail "the refusal does not name both keys: $(cat "$FLEET_DIR/err")"
fleet_ctl v --json stats >"$FLEET_DIR/stats.json" || fleet_fail "stats after the set"
n=$(fleet_json .gossip.block <"$FLEET_DIR/stats.json")
[ "$n" = 64 ] || fleet_fail "mask_block is $n after a refused set"
fleet_ok "set mask_block refused: $(cat "$FLEET_DIR/err")"
fleet_ctl v leave >/dev/null
fleet_wait_exit v 30 || fleet_fail "the peer exited $?"

# And at start: exit 2, both keys named.
"$GOSSIPD" --foreground --control "$FLEET_DIR/x.sock" --density 0.9 --mask-block $((d / 2 + 1)) \
	>"$FLEET_DIR/out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "density 0.9 and mask_block" "$FLEET_DIR/out" ||
	fleet_fail "start with that shape: exit $rc: $(cat "$FLEET_DIR/out")"
fleet_ok "a peer started with that shape exits 2"
