#!/bin/bash
# What an attached process does wrong must not lock or blind its peer
# (gossipd-attach(7)), over the raw protocol, one peer with --trainer
# external and no network:
# (a) a name longer than the daemon keeps, in multi-byte characters: status
#     still shows the attach (it was cut inside a character and dropped);
#     before it, digests that are not 64 hex digits are refused, naming
#     the field, and the next attach is served;
# (b) absurd or non-finite report numbers, an optimizer neither sgd nor
#     adaptive, and "whole" ranges that are not sorted, apart, non-empty
#     pairs within the vector, are refused, naming the field, and status
#     still answers
#     (two reports of 1e308 samples made the rate +inf: status said
#     "internal error" until a later report);
# (c) a checkpoint asked from another connection while the process holds the
#     model fails after the boundary wait, naming why (it was never answered);
# (d) the process asks for a checkpoint on its own connection and shuts its
#     writing side: its checkpoint is written from the vector and answered,
#     the connection ends, and the next process attaches (the peer refused
#     every attach until restart);
# (e) the same, when the process closes its connection at once.
. "$(dirname "$0")/fleet.sh"
"$GOSSIPD" --help | grep -q -- '--trainer builtin|external' ||
	fleet_skip "this gossipd has no --trainer external"
fleet_keygen "$FLEET_DIR/key"
fleet_job c --trainer external --checkpoint-dir "$FLEET_DIR/ck"

timeout 120 "$PYTHON" - "$FLEET_DIR/c.sock" <<'PY' || fleet_fail "attach faults"
import json, math, os, socket, sys, time
path = sys.argv[1]
WAIT = 10          # ATTACH_BOUNDARY_WAIT_MS
N = 1000

class Conn:
    def __init__(self):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.s.settimeout(WAIT + 20)
        self.buf = b""

    def send(self, obj):
        self.s.sendall(json.dumps(obj).encode() + b"\n")

    def line(self):
        while b"\n" not in self.buf:
            data, fds, _, _ = socket.recv_fds(self.s, 65536, 1)
            for fd in fds:
                os.close(fd)
            if not data:
                return None
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def req(self, obj):
        self.send(obj)
        return self.line()

    def attach(self, name):
        r = self.req({"cmd": "attach", "version": 1, "params": N, "dtype": "float32",
                      "name": name})
        if not r.get("ok"):
            sys.exit("FAIL: attach refused: %r" % r)
        return r

def status():
    c = Conn()
    r = c.req({"cmd": "status"})
    c.s.close()
    if not r.get("ok"):
        sys.exit("FAIL: status answered %r" % r)
    for k in ("loss", "accuracy", "test_loss", "samples_per_s"):
        if r.get(k) is not None and not math.isfinite(r[k]):
            sys.exit("FAIL: status's %s is %r" % (k, r[k]))
    return r

# (a)
t1 = Conn()
for digest in ("ab" * 31, "zz" * 32, 7, "ab" * 33):
    r = t1.req({"cmd": "attach", "version": 1, "params": N, "dtype": "float32",
                "digest": digest})
    if r.get("ok") or "digest" not in r.get("error", ""):
        sys.exit("FAIL (a): attach with digest %r answered %r" % (digest, r))
print("ok (a): refused: %s" % r["error"])
t1.attach("t1-x" + "\u20ac" * 30)
st = status()
if "attach" not in st or st["attach"].get("state") != "attached":
    sys.exit("FAIL (a): status shows no attach after a long multi-byte name: %r" % st)
print("ok (a): a 94-byte name: status shows %r" % st["attach"]["name"])

# (b)
r = t1.req({"cmd": "step", "step": 1, "samples": 64, "loss": 2.3, "optimizer": "adaptive"})
if not r.get("ok"):
    sys.exit("FAIL (b): a plain step refused: %r" % r)
bad = [("samples", 1e308), ("samples", -1), ("epoch", 1.5), ("epoch", 2 ** 40),
       ("loss", "x"), ("optimizer", "adam"), ("optimizer", 1), ("whole", 7),
       ("whole", [[5, 0]]), ("whole", [[4, 2], [3, 1]]), ("whole", [[0, N + 1]]),
       ("whole", [[-1, 2]]), ("whole", [["0", 2]])]
for i, (field, value) in enumerate(bad):
    r = t1.req({"cmd": "step", "step": 2 + i, field: value})
    if r.get("ok") or field not in r.get("error", ""):
        sys.exit("FAIL (b): step with %s %r answered %r" % (field, value, r))
    if i == 0:
        time.sleep(1.1)          # a rate window ends between two reports
print("ok (b): refused: %s" % r["error"])
for i in range(3):
    r = t1.req({"cmd": "step", "step": 2 + i, "samples": 1e9, "loss": 1e308})
    if not r.get("ok"):
        sys.exit("FAIL (b): step with samples 1e9, loss 1e308 refused: %r" % r)
    time.sleep(0.6)
st = status()
print("ok (b): status answers: loss %r, samples_per_s %r" % (st["loss"], st["samples_per_s"]))

# (c) t1 holds the model (it was answered and sends no step).
other = Conn()
t0 = time.monotonic()
r = other.req({"cmd": "checkpoint"})
took = time.monotonic() - t0
if r is None or r.get("ok") or "boundary" not in r.get("error", ""):
    sys.exit("FAIL (c): checkpoint while the process holds the model: %r" % r)
if took < WAIT - 1:
    sys.exit("FAIL (c): failed after %.1f s, before the %d s wait" % (took, WAIT))
other.s.close()
print("ok (c): after %.1f s: %s" % (took, r["error"]))

# (d) and (e)
for case, how in (("d", "shuts its writing side"), ("e", "closes")):
    t1.send({"cmd": "checkpoint"})
    if case == "d":
        t1.s.shutdown(socket.SHUT_WR)
        r = t1.line()
        if r is None or not r.get("ok") or "path" not in r:
            sys.exit("FAIL (d): the process's own checkpoint after a half-close: %r" % r)
        end = t1.line()
        if end is not None:
            sys.exit("FAIL (d): a line after the checkpoint reply: %r" % end)
        print("ok (d): checkpoint answered after the half-close, then EOF: %s" % r["path"])
    t1.s.close()
    t1 = Conn()
    deadline = time.monotonic() + WAIT
    while True:
        r = t1.req({"cmd": "attach", "version": 1, "params": N, "dtype": "float32",
                    "name": "next"})
        if r.get("ok") or time.monotonic() > deadline:
            break
        t1.s.close()
        time.sleep(0.2)
        t1 = Conn()
    if not r.get("ok"):
        sys.exit("FAIL (%s): after a process that %s, attach: %r" % (case, how, r))
    if case == "d" and r.get("fresh"):
        sys.exit("FAIL (d): the next process got a fresh vector: %r" % r)
    r = t1.req({"cmd": "step", "step": 10})
    if not r.get("ok"):
        sys.exit("FAIL (%s): the next process cannot step: %r" % (case, r))
    print("ok (%s): after a process that %s, the next one attaches and steps" % (case, how))
t1.s.close()
PY
ls "$FLEET_DIR/ck"/ckpt-*.gdc >/dev/null 2>&1 || fleet_fail "no checkpoint was written"
fleet_alive "$(fleet_pid c)" || fleet_fail "c ended: $(fleet_tail c)"
fleet_ctl c leave >/dev/null || fleet_fail "c: leave"
fleet_wait_exit c 30 || fleet_fail "c: leave exited $?: $(fleet_tail c)"
fleet_ok "c left"
