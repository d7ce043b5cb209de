#!/bin/bash
# One real peer on the real dataset: bad configuration and data are refused
# with exit 2 and a reason; the control socket serves every command, shrugs
# off garbage, and `leave` ends the peer with exit 0 and a final checkpoint.
. "$(dirname "$0")/fleet.sh"
fleet_need_data

# --- bad usage: exit 2, naming the key ---
expect_usage() {
	want=$1; shift
	"$GOSSIPD" --foreground --control "$FLEET_DIR/x.sock" "$@" >"$FLEET_DIR/out" 2>&1
	rc=$?
	[ $rc -eq 2 ] || fleet_fail "gossipd $* exited $rc, wanted 2: $(cat "$FLEET_DIR/out")"
	grep -q -- "$want" "$FLEET_DIR/out" || fleet_fail "gossipd $*: no '$want' in: $(cat "$FLEET_DIR/out")"
}
expect_usage "batch_size" --batch-size -3
expect_usage "unknown option" --no-such-flag
printf 'epochs = 2\nwarp = 9\n' >"$FLEET_DIR/bad.conf"
expect_usage "unknown key 'warp'" -c "$FLEET_DIR/bad.conf"
expect_usage "data:" --data "$FLEET_DIR/nowhere"
mkdir "$FLEET_DIR/trunc"
cp "$FLEET_DATA"/*.gz "$FLEET_DIR/trunc/"
gzip -dc "$FLEET_DATA/train-images-idx3-ubyte.gz" | head -c 1000000 >"$FLEET_DIR/trunc/train-images-idx3-ubyte"
rm "$FLEET_DIR/trunc/train-images-idx3-ubyte.gz"
expect_usage "truncated" --data "$FLEET_DIR/trunc"
fleet_port port
expect_usage "key_file" --listen "127.0.0.1:$port" --key-file "$FLEET_DIR/missing.key"
fleet_ok "bad flags, keys, data refused with exit 2"

# Job keys: made 0600, never overwritten; verbs without RDMA fails cleanly.
fleet_keygen "$FLEET_DIR/job.key"
[ "$(stat -c '%a %s' "$FLEET_DIR/job.key")" = "600 32" ] || fleet_fail "key file is not 0600, 32 bytes"
"$GOSSIPCTL" keygen "$FLEET_DIR/job.key" 2>/dev/null && fleet_fail "keygen overwrote a key"
fleet_port port
"$GOSSIPD" --foreground --control "$FLEET_DIR/v.sock" --listen "127.0.0.1:$port" \
	--key-file "$FLEET_DIR/job.key" --provider verbs --max-steps 5 >"$FLEET_DIR/verbs.log" 2>&1
rc=$?
[ $rc -eq 1 ] || fleet_fail "verbs without RDMA: exit $rc, wanted 1: $(cat "$FLEET_DIR/verbs.log")"
grep -q "verbs" "$FLEET_DIR/verbs.log" || fleet_fail "verbs failure not explained"
fleet_ok "keygen; --provider verbs without RDMA exits 1: $(grep -o 'verbs;ofi_rxm.*' "$FLEET_DIR/verbs.log")"

# --- a running peer and its control socket ---
S="$FLEET_DIR/ctl/peer.sock"
peer_a() {
	fleet_port port
	fleet_gossipd a --control "$S" --max-steps 1000000 --eval-every 500 --eval-samples 2000 \
		--checkpoint-dir "$FLEET_DIR/ck" --seed 7 --listen "127.0.0.1:$port" \
		--key-file "$FLEET_DIR/job.key"
	fleet_wait_up a
}
fleet_up peer_a
[ "$(stat -c %a "$FLEET_DIR/ctl")" = 700 ] || fleet_fail "socket directory is not 0700"
[ "$(stat -c %a "$S")" = 600 ] || fleet_fail "socket is not 0600"

"$GOSSIPCTL" -s "$S" status >"$FLEET_DIR/status" || fleet_fail "status failed"
grep -q '^state  *training' "$FLEET_DIR/status" || fleet_fail "status table: $(cat "$FLEET_DIR/status")"
"$GOSSIPCTL" -s "$S" --json status >"$FLEET_DIR/status.json" || fleet_fail "status --json failed"
for f in id job state step epoch loss accuracy members bytes_sent bytes_received exchanges; do
	[ "$(fleet_json "has(\"$f\")" <"$FLEET_DIR/status.json")" = true ] ||
		fleet_fail "status lacks $f"
done
"$GOSSIPCTL" -s "$S" --json stats >"$FLEET_DIR/stats.json" || fleet_fail "stats"
[ "$(fleet_json 'has("train")' <"$FLEET_DIR/stats.json")" = true ] || fleet_fail "stats lack train"
fleet_json .transport <"$FLEET_DIR/stats.json" | grep -q rejected || fleet_fail "stats lack transport counters"
"$GOSSIPCTL" -s "$S" set log_level debug >/dev/null || fleet_fail "set log_level"
"$GOSSIPCTL" -s "$S" set batch_size 3 2>"$FLEET_DIR/err" && fleet_fail "set batch_size accepted"
grep -q "cannot change" "$FLEET_DIR/err" || fleet_fail "set batch_size: $(cat "$FLEET_DIR/err")"
"$GOSSIPCTL" -s "$S" --json checkpoint >"$FLEET_DIR/ck.json" || fleet_fail "checkpoint failed"
ck=$(fleet_json .path <"$FLEET_DIR/ck.json")
[ -f "$ck" ] || fleet_fail "checkpoint $ck missing"
[ "$("$GOSSIPCTL" -s "$S" --json version | fleet_json .version)" = "$("$GOSSIPD" --version |
	cut -d' ' -f2)" ] || fleet_fail "version does not name gossipd's"
fleet_ok "status, stats, set, checkpoint, version"

# The trainer thread yields to the event loop (trainer_nice, default 5);
# the main (loop) thread keeps the process's priority.
pid_a=$(fleet_pid a)
nices=$(for t in /proc/"$pid_a"/task/*; do cut -d' ' -f19 "$t/stat"; done | sort | uniq -c | tr -s ' ')
main_nice=$(cut -d' ' -f19 "/proc/$pid_a/task/$pid_a/stat")
[ "$main_nice" = 0 ] || fleet_fail "loop thread nice is $main_nice, want 0"
echo "$nices" | grep -q " 1 5$" || fleet_fail "no trainer thread at nice 5: $nices"
fleet_ok "trainer thread at nice 5, loop thread at 0"

# Watch streams at least two progress lines.
timeout 5 "$GOSSIPCTL" -s "$S" --json watch >"$FLEET_DIR/watch" 2>&1
n=$(grep -c '"step"' "$FLEET_DIR/watch")
[ "$n" -ge 2 ] || fleet_fail "watch gave $n lines: $(head -c 500 "$FLEET_DIR/watch")"
fleet_ok "watch streams progress ($n lines in 5 s)"

# Garbage: bad JSON, no cmd, unknown command, a training process's requests
# to the built-in trainer, a 1 MiB line, 100 clients.
$PYTHON - "$S" <<'PY' || fleet_fail "control socket abuse"
import json, socket, sys
path = sys.argv[1]
def conn():
    s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(path); return s
def ask(s, line):
    try:
        s.sendall(line)
    except (BrokenPipeError, ConnectionResetError):
        pass            # the server may refuse before reading it all
    buf = b""
    while not buf.endswith(b"\n"):
        d = s.recv(65536)
        if not d: break
        buf += d
    return json.loads(buf)
s = conn()
for bad in (b"{nope\n", b"[1,2]\n", b'{"x":1}\n', b'{"cmd":"frobnicate"}\n', b'\xff\xfe\n'):
    r = ask(s, bad)
    assert r["ok"] is False and r["error"], (bad, r)
assert ask(s, b'{"cmd":"status"}\n')["ok"] is True   # same connection still served
for cmd in ("attach", "step", "evaluate", "train", "detach"):   # the built-in trainer's peer
    r = ask(s, json.dumps({"cmd": cmd}).encode() + b"\n")
    assert r["ok"] is False and "--trainer external" in r["error"], (cmd, r)
r = ask(s, b'{"cmd":"set","key":"log_level","value":7}\n')   # arguments are strings
assert r["ok"] is False and '"value"' in r["error"], r
big = conn()
r = ask(big, b"{" + b" " * (1 << 20) + b"}\n")
assert r["ok"] is False and "longer" in r["error"], r
many = [conn() for _ in range(100)]
for c in many: c.sendall(b'{"cmd":"status"}\n')
for c in many:
    buf = b""
    while not buf.endswith(b"\n"): buf += c.recv(65536)
    assert json.loads(buf)["ok"] is True
half = conn(); half.sendall(b'{"cmd":"sta')   # left hanging
print("control socket survived garbage")
PY
"$GOSSIPCTL" -s "$S" status >/dev/null || fleet_fail "daemon unresponsive after garbage"
fleet_ok "garbage on the control socket gets error replies, daemon unaffected"

# A second daemon must not steal a live socket.
"$GOSSIPD" --foreground --control "$S" --max-steps 10 >"$FLEET_DIR/dup.log" 2>&1
[ $? -eq 1 ] || fleet_fail "second daemon on a live socket did not exit 1"
grep -q "in use" "$FLEET_DIR/dup.log" || fleet_fail "no 'in use' reason: $(cat "$FLEET_DIR/dup.log")"

# Leave: exit 0 with a final checkpoint.
"$GOSSIPCTL" -s "$S" leave >/dev/null || fleet_fail "leave failed"
fleet_wait_exit a 30
rc=$?
[ $rc -eq 0 ] || fleet_fail "peer exited $rc after leave: $(tail -5 "$FLEET_DIR/a.log")"
last=$(cd "$FLEET_DIR/ck" && ls ckpt-*.gdc | sort | tail -1)
step=$(grep -o 'done: [0-9]*' "$FLEET_DIR/a.log" | grep -o '[0-9]*')
[ "$last" = "$(printf 'ckpt-%012d.gdc' "$step")" ] || fleet_fail "final checkpoint $last is not at step $step"
[ ! -e "$S" ] || fleet_fail "socket left behind"
fleet_ok "leave: exit 0, final checkpoint at step $step"

# A stale socket file (peer killed) is replaced.
fleet_gossipd b --control "$S" --max-steps 100000 --eval-samples 1000
fleet_wait_socket "$S"
fleet_kill KILL b
fleet_wait_exit b 10
fleet_gossipd c --control "$S" --max-steps 50 --eval-samples 1000
fleet_wait_exit c 30 || fleet_fail "peer on a stale socket failed: $(cat "$FLEET_DIR/c.log")"
fleet_ok "stale socket replaced"

# SIGTERM also leaves cleanly, even the moment the control socket
# appears, while the peer is still opening its network endpoint.
fleet_port port
fleet_gossipd d --control "$FLEET_DIR/ctl/d.sock" --max-steps 100000 --eval-samples 1000 \
	--listen "127.0.0.1:$port" --key-file "$FLEET_DIR/job.key"
while [ ! -S "$FLEET_DIR/ctl/d.sock" ]; do
	fleet_alive "$(fleet_pid d)" || fleet_fail "peer d died: $(cat "$FLEET_DIR/d.log")"
	sleep 0.005
done
fleet_kill TERM d
fleet_wait_exit d 30 || fleet_fail "SIGTERM: non-zero exit: $(tail -3 "$FLEET_DIR/d.log")"
[ ! -e "$FLEET_DIR/ctl/d.sock" ] || fleet_fail "SIGTERM: socket left behind"
fleet_ok "SIGTERM leaves with exit 0, also right as the control socket appears"

# Before that, while the data loads, SIGTERM has its default action. A
# library's handler must not catch it: libinfinipath's (via libfabric)
# let the peer train on. Caught signals are in /proc/PID/status, SigCgt.
fleet_port port
fleet_gossipd e --control "$FLEET_DIR/ctl/e.sock" --max-steps 100000 --eval-samples 1000 \
	--listen "127.0.0.1:$port" --key-file "$FLEET_DIR/job.key"
pid_e=$(fleet_pid e)
# Clear twice 20 ms apart in gossipd itself: not the shell before exec,
# nor the instant before the libraries' constructors run.
term_free() {
	[ "$(readlink -f "/proc/$pid_e/exe")" = "$(readlink -f "$GOSSIPD")" ] &&
	    [ $((0x$(awk '/^SigCgt:/ { print $2 }' "/proc/$pid_e/status") & 0x4000)) -eq 0 ]
}
n=0
until term_free && sleep 0.02 && term_free; do
	[ -S "$FLEET_DIR/ctl/e.sock" ] && fleet_fail "SIGTERM was caught all through start-up"
	n=$((n + 1))
	[ $n -gt 1000 ] && fleet_fail "peer e did not start: $(cat "$FLEET_DIR/e.log")"
	sleep 0.005
done
fleet_kill TERM e
rc=0
fleet_wait_exit e 10 || rc=$?
[ $rc -eq 143 ] || fleet_fail "SIGTERM while loading: exit $rc, want 143"
fleet_ok "SIGTERM while the data loads ends the peer at once"

# A crash is a crash: SIGABRT (which sanitizers leave alone) kills the peer
# with its default action, not an exit(1) from a library's handler.
peer_f() {
	fleet_port port
	fleet_gossipd f --control "$FLEET_DIR/ctl/f.sock" --max-steps 100000 --eval-samples 1000 \
		--listen "127.0.0.1:$port" --key-file "$FLEET_DIR/job.key"
	fleet_wait_up f
}
fleet_up peer_f
fleet_kill ABRT f
rc=0
fleet_wait_exit f 10 || rc=$?
[ $rc -eq 134 ] || fleet_fail "SIGABRT: exit $rc, want 134 (killed by SIGABRT)"
fleet_ok "SIGABRT is not turned into exit 1"

# --max-step-rate caps the trainer: at most rate x time + 1 steps in any
# window (2 more for the status answers' own delays), and some steps.
# Uncapped, a lone peer takes hundreds a second.
peer_g() {
	fleet_port port
	fleet_gossipd g --control "$FLEET_DIR/ctl/g.sock" --max-steps 100000 --eval-samples 1000 \
		--max-step-rate 10 --listen "127.0.0.1:$port" --key-file "$FLEET_DIR/job.key"
	fleet_wait_up g
}
fleet_up peer_g
step_at() { "$GOSSIPCTL" -s "$FLEET_DIR/ctl/g.sock" --json status | fleet_json .step; }
s1=$(step_at) t1=$(fleet_now)
sleep 3
s2=$(step_at) t2=$(fleet_now)
awk -v n=$((s2 - s1)) -v us=$((t2 - t1)) 'BEGIN { exit !(n >= 1 && n <= 10 * us / 1e6 + 3) }' ||
	fleet_fail "--max-step-rate 10: $((s2 - s1)) steps in $(((t2 - t1) / 1000)) ms"
fleet_ok "--max-step-rate 10: $((s2 - s1)) steps in $(((t2 - t1) / 1000)) ms"
