#!/bin/sh
# Churn soak: N real gossipd peers (job key, Fashion-MNIST shards) train
# together while, at random moments, one is SIGKILLed (and restarted later
# on its address with --resume), one is SIGSTOPped for a few seconds, a
# joiner comes in with --join, or one is asked to leave. The chaos is
# bounded so that the job lives: never fewer than ceil(N/2) running,
# unstopped peers. It counts
#   hangs       a peer that does not answer `gossipctl status` within 2 s
#               in two polls in a row (all running, unstopped peers are
#               polled every second; single misses go to events.log), or
#               does not exit within leave_timeout + 5 s of a leave;
#   crashes     any exit nobody asked for, or a leave that exits non-zero;
#   sanitizer   "ERROR: AddressSanitizer", "ERROR: LeakSanitizer" or
#               "runtime error:" in any peer's log;
# and at the end, after a settling time without chaos,
#   below-target  a running peer whose last evaluation is under --target;
#   stale-dead    a running peer that some peer's view still holds dead.
# Prints one summary line; exits 1 if any count is above 0, 2 on bad usage.
# Logs (one per process, with sanitizer output), checkpoints and events.log
# stay in the directory printed at the start.
#
# Usage: contrib/soak/soak.sh [--peers N (8-12, default 8)] [--minutes M
#   (default 10)] [--build DIR (DIR/src/gossipd and DIR/src/gossipctl, e.g.
#   an ASan build; default: this tree)] [--seed S] [--target ACC (default
#   0.80)] [--port BASE (default 26000; BASE to BASE+999 are used)]
top=$(cd "$(dirname "$0")/../.." && pwd)
exec /usr/bin/python3 - "$top" "$@" <<'PY'
import argparse, json, math, os, random, signal, subprocess, sys, tempfile, time

top = sys.argv[1]
ap = argparse.ArgumentParser(prog="soak.sh")
ap.add_argument("--peers", type=int, default=8)
ap.add_argument("--minutes", type=float, default=10)
ap.add_argument("--build", default=top)
ap.add_argument("--seed", type=int, default=int(time.time()))
ap.add_argument("--target", type=float, default=0.80)
ap.add_argument("--port", type=int, default=26000)
a = ap.parse_args(sys.argv[2:])
if not 8 <= a.peers <= 12:
    ap.error("--peers: 8 to 12")
if a.minutes <= 0:
    ap.error("--minutes: must be above 0")
GOSSIPD = os.path.join(os.path.abspath(a.build), "src/gossipd")
GOSSIPCTL = os.path.join(os.path.abspath(a.build), "src/gossipctl")
for f in (GOSSIPD, GOSSIPCTL):
    if not os.access(f, os.X_OK):
        ap.error(f"--build: no executable {f}")
DATA = "/usr/share/datasets/fashion-mnist"
if not os.path.exists(f"{DATA}/train-images-idx3-ubyte.gz"):
    sys.exit("soak: Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)")

N, MIN_LIVE, MAX_PEERS = a.peers, math.ceil(a.peers / 2), a.peers + 4
LEAVE_TIMEOUT = 2.0                  # gossipd's leave_timeout default, seconds
SETTLE = 90                          # longest wait for the end checks
rnd = random.Random(a.seed)
D = tempfile.mkdtemp(prefix="gossipd-soak.")
print(f"soak: seed {a.seed}, logs in {D}", flush=True)
subprocess.run([GOSSIPCTL, "keygen", f"{D}/key"], check=True, stdout=subprocess.DEVNULL)
events = open(f"{D}/events.log", "w")
t0 = time.monotonic()
count = dict(kills=0, stops=0, restarts=0, joins=0, leaves=0, hangs=0, crashes=0)


def note(msg):
    events.write(f"{time.monotonic() - t0:8.2f} {msg}\n")
    events.flush()


class Peer:
    """One address (slot); proc is its current process, if any."""
    def __init__(self, slot):
        self.slot, self.addr = slot, f"127.0.0.1:{a.port + slot}"
        self.name, self.sock = f"p{slot}", f"{D}/p{slot}.sock"
        self.proc, self.runs, self.expect, self.ready, self.misses = None, 0, None, False, 0
        self.stopped_until = self.leave_deadline = self.restart_at = None
        self.seed_of, self.seed_until = None, 0.0

    def start(self, how):
        self.runs += 1
        args = [GOSSIPD, "--foreground", "--listen", self.addr, "--key-file", f"{D}/key",
                "--shard", f"{self.slot % N}/{N}", "--control", self.sock,
                "--checkpoint-dir", f"{D}/{self.name}.ckpt", "--checkpoint-every", "100",
                "--epochs", str(EPOCHS), "--linger", "yes", "--eval-every", "100",
                "--eval-samples", "2000", "--seed", str(a.seed % 1000 + 1)] + how
        log = open(f"{D}/{self.name}.{self.runs}.log", "w")
        # A session of its own: a Ctrl-C on the terminal is for the soak only.
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        log.close()
        self.expect, self.ready, self.misses = None, False, 0
        note(f"start {self.name} run {self.runs} pid {self.proc.pid}: {' '.join(how)}")

    def up(self):
        """Whether this run serves its control socket. The socket file appears
        before the fabric endpoint is open (about 2 s with 8 peers starting on
        2 cores), and requests wait in its backlog until then: the log line
        written just before the event loop starts says when."""
        if not self.ready and self.proc is not None:
            with open(f"{D}/{self.name}.{self.runs}.log", errors="replace") as f:
                text = f.read()
            self.ready = ", control socket " in text or "joining through" in text
        return self.ready

    def live(self):
        return (self.proc is not None and self.expect is None and self.stopped_until is None
                and self.up())


