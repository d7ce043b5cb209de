#!/bin/bash
# Two and three real endpoints exchange messages from 0 B to 64 MiB, every
# byte checked (echoed back and compared), and more big messages at once
# than a receiver holds (the sender's window); key files are made with the
# real keygen; the verbs provider fails cleanly where there is no RDMA device.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "${top_srcdir:-.}/tests/transport_lib.sh"
command -v jq >/dev/null || { echo "SKIP: jq not installed"; exit 77; }

# Key files: mode 0600, never overwritten, refused when too open or sized wrong.
mkkey "$WORK/key"
[ "$(stat -c %a "$WORK/key")" = 600 ] || die "key file mode is not 600"
[ "$(stat -c %s "$WORK/key")" = 32 ] || die "key file is not 32 bytes"
"$NETPEER" keygen "$WORK/key" 2>"$WORK/keygen.err" && die "keygen overwrote a key"
grep -q "already exists" "$WORK/keygen.err" || die "keygen: no clear reason"
cp "$WORK/key" "$WORK/openkey"
chmod 644 "$WORK/openkey"
"$NETPEER" --listen 127.0.0.1:1 --key "$WORK/openkey" --id 1 2>"$WORK/open.err" &&
    die "a key readable by others was accepted"
grep -q "mode 0644" "$WORK/open.err" || die "no clear message for an open key file"

# verbs without an RDMA device: a clear error at open, no crash.
port=$(free_port)
"$NETPEER" --listen "127.0.0.1:$port" --key "$WORK/key" --id 1 \
    --provider verbs >"$WORK/verbs.log" 2>&1
rc=$?
[ $rc -eq 1 ] || die "--provider verbs exited with $rc, want 1"
grep -q "verbs" "$WORK/verbs.log" || die "--provider verbs: no clear message"

common="--key $WORK/key --job exchange --timeout 10000 --deadline 90"

# Two endpoints: A sends every size to B, which echoes.
start_any B $common --id 2 --expect-done 1
"$NETPEER" --listen "127.0.0.1:$(free_port)" $common --id 1 \
    --peers "127.0.0.1:$PORT_B" >"$WORK/A.log" 2>&1 || die "two endpoints: sender failed"
wait_pid "$PID_B" 30 || die "two endpoints: receiver failed"
[ "$(stat_of B .bad_content)" = 0 ] || die "receiver saw bad content"
[ "$(stat_of B .rejected.total)" = 0 ] || die "receiver rejected good traffic"
[ "$(stat_of A .messages_received)" -ge 14 ] || die "echoes missing"
echo "two endpoints: ok"

# Twelve 1 MiB messages at once where a peer holds at most 2 x 1.05 MB of
# bodies from another: the sender's window must queue them, none may be
# refused, and all come back.
start_any W $common --max-size 1100000 --id 4 --expect-done 1
sizes=1048576; for i in $(seq 11); do sizes="$sizes,1048576"; done
"$NETPEER" --listen "127.0.0.1:$(free_port)" $common --id 3 --max-size 1100000 \
    --peers "127.0.0.1:$PORT_W" --sizes "$sizes" >"$WORK/window.log" 2>&1 ||
    die "window: sender failed"
wait_pid "$PID_W" 30 || die "window: receiver failed"
[ "$(stat_of W .rejected.total)" = 0 ] || die "window: the receiver refused messages"
[ "$(stat_of window .messages_received)" -ge 12 ] || die "window: echoes missing"
echo "window: ok"

# Three endpoints, each sending every size to the two others at once.
for try in 1 2 3; do
	p1=$(free_port); p2=$(free_port); p3=$(free_port)
	[ "$p1" != "$p2" ] && [ "$p2" != "$p3" ] && [ "$p1" != "$p3" ] || continue
	ok=1
	start_peer M1 "$p1" $common --id 11 --expect-done 2 \
	    --peers "127.0.0.1:$p2,127.0.0.1:$p3" || ok=0
	start_peer M2 "$p2" $common --id 12 --expect-done 2 \
	    --peers "127.0.0.1:$p1,127.0.0.1:$p3" || ok=0
	start_peer M3 "$p3" $common --id 13 --expect-done 2 \
	    --peers "127.0.0.1:$p1,127.0.0.1:$p2" || ok=0
	[ $ok -eq 1 ] && break
	for p in $PIDS; do kill -9 "$p" 2>/dev/null; done
	PIDS=""
done
[ $ok -eq 1 ] || die "three endpoints did not start"
for n in M1 M2 M3; do
	eval "pid=\$PID_$n"
	wait_pid "$pid" 60 || die "three endpoints: $n failed"
	[ "$(stat_of $n .bad_content)" = 0 ] || die "$n saw bad content"
	[ "$(stat_of $n .rejected.total)" = 0 ] || die "$n rejected good traffic"
done
echo "three endpoints: ok"
exit 0
