#!/usr/bin/python3
"""Start and watch a cluster of real gossipd peers on 127.0.0.1.

Used by tests/membership.sh (`test`) and contrib/bench/membership.sh
(`bench N...`). Peers train one step on a tiny budget and then linger, so
dozens of them fit on a small machine; every view is read straight from
the control sockets, many times a second, so a wrong state cannot slip by
between two looks.
"""
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time

TOP_BUILD = os.environ.get("top_builddir", os.path.join(os.path.dirname(__file__), ".."))
GOSSIPD = os.path.join(TOP_BUILD, "src", "gossipd")
GOSSIPCTL = os.path.join(TOP_BUILD, "src", "gossipctl")
# Other tests own 23990-23999 (daemon.sh) and nearby; stay clear of them.
PORT_LO, PORT_HI = 24100, 29900


class Fail(Exception):
    pass


def port_free(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


class Peer:
    def __init__(self, cluster, name, port):
        self.cluster, self.name, self.port = cluster, name, port
        self.addr = "127.0.0.1:%d" % port
        self.sock = os.path.join(cluster.dir, name + ".sock")
        self.log = os.path.join(cluster.dir, name + ".log")
        self.proc = None
        self.stopped = False
        self.ready_at = None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def ask(self, cmd, timeout=5.0, **args):
        req = dict(cmd=cmd, **args)
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(timeout)
        try:
            s.connect(self.sock)
            s.sendall((json.dumps(req) + "\n").encode())
            buf = b""
            while not buf.endswith(b"\n"):
                d = s.recv(1 << 16)
                if not d:
                    break
                buf += d
        finally:
            s.close()
        return json.loads(buf)

    def view(self):
        """{addr: (state, id)} as this peer sees the job."""
        r = self.ask("peers")
        if not r.get("ok"):
            raise Fail("%s: peers failed: %s" % (self.name, r))
        return {p["addr"]: (p["state"], p["id"]) for p in r["peers"]}


class Cluster:
    def __init__(self, tmpdir, quiet=False):
        self.dir = tmpdir
        self.peers = {}
        self.quiet = quiet
        self.key = os.path.join(tmpdir, "job.key")
        subprocess.run([GOSSIPCTL, "keygen", self.key], check=True,
                       stdout=subprocess.DEVNULL)
        self.rng = random.Random(os.getpid())
        self.used = set()
        self.ids = {}           # addr -> id of the live process there

    def say(self, msg):
        if not self.quiet:
            print(msg, flush=True)

    def free_port(self):
        for _ in range(1000):
            p = self.rng.randrange(PORT_LO, PORT_HI)
            if p not in self.used and port_free(p):
                self.used.add(p)
                return p
        raise Fail("no free port")

    def new_peer(self, name):
        p = Peer(self, name, self.free_port())
        self.peers[name] = p
        return p

    def launch(self, p, peers=None, join=None, extra=()):
        args = [GOSSIPD, "--foreground", "--control", p.sock, "--listen", p.addr,
                "--key-file", self.key, "--max-steps", "1", "--eval-samples", "200",
                "--linger", "yes", "--log-file", p.log] + list(extra)
        if peers:
            args += ["--peers", peers]
        if join:
            args += ["--join", join]
        p.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        p.stopped = False

    def wait_ready(self, ps, timeout=60):
        """Until every peer's socket answers and its endpoint is open; a
        peer that exits first fails the test, saying so if its port was
        taken."""
        end = time.time() + timeout
        pending = list(ps)
        while pending:
            if time.time() > end:
                raise Fail("peers not ready: %s" % [p.name for p in pending])
            for p in list(pending):
                if p.proc.poll() is not None:
                    log = open(p.log).read() if os.path.exists(p.log) else ""
                    if "in use" in log or "Address already" in log:
                        raise Fail("%s: port %d busy: %s" % (p.name, p.port, log[-300:]))
                    raise Fail("%s exited %s: %s" % (p.name, p.proc.returncode, log[-500:]))
                try:
                    r = p.ask("status", timeout=2)
                except OSError:
                    continue
                if r.get("ok"):
                    p.ready_at = time.time()
                    self.ids[p.addr] = r["id"]
                    pending.remove(p)
            time.sleep(0.05)

    def live(self):
        return [p for p in self.peers.values() if p.running()]

    def check_views(self, expect_dead=()):
        """All views of the running, unstopped peers. Fails if any of them
        has a live, unstopped peer as dead or left."""
        views = {}
        for p in self.live():
            if p.stopped:
                continue
            try:
                views[p.name] = p.view()
            except (OSError, ValueError):
                # A leaving peer closes its control socket a moment
                # before its process ends: refused, reset or cut short.
                if p.addr not in expect_dead:
                    raise
        healthy = {p.addr for p in self.live() if not p.stopped and p.addr not in expect_dead}
        for name, v in views.items():
            for addr, (state, pid) in v.items():
                if addr in healthy and pid == self.ids.get(addr) and state in ("dead", "left"):
                    raise Fail("%s sees live peer %s as %s" % (name, addr, state))
        return views

    def until(self, pred, timeout, what, expect_dead=()):
        t0 = time.time()
        while True:
            views = self.check_views(expect_dead)
            if pred(views):
                return time.time() - t0
            if time.time() - t0 > timeout:
                raise Fail("%s: not within %.1f s; views: %s" % (
                    what, timeout, json.dumps(views)[:3000]))
            time.sleep(0.05)

    def all_see(self, target, state, views):
        want_id = self.ids.get(target.addr)
        for p in self.live():
            if p.stopped or p is target:
                continue
            v = views.get(p.name, {})
            if v.get(target.addr, (None, None)) != (state, want_id):
                return False
        return True

    def all_agree(self, views):
        alive = {p.addr for p in self.live() if not p.stopped}
        for p in self.live():
            if p.stopped:
                continue
            v = views.get(p.name, {})
            got = {a for a, (s, i) in v.items() if s == "alive" and i == self.ids.get(a)}
            if not alive <= got:
                return False
        return True

    def stop_all(self, timeout=20):
        codes = {}
        for p in self.live():
            if p.stopped:
                p.proc.send_signal(signal.SIGCONT)
            p.proc.send_signal(signal.SIGTERM)
        end = time.time() + timeout
        for p in self.peers.values():
            if p.proc is None:
                continue
            try:
                codes[p.name] = p.proc.wait(max(0.1, end - time.time()))
            except subprocess.TimeoutExpired:
                p.proc.kill()
                codes[p.name] = "hung"
        return codes

    def kill_all(self):
        for p in self.peers.values():
            if p.running():
                p.proc.kill()
                p.proc.wait()


def seeds_for(cluster, ps, i, k, rng):
    """Peer list for ps[i]: itself, k others, and one address nobody
    listens on."""
    others = rng.sample([p for j, p in enumerate(ps) if j != i], k)
    return [ps[i].addr] + [p.addr for p in others] + ["127.0.0.1:%d" % cluster.free_port()]


def start_job(c, n, k, rng, prefix="p", use_files=False, unreachable=True):
    ps = [c.new_peer("%s%d" % (prefix, i)) for i in range(n)]
    for i, p in enumerate(ps):
        lst = seeds_for(c, ps, i, k, rng)
        if not unreachable:
            lst = lst[:-1]
        if use_files and i % 2 == 0:
            f = os.path.join(c.dir, p.name + ".peers")
            with open(f, "w") as fh:
                fh.write("# peers of %s\n" % p.name)
                for a in lst:
                    fh.write("%s   # a member\n" % a)
            c.launch(p, peers="@" + f)
        else:
            c.launch(p, peers=",".join(lst))
    c.wait_ready(ps)
    return ps


def test(tmpdir):
    c = Cluster(tmpdir)
    rng = random.Random(4)
    unreachable = os.environ.get("MEMBER_NO_UNREACHABLE") is None
    try:
        t_start = time.time()
        ps = start_job(c, 8, 2, rng, use_files=True, unreachable=unreachable)
        c.say("ok: 8 peers up in %.1f s" % (time.time() - t_start))
        t = c.until(c.all_agree, 10, "8 peers agree")
        c.say("ok: 8 peers, each told of 2 others (+ itself + an unreachable one): "
              "all list all 8 alive %.2f s after the last one came up" % t)
        # Agreement can come before a peer has finished its one step and
        # its evaluation, so wait for the budget rather than look once.
        t0 = time.time()
        while True:
            st = {p.name: p.ask("status") for p in ps}
            if all(s["state"] == "done" and s["members"] == 8 for s in st.values()):
                break
            if time.time() - t0 > 30:
                raise Fail("30 s after agreement, not every peer is done with 8 members: %s"
                           % {n: (s["state"], s["members"]) for n, s in st.items()})
            time.sleep(0.05)

        # A 9th joins through one member.
        j = c.new_peer("joiner")
        c.launch(j, join=ps[3].addr)
        c.wait_ready([j])
        t = c.until(lambda v: c.all_agree(v) and c.all_see(j, "alive", v), 10,
                    "joiner listed everywhere")
        c.say("ok: a 9th peer joined through %s: listed alive everywhere after %.2f s"
              % (ps[3].name, t))

        # A graceful leave: left, not dead; exit 0.
        lv = ps[5]
        r = lv.ask("leave")
        if not r.get("ok"):
            raise Fail("leave: %s" % r)
        t = c.until(lambda v: c.all_see(lv, "left", v), 10, "left everywhere",
                    expect_dead=(lv.addr,))
        rc = lv.proc.wait(15)
        if rc != 0:
            raise Fail("leaving peer exited %d" % rc)
        t0 = time.time()
        while time.time() - t0 < 2:
            if not c.all_see(lv, "left", c.check_views(expect_dead=(lv.addr,))):
                raise Fail("left peer changed state after it exited")
            time.sleep(0.1)
        c.say("ok: a leaving peer is `left` everywhere after %.2f s (never dead), "
              "exit status 0" % t)

        # SIGKILL: dead everywhere within 5 s; nobody else ever dead.
        kv = ps[2]
        kv.proc.kill()
        kv.proc.wait()
        t = c.until(lambda v: c.all_see(kv, "dead", v), 5.0, "killed peer dead everywhere",
                    expect_dead=(kv.addr, lv.addr))
        c.say("ok: a SIGKILLed peer is dead in every survivor's view after %.2f s "
              "(suspicion_timeout 2 s, limit 5 s)" % t)

        # SIGSTOP beyond the suspicion time, then SIGCONT: alive again.
        sv = ps[6]
        sv.proc.send_signal(signal.SIGSTOP)
        sv.stopped = True
        c.until(lambda v: c.all_see(sv, "dead", v), 10, "stopped peer dead",
                expect_dead=(kv.addr, lv.addr, sv.addr))
        time.sleep(1.0)
        sv.proc.send_signal(signal.SIGCONT)
        sv.stopped = False
        t = c.until(lambda v: c.all_see(sv, "alive", v) and c.all_agree(v), 10,
                    "resumed peer alive everywhere", expect_dead=(kv.addr, lv.addr, sv.addr))
        inc = sv.ask("stats")["membership"]["incarnation"]
        c.say("ok: a peer SIGSTOPped past its death (incarnation now %d) is alive "
              "everywhere %.2f s after SIGCONT" % (inc, t))

        # Watch everything settle for a few more seconds: no false deaths.
        t0 = time.time()
        while time.time() - t0 < 3:
            c.check_views(expect_dead=(kv.addr, lv.addr))
            time.sleep(0.1)
        c.say("ok: no live peer was ever dead or left in any view")

        # Control socket: every command on a peer of the job.
        p = ps[0]
        for cmd in ("status", "peers", "stats", "metrics", "watch", "checkpoint"):
            r = p.ask(cmd)
            if cmd == "checkpoint":
                if r.get("ok") or "checkpoint_dir" not in r.get("error", ""):
                    raise Fail("checkpoint without a dir: %s" % r)
                continue
            if not r.get("ok"):
                raise Fail("%s: %s" % (cmd, r))
        peers = p.ask("peers")["peers"]
        for e in peers:
            for f in ("id", "addr", "state", "incarnation", "rtt", "bandwidth",
                      "last_contact", "last_exchange", "selected", "self"):
                if f not in e:
                    raise Fail("peers entry lacks %s: %s" % (f, e))
        if not any(e["rtt"] for e in peers if not e["self"] and e["state"] == "alive"):
            raise Fail("no rtt measured: %s" % peers)
        # The live count is of this instant: a member p0 suspects for a
        # moment is not in it, so give it a few looks.
        t0 = time.time()
        while True:
            text = p.ask("metrics")["text"]
            if re.search(r"^gossipd_members 7$", text, re.M):
                break
            if time.time() - t0 > 5:
                raise Fail("metrics: gossipd_members is not 7 for 5 s:\n%s" % text[:2000])
            time.sleep(0.1)
        for want in ("# TYPE gossipd_members gauge",
                     "# HELP gossipd_membership_pings_sent_total",
                     "gossipd_transport_bytes_sent_total{type=\"ping\"}",
                     "gossipd_membership_deaths_total"):
            if want not in text:
                raise Fail("metrics lack %r:\n%s" % (want, text[:2000]))
        out = subprocess.run([GOSSIPCTL, "-s", p.sock, "peers"], capture_output=True,
                             text=True, check=True).stdout
        if "ADDRESS" not in out or "(this peer)" not in out or "dead" not in out:
            raise Fail("peers table:\n" + out)
        out = subprocess.run([GOSSIPCTL, "-s", p.sock, "metrics"], capture_output=True,
                             text=True, check=True).stdout
        if not out.startswith("# HELP"):
            raise Fail("gossipctl metrics:\n" + out[:500])
        for k, v, ok in (("probe_interval", "400", True), ("suspicion_timeout", "3000", True),
                         ("probe_timeout", "900", False), ("indirect_checks", "2", False),
                         ("probe_interval", "500", True)):
            r = subprocess.run([GOSSIPCTL, "-s", p.sock, "set", k, v], capture_output=True,
                               text=True)
            if (r.returncode == 0) != ok:
                raise Fail("set %s %s: rc %d %s" % (k, v, r.returncode, r.stderr))
        # Abuse on a busy member: errors, and the peer stays in the job.
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(10)
        s.connect(p.sock)
        for bad in (b"{nope\n", b'{"cmd":"frobnicate"}\n', b'{"cmd":7}\n'):
            s.sendall(bad)
            buf = b""
            while not buf.endswith(b"\n"):
                buf += s.recv(65536)
            r = json.loads(buf)
            if r["ok"] is not False or not r["error"]:
                raise Fail("%r got %s" % (bad, r))
        s.close()
        big = socket.socket(socket.AF_UNIX)
        big.settimeout(10)
        big.connect(p.sock)
        try:
            big.sendall(b"{" + b" " * (1 << 20) + b"}\n")
        except OSError:
            pass
        buf = big.recv(65536)
        if b'"ok":false' not in buf.replace(b" ", b""):
            raise Fail("1 MiB line: %r" % buf[:200])
        big.close()
        many = []
        for _ in range(100):
            m = socket.socket(socket.AF_UNIX)
            m.settimeout(10)
            m.connect(p.sock)
            m.sendall(b'{"cmd":"peers"}\n')
            many.append(m)
        for m in many:
            buf = b""
            while not buf.endswith(b"\n"):
                buf += m.recv(65536)
            if not json.loads(buf)["ok"]:
                raise Fail("one of 100 clients: %s" % buf[:200])
            m.close()
        c.until(c.all_agree, 5, "job intact after control abuse",
                expect_dead=(kv.addr, lv.addr))
        c.say("ok: status, peers, stats, metrics, watch, checkpoint, set; bad JSON, "
              "unknown command, 1 MiB line, 100 clients: answered, job unaffected")

        # Everyone leaves on SIGTERM with exit 0; nobody hangs.
        t0 = time.time()
        codes = c.stop_all()
        bad = {n: rc for n, rc in codes.items() if n not in (kv.name,) and rc != 0}
        if bad:
            raise Fail("exit codes after SIGTERM: %s" % bad)
        c.say("ok: SIGTERM: %d peers left with exit 0 in %.1f s" %
              (len(codes) - 1, time.time() - t0))
    finally:
        c.kill_all()


def bench(tmpdir, sizes, csv_path):
    rows = []
    for n in sizes:
        d = os.path.join(tmpdir, "n%d" % n)
        os.mkdir(d, 0o700)
        c = Cluster(d, quiet=True)
        rng = random.Random(n)
        try:
            t_launch = time.time()
            ps = start_job(c, n, 2, rng)
            up = time.time() - t_launch
            t_start = c.until(c.all_agree, 60, "start")
            j = c.new_peer("joiner")
            c.launch(j, join=ps[0].addr)
            c.wait_ready([j])
            t_join = c.until(lambda v: c.all_agree(v) and c.all_see(j, "alive", v),
                             60, "join")
            kv = ps[n // 2]
            kv.proc.kill()
            kv.proc.wait()
            t_kill = c.until(lambda v: c.all_see(kv, "dead", v), 60, "kill",
                             expect_dead=(kv.addr,))
            rows.append((n, up, t_start, t_join, t_kill))
            print("N=%-3d up %.1f s  agree after start %.2f s  after join %.2f s  "
                  "dead after SIGKILL %.2f s" % rows[-1], flush=True)
            c.stop_all()
        finally:
            c.kill_all()
    with open(csv_path, "w") as f:
        f.write("peers,startup_s,agree_after_start_s,agree_after_join_s,"
                "dead_after_kill_s\n")
        for r in rows:
            f.write("%d,%.2f,%.3f,%.3f,%.3f\n" % r)
    print("\n| peers | all up (s) | agree after start (s) | after join (s) | "
          "dead everywhere after SIGKILL (s) | that / suspicion_timeout |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print("| %d | %.1f | %.2f | %.2f | %.2f | %.2f |" % (r + (r[4] / 2.0,)))


def main():
    if len(sys.argv) < 3:
        print("usage: member_cluster.py test TMPDIR | bench TMPDIR CSV N...", file=sys.stderr)
        return 2
    try:
        if sys.argv[1] == "test":
            test(sys.argv[2])
        else:
            bench(sys.argv[2], [int(x) for x in sys.argv[4:]], sys.argv[3])
    except Fail as e:
        print("FAIL: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