peers = []
slots = iter(range(1000))
# An epoch of a 1/N shard every 2/3 s: more than 8 peers on 2 cores
# train, so they train through the whole soak (--linger covers the rest);
# evaluations every 100 steps keep each peer's accuracy current.
EPOCHS = math.ceil(a.minutes * 90)


def ctl(p, *cmd, timeout=2.0):
    """Reply of gossipctl --json, or None if none came within timeout."""
    try:
        r = subprocess.run([GOSSIPCTL, "-s", p.sock, "--json", *cmd], capture_output=True,
                           text=True, timeout=timeout)
        return json.loads(r.stdout) if r.returncode == 0 else None
    except (subprocess.TimeoutExpired, ValueError):
        return None


def live():
    return [p for p in peers if p.live()]


def cleanup(*_):
    for p in peers:
        if p.proc is not None and p.proc.poll() is None:
            p.proc.send_signal(signal.SIGCONT)
            p.proc.kill()
            p.proc.wait()


def reap(now):
    """Notices exits: those asked for end the process, the others are crashes."""
    for p in peers:
        if p.proc is None or (rc := p.proc.poll()) is None:
            continue
        if p.expect == "kill":
            note(f"{p.name} killed (rc {rc})")
        elif p.expect == "leave" and rc == 0:
            note(f"{p.name} left")
        else:
            count["crashes"] += 1
            note(f"CRASH {p.name} run {p.runs} pid {p.proc.pid}: exit {rc} (asked: {p.expect})")
        p.proc, p.stopped_until, p.leave_deadline = None, None, None


