#!/usr/bin/env python3
"""Run a matrix of training jobs side by side on one machine with many cores
(how issue 31's figures were measured on a 16-core machine), and keep every
process's output.

Usage: matrix.py SPEC.json [PARALLEL [LIMIT_S]]

SPEC is a JSON list of jobs, run PARALLEL (3) at a time, all of them killed
LIMIT_S (480) seconds after the start. A job is {"name", "kind", "n", "cmd",
"gossipd", "seed0"}: kind "gossip" starts n gossipd peers on 127.0.0.1
(--trainer external, a fresh job key, every peer in --peers, the job's
"gossipd" options) and one process of cmd per peer; "ddp" and "solo" start
n processes of cmd and no daemon; "alone" one process. In cmd, {i} {n}
{sock} {port} {seed} become the process's index, n, its peer's control
socket, a free port for a DDP rendezvous, and seed0 (11) + i; the word
"python3" becomes $PY when set. Processes run from the top of the tree with
PYTHONPATH set to src/python, contrib/examples and contrib/bench, and one
thread each (OMP_NUM_THREADS=1). Every peer leaves once its job's
processes have ended. Logs: $OUT/NAME/pI.log (peers), tI.log (processes);
matrix_report.py summarises them.

Binaries: $GOSSIPD and $GOSSIPCTL (default: the build's, src/), with
$GOSSIPD_LIBS added to their LD_LIBRARY_PATH only (to carry a build's
shared libraries to a machine without them).
"""
import itertools
import json
import os
import shutil
import subprocess
import sys
import time
TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
OUT = os.environ.get("OUT", "/tmp/out")
env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
           PYTHONPATH=TOP + "/src/python:" + TOP + "/contrib/examples:" + TOP + "/contrib/bench",
           PYTHONUNBUFFERED="1")
GD = os.environ.get("GOSSIPD", TOP + "/src/gossipd")
CTL = os.environ.get("GOSSIPCTL", TOP + "/src/gossipctl")
genv = dict(env)
if os.environ.get("GOSSIPD_LIBS"):
    genv["LD_LIBRARY_PATH"] = os.environ["GOSSIPD_LIBS"]
ports = itertools.count(31000, 16)
JOBS = os.environ.get("JOBS", "/tmp/matrix-jobs")


def fill(a, **kw):
    a = [os.environ.get("PY", "python3") if x == "python3" else x for x in a]
    return [str(x).format(**kw) for x in a]

def run_job(spec):
    name, n = spec["name"], spec.get("n", 4)
    d = os.path.join(JOBS, name); os.makedirs(d, exist_ok=True); os.chmod(JOBS, 0o700); os.chmod(d, 0o700)
    od = os.path.join(OUT, name); os.makedirs(od, exist_ok=True)
    base = next(ports)
    procs, daemons = [], []
    if spec["kind"] == "gossip":
        subprocess.run([CTL, "keygen", d + "/key"], env=genv, check=True, capture_output=True)
        peers = ",".join("127.0.0.1:%d" % (base + i) for i in range(n))
        for i in range(n):
            f = open(d + "/p%d.log" % i, "w")
            daemons.append(subprocess.Popen([GD, "--foreground", "--listen", "127.0.0.1:%d" % (base + i),
                "--key-file", d + "/key", "--peers", peers, "--trainer", "external",
                "--control", d + "/p%d.sock" % i] + spec.get("gossipd", []),
                env=genv, stdout=f, stderr=subprocess.STDOUT))
        for i in range(n):
            for _ in range(200):
                if os.path.exists(d + "/p%d.sock" % i): break
                time.sleep(0.05)
    for i in range(n if spec["kind"] != "alone" else 1):  # solo, ddp: n without daemons
        cmd = fill(spec["cmd"], i=i, n=n, sock=d + "/p%d.sock" % i, port=base + 8, seed=spec.get("seed0", 11) + i)
        os.chdir(TOP)
        f = open(d + "/t%d.log" % i, "w")
        procs.append(subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT))
    return dict(spec=spec, d=d, od=od, procs=procs, daemons=daemons, t0=time.time())

def finish(j):
    for i, _ in enumerate(j["daemons"]):
        subprocess.run([CTL, "-s", j["d"] + "/p%d.sock" % i, "leave"], env=genv, capture_output=True, timeout=10)
    for p in j["daemons"]:
        try: p.wait(timeout=20)
        except subprocess.TimeoutExpired: p.kill()
    for f in os.listdir(j["d"]):
        if f.endswith(".log"): shutil.copy(os.path.join(j["d"], f), j["od"])
    print("done %s in %.0f s" % (j["spec"]["name"], time.time() - j["t0"]), flush=True)

def main():
    specs = json.load(open(sys.argv[1])); par = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    limit = float(sys.argv[3]) if len(sys.argv) > 3 else 480
    t_start = time.time(); running = []; queue = list(specs)
    while queue or running:
        while queue and len(running) < par:
            running.append(run_job(queue.pop(0)))
        time.sleep(0.5)
        for j in list(running):
            if all(p.poll() is not None for p in j["procs"]):
                finish(j); running.remove(j)
        if time.time() - t_start > limit:
            for j in running:
                for p in j["procs"]: p.kill()
                finish(j)
            print("time limit: %d jobs not started" % len(queue)); break

main()
