#!/bin/bash
# Control clients cannot lose replies or lock the operator out.
# (a) A client that writes 200 requests and shuts its writing side gets all
#     200 replies (the server once closed on EOF and cancelled the queued
#     writes: 26 of 200 came back); a deferred reply (checkpoint) too.
# (b) 300 connections that send half a request and wait: a fresh
#     `gossipctl status` is still answered within 2 s (it was refused).
# (c) The daemon closes those held-open connections after its idle
#     deadline (5 s), while a (half-closed) watching client stays.
# One standalone peer (no network), so no TCP port is used.
. "$(dirname "$0")/fleet.sh"
fleet_need_data
S="$FLEET_DIR/ctl/peer.sock"
fleet_gossipd a --control "$S" --epochs 100 --eval-every 0 --eval-samples 1000 \
	--checkpoint-dir "$FLEET_DIR/ck"
fleet_wait_socket "$S"
# The first answer may take a moment on a loaded machine.
n=0
until "$GOSSIPCTL" -s "$S" status >/dev/null 2>"$FLEET_DIR/err"; do
	n=$((n + 1)); [ $n -gt 100 ] && fleet_fail "no status before the test: $(cat "$FLEET_DIR/err")"
	sleep 0.1
done

$PYTHON - "$S" "$GOSSIPCTL" <<'PY' || fleet_fail "control clients"
import json, select, socket, subprocess, sys, time
path, gossipctl = sys.argv[1], sys.argv[2]
IDLE = 5.0

def drain(s):
    buf = b""
    while True:
        d = s.recv(1 << 16)
        if not d:
            return [json.loads(l) for l in buf.split(b"\n") if l]
        buf += d

def conn():
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)     # blocking: waits while the listen backlog is full
    s.settimeout(30)
    return s

# (a) 200 requests, then EOF: every reply comes back before the close.
s = conn()
s.sendall(b'{"cmd":"metrics"}\n' * 200)
s.shutdown(socket.SHUT_WR)
replies = drain(s)
s.close()
n_ok = sum(1 for r in replies if r.get("ok") is True)
if n_ok != 200:
    sys.exit("FAIL (a): %d of 200 replies after a half-close" % n_ok)
print("ok (a): 200 of 200 replies after a half-close")
s = conn()
s.sendall(b'{"cmd":"checkpoint"}\n{"cmd":"status"}\n')
s.shutdown(socket.SHUT_WR)
replies = drain(s)
s.close()
if len(replies) != 2 or not all(r.get("ok") is True for r in replies):
    sys.exit("FAIL (a): checkpoint and status, then EOF: %r" % replies)
ck = [r for r in replies if "path" in r]
if len(ck) != 1:
    sys.exit("FAIL (a): no checkpoint reply after a half-close: %r" % replies)
print("ok (a): deferred checkpoint reply after a half-close: %s" % ck[0]["path"])

# A watcher, subscribed before the burst and half-closed as
# `printf '{"cmd":"watch"}\n' | socat` does: it must outlive the deadline.
w = conn()
w.sendall(b'{"cmd":"watch"}\n')
w.shutdown(socket.SHUT_WR)
# Its watch must be through before the burst: a connection the daemon has
# not read yet is just the longest idle when a full table evicts one.
first = b""
while not first.endswith(b"\n"):
    d = w.recv(1 << 16)
    if not d:
        sys.exit("FAIL (c): no reply to watch")
    first += d
if json.loads(first.split(b"\n")[0]).get("watching") is not True:
    sys.exit("FAIL (c): watch was not acknowledged: %r" % first)
w.setblocking(False)
wlines = 0

# (b) 300 held-open, half-written connections, then the operator's status.
held, born = [], {}
for _ in range(300):
    c = conn()
    c.sendall(b'{"cmd":"sta')
    held.append(c)
    born[c] = time.monotonic()
t0 = time.monotonic()
p = subprocess.run([gossipctl, "-s", path, "--json", "status"], capture_output=True,
                   timeout=30)
took = time.monotonic() - t0
if p.returncode != 0:
    sys.exit("FAIL (b): status with 300 held-open clients: exit %d: %s"
             % (p.returncode, p.stderr.decode().strip()))
if json.loads(p.stdout).get("state") is None:
    sys.exit("FAIL (b): status reply without a state: %r" % p.stdout)
if took > 2.0:
    sys.exit("FAIL (b): status took %.2f s with 300 held-open clients" % took)
print("ok (b): status answered in %.3f s with 300 held-open clients" % took)

# (c) Every held connection is closed by the daemon: the evicted ones at
# once, the others at their deadline (not before it, give or take 1 s).
open_ = set(held)
late = 0
end = time.monotonic() + IDLE + 15
while open_ and time.monotonic() < end:
    r, _, _ = select.select(list(open_), [], [], 0.5)
    for c in r:
        try:
            d = c.recv(4096)
        except ConnectionResetError:
            d = b""
        if d:
            continue        # an error reply before the close is fine
        age = time.monotonic() - born[c]
        if age >= IDLE - 1:
            late += 1
        open_.discard(c)
        c.close()
    # keep the watcher's queue drained; it must still be open
    try:
        while True:
            d = w.recv(1 << 16)
            if d == b"":
                sys.exit("FAIL (c): the daemon closed a watching client")
            wlines += d.count(b"\n")
    except BlockingIOError:
        pass
if open_:
    sys.exit("FAIL (c): %d of 300 held-open clients still open %.0f s later"
             % (len(open_), IDLE + 15))
if wlines < 2:
    sys.exit("FAIL (c): the watcher got %d lines" % wlines)
w.close()
if late < 200:
    sys.exit("FAIL (c): only %d clients lived to the deadline" % late)
print("ok (c): 300 held-open clients closed (%d at the %.0f s deadline), "
      "half-closed watcher still streaming (%d lines)" % (late, IDLE, wlines))
PY
"$GOSSIPCTL" -s "$S" status >/dev/null || fleet_fail "daemon unresponsive after the test"
"$GOSSIPCTL" -s "$S" leave >/dev/null || fleet_fail "leave"
fleet_wait_exit a 30 || fleet_fail "peer exited non-zero: $(fleet_tail a)"
fleet_ok "replies survive a half-close; held-open clients time out; status gets through"