def poll_status():
    """Every running, unstopped peer must answer status within 2 s; asked in parallel."""
    asked = [(p, subprocess.Popen([GOSSIPCTL, "-s", p.sock, "status"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)) for p in live()]
    end = time.monotonic() + 2.0
    for p, c in asked:
        try:
            c.wait(timeout=max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            c.kill()
            c.wait()
            if p.proc is not None and p.proc.poll() is None and p.live():
                p.misses += 1
                # One miss can be the host: on 2 cores, a dozen ASan peers
                # starve every loop now and then (load 39 measured). A
                # stuck loop misses every poll.
                note(f"{'HANG' if p.misses == 2 else 'slow'} {p.name} pid {p.proc.pid}: "
                     f"no status within 2 s, {p.misses} polls in a row "
                     f"(load {os.getloadavg()[0]:.1f})")
                count["hangs"] += p.misses == 2
        else:
            p.misses = 0


def chaos(now):
    lv = live()
    acts = []
    if len(lv) > MIN_LIVE:
        acts += ["kill", "stop", "leave"]
    if sum(p.proc is not None for p in peers) < MAX_PEERS:
        acts.append("join")
    if not acts:
        return
    act = rnd.choice(acts)
    # A member that a joiner is still joining through stays as it is: the
    # joiner knows no other (a daemon that loses its only seed trains alone).
    lv = [p for p in lv if not seeding(p, now)] if act != "join" else lv
    if not lv:
        return
    p = rnd.choice(lv)
    if act == "kill":
        p.expect = "kill"
        p.proc.kill()
        count["kills"] += 1
        p.restart_at = now + rnd.uniform(3, 15)
        note(f"kill -9 {p.name}")
    elif act == "stop":
        p.proc.send_signal(signal.SIGSTOP)
        p.stopped_until = now + rnd.uniform(1, 6)
        count["stops"] += 1
        note(f"stop {p.name}")
    elif act == "leave":
        p.expect = "leave"
        p.leave_deadline = now + LEAVE_TIMEOUT + 5
        count["leaves"] += 1
        note(f"leave {p.name}: {ctl(p, 'leave')}")
    else:
        j = Peer(next(slots))
        peers.append(j)
        j.start(["--join", p.addr])
        j.seed_of, j.seed_until = p, now + 30
        count["joins"] += 1


def seeding(p, now):
    """Whether a joiner is still joining through p (for at most 30 s)."""
    for j in peers:
        if j.seed_of is p and j.proc is not None and now < j.seed_until:
            with open(f"{D}/{j.name}.{j.runs}.log", errors="replace") as f:
                if "member: joined the job" not in f.read():
                    return True
            j.seed_of = None
    return False


def housekeeping(now):
    for p in peers:
        if p.stopped_until is not None and now >= p.stopped_until:
            p.proc.send_signal(signal.SIGCONT)
            p.stopped_until = None
            note(f"cont {p.name}")
        if p.leave_deadline is not None and p.proc is not None and now > p.leave_deadline:
            count["hangs"] += 1
            note(f"HANG {p.name}: still running {LEAVE_TIMEOUT + 5:.0f} s after leave")
            p.expect = "kill"
            p.proc.kill()
        if p.restart_at is not None and p.proc is None and now >= p.restart_at:
            # Back on its address, from its newest checkpoint and knowing every
            # running member; killed before its first checkpoint, as a joiner.
            ck = f"{D}/{p.name}.ckpt"
            via = live()
            if not via:
                continue
            p.restart_at = None
            if os.path.isdir(ck) and any(f.startswith("ckpt-") for f in os.listdir(ck)):
                p.start(["--resume", "--peers", ",".join([q.addr for q in via] + [p.addr])])
            else:
                seed = rnd.choice(via)
                p.start(["--join", seed.addr])
                p.seed_of, p.seed_until = seed, now + 30
            count["restarts"] += 1


def end_checks():
    """Until SETTLE s: each running peer's last evaluation >= target, none held dead."""
    start = time.monotonic()
    deadline, waited = start + SETTLE, False
    while True:
        now = time.monotonic()
        reap(now)
        housekeeping(now)
        lv = [p for p in peers if p.live()]
        addrs = {p.addr for p in lv}
        below, stale = [], []
        for p in lv:
            st = ctl(p, "status")
            if st is None or st.get("accuracy", -1) < a.target:
                below.append(f"{p.name}:{st and st.get('accuracy')}")
            view = ctl(p, "peers")
            for e in (view or {}).get("peers", []):
                if e["addr"] in addrs and e["state"] == "dead":
                    stale.append(f"{p.name} holds {e['addr']} dead")
        if (not below and not stale) or now > deadline:
            note(f"end checks after {now - start:.0f} s: {len(lv)} peers, "
                 f"below target {below}, stale dead {stale}")
            return lv, below, stale
        if not waited:
            note(f"end checks waiting: below target {below}, stale dead {stale}")
            waited = True
        time.sleep(2)


def main():
    addrs = []
    for _ in range(N):
        p = Peer(next(slots))
        peers.append(p)
        addrs.append(p.addr)
    for p in peers:
        p.start(["--peers", ",".join(addrs)])
    for p in peers:
        while not p.up():
            if p.proc.poll() is not None or time.monotonic() - t0 > 60:
                sys.exit(f"soak: {p.name} did not start; see {D}/{p.name}.1.log")
            time.sleep(0.1)
    end = time.monotonic() + a.minutes * 60
    next_chaos = time.monotonic() + rnd.uniform(2, 6)
    while time.monotonic() < end:
        now = time.monotonic()
        reap(now)
        housekeeping(now)
        if now >= next_chaos:
            chaos(now)
            next_chaos = now + rnd.uniform(1, 6)
        poll_status()
        time.sleep(max(0.0, 1.0 - (time.monotonic() - now)))
    # No more chaos: the stopped continue, the killed come back.
    for p in peers:
        if p.stopped_until is not None:
            p.stopped_until = time.monotonic()
        if p.restart_at is not None:
            p.restart_at = time.monotonic()
    settle_end = time.monotonic() + 2 * LEAVE_TIMEOUT + 10
    while time.monotonic() < settle_end:
        reap(time.monotonic())
        housekeeping(time.monotonic())
        poll_status()
        time.sleep(1)
    lv, below, stale = end_checks()
    for b in below:
        note(f"BELOW-TARGET {b}")
    for s in stale:
        note(f"STALE-DEAD {s}")
    sanitizer = 0
    for f in sorted(os.listdir(D)):
        if f.endswith(".log") and f != "events.log":
            for line in open(f"{D}/{f}", errors="replace"):
                if "ERROR: AddressSanitizer" in line or "ERROR: LeakSanitizer" in line \
                        or "runtime error:" in line:
                    sanitizer += 1
                    note(f"SANITIZER {f}: {line.strip()}")
    c = count
    bad = c["hangs"] + c["crashes"] + sanitizer + len(below) + len(stale)
    print(f"soak: {a.minutes * 60:.0f} s, {N} peers, {c['kills']} kills, {c['stops']} stops, "
          f"{c['restarts']} restarts, {c['joins']} joins, {c['leaves']} leaves; "
          f"hangs {c['hangs']}, crashes {c['crashes']}, sanitizer {sanitizer}, "
          f"below-target {len(below)}, stale-dead {len(stale)}, {len(lv)} peers at the end: "
          f"{'FAIL' if bad else 'PASS'} (logs and events.log in {D})", flush=True)
    return 1 if bad else 0


signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
try:
    rc = main()
except KeyboardInterrupt:
    print("soak: interrupted", flush=True)
    rc = 130
finally:
    cleanup()
sys.exit(rc)
PY
