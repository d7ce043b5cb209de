#!/bin/bash
# Two and three real endpoints exchange messages from 0 B to 64 MiB, every
# byte checked (echoed back and compared), and more big messages at once
# than a receiver holds (the sender's window); key files are made with the
# real keygen; the verbs provider fails cleanly where there is no RDMA device.
FLEET_DUMP_LOGS=40
. "$(dirname "$0")/fleet.sh"

# Key files: mode 0600, never overwritten, refused when too open or sized wrong.
"$NETPEER" keygen "$FLEET_DIR/key" || fleet_fail "keygen"
[ "$(stat -c %a "$FLEET_DIR/key")" = 600 ] || fleet_fail "key file mode is not 600"
[ "$(stat -c %s "$FLEET_DIR/key")" = 32 ] || fleet_fail "key file is not 32 bytes"
"$NETPEER" keygen "$FLEET_DIR/key" 2>"$FLEET_DIR/keygen.err" && fleet_fail "keygen overwrote a key"
grep -q "already exists" "$FLEET_DIR/keygen.err" || fleet_fail "keygen: no clear reason"
cp "$FLEET_DIR/key" "$FLEET_DIR/openkey"
chmod 644 "$FLEET_DIR/openkey"
"$NETPEER" --listen 127.0.0.1:1 --key "$FLEET_DIR/openkey" --id 1 2>"$FLEET_DIR/open.err" &&
    fleet_fail "a key readable by others was accepted"
grep -q "mode 0644" "$FLEET_DIR/open.err" || fleet_fail "no clear message for an open key file"

# verbs without an RDMA device: a clear error at open, no crash.
fleet_port port
"$NETPEER" --listen "127.0.0.1:$port" --key "$FLEET_DIR/key" --id 1 \
    --provider verbs >"$FLEET_DIR/verbs.log" 2>&1
rc=$?
[ $rc -eq 1 ] || fleet_fail "--provider verbs exited with $rc, want 1"
grep -q "verbs" "$FLEET_DIR/verbs.log" || fleet_fail "--provider verbs: no clear message"

common="--key $FLEET_DIR/key --job exchange --timeout 10000 --deadline 90"

# Two endpoints: A sends every size to B, which echoes.
fleet_netpeer B $common --id 2 --expect-done 1
fleet_port port
"$NETPEER" --listen "127.0.0.1:$port" $common --id 1 \
    --peers "127.0.0.1:${FLEET_PORT[B]}" >"$FLEET_DIR/A.log" 2>&1 || fleet_fail "two endpoints: sender failed"
fleet_wait_exit B 30 || fleet_fail "two endpoints: receiver failed"
[ "$(fleet_netpeer_stat B .bad_content)" = 0 ] || fleet_fail "receiver saw bad content"
[ "$(fleet_netpeer_stat B .rejected.total)" = 0 ] || fleet_fail "receiver rejected good traffic"
[ "$(fleet_netpeer_stat A .messages_received)" -ge 14 ] || fleet_fail "echoes missing"
echo "two endpoints: ok"

# Twelve 1 MiB messages at once where a peer holds at most 2 x 1.05 MB of
# bodies from another: the sender's window must queue them, none may be
# refused, and all come back.
fleet_netpeer W $common --max-size 1100000 --id 4 --expect-done 1
sizes=1048576; for i in $(seq 11); do sizes="$sizes,1048576"; done
fleet_port port
"$NETPEER" --listen "127.0.0.1:$port" $common --id 3 --max-size 1100000 \
    --peers "127.0.0.1:${FLEET_PORT[W]}" --sizes "$sizes" >"$FLEET_DIR/window.log" 2>&1 ||
    fleet_fail "window: sender failed"
fleet_wait_exit W 30 || fleet_fail "window: receiver failed"
[ "$(fleet_netpeer_stat W .rejected.total)" = 0 ] || fleet_fail "window: the receiver refused messages"
[ "$(fleet_netpeer_stat window .messages_received)" -ge 12 ] || fleet_fail "window: echoes missing"
echo "window: ok"

# Three endpoints, each sending every size to the two others at once.
# They start sending when the go file appears, once all three are up: what
# runs at once is the traffic, not the start-up (under TSan one start takes
# seconds, and the first's handshakes with the last would time out).
three() {
	local p1 p2 p3
	fleet_port p1
	fleet_port p2
	fleet_port p3
	fleet_start M1 "$NETPEER" --listen "127.0.0.1:$p1" $common --id 11 --expect-done 2 \
	    --peers "127.0.0.1:$p2,127.0.0.1:$p3" --go "$FLEET_DIR/go"
	fleet_wait_up M1 10 '^ready' || return
	fleet_start M2 "$NETPEER" --listen "127.0.0.1:$p2" $common --id 12 --expect-done 2 \
	    --peers "127.0.0.1:$p1,127.0.0.1:$p3" --go "$FLEET_DIR/go"
	fleet_wait_up M2 10 '^ready' || return
	fleet_start M3 "$NETPEER" --listen "127.0.0.1:$p3" $common --id 13 --expect-done 2 \
	    --peers "127.0.0.1:$p1,127.0.0.1:$p2" --go "$FLEET_DIR/go"
	fleet_wait_up M3 10 '^ready'
}
fleet_up three
: >"$FLEET_DIR/go"
for n in M1 M2 M3; do
	fleet_wait_exit $n 60 || fleet_fail "three endpoints: $n failed"
	[ "$(fleet_netpeer_stat $n .bad_content)" = 0 ] || fleet_fail "$n saw bad content"
	[ "$(fleet_netpeer_stat $n .rejected.total)" = 0 ] || fleet_fail "$n rejected good traffic"
done
echo "three endpoints: ok"
exit 0
