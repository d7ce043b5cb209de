#!/usr/bin/python3
"""Turn the raw output of contrib/bench/attach.sh into CSV files and a table.

Usage: attach_report.py --out DIR [--target 0.90] [--bar 0.91] [accuracy] [overhead]
Reads DIR/raw/gossip/ (meta.json, pids, t*.out, status.txt, ss.txt, rc),
DIR/raw/ddp/ (meta.json, w0.out, rc) and DIR/raw/overhead/ (meta.json,
runs.txt, daemon_cpu.txt, K-MODE-tI.out, rc); writes DIR/accuracy-evals.csv,
DIR/accuracy.csv, DIR/overhead.csv, DIR/table.txt (also printed) and, through
gnuplot (plot.py; skipped with a warning without it), DIR/accuracy-steps.png
and DIR/accuracy-bytes.png: every gossip peer's evaluations and DDP's against
steps and against bytes sent, on one chart each. The definitions of the
figures are in attach.sh's header. Standard library only.
"""
import argparse
import bisect
import csv
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot import PALETTE, plot  # noqa: E402


def jlines(path):
    out = []
    if not os.path.exists(path):
        return out
    with open(path, errors="replace") as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    return out


def read_rc(d):
    rcs = {}
    p = os.path.join(d, "rc")
    if os.path.exists(p):
        with open(p) as f:
            for line in f:
                if line.strip():
                    n, rc = line.split()
                    rcs[n] = int(rc)
    return rcs


def interp(ts, vs, t):
    """vs at time t, linear between samples (None outside them)."""
    if not ts or t < ts[0] or t > ts[-1]:
        return None
    i = bisect.bisect_left(ts, t)
    if ts[i] == t or i == 0:
        return vs[i]
    t_a, v_a = ts[i - 1], vs[i - 1]
    return v_a + (vs[i] - v_a) * (t - t_a) / (ts[i] - t_a)


def first_at(evals, target):
    return next((e for e in evals if e["accuracy"] >= target), None)


def gossip_part(d, target):
    meta = json.load(open(os.path.join(d, "meta.json")))
    t0, n = meta["t0"], meta["peers"]
    rcs = read_rc(d)
    peers = []
    pid_of = {}
    with open(os.path.join(d, "pids")) as f:
        for line in f:
            i, pid = line.split()
            pid_of[int(pid)] = int(i)
    polls = {p: ([], [], None) for p in range(n)}
    with open(os.path.join(d, "status.txt")) as f:
        for line in f:
            try:
                t, p, js = line.split(" ", 2)
                s = json.loads(js)
            except ValueError:
                continue
            if not s.get("ok", True):
                continue
            ts, bs, _ = polls[int(p)]
            ts.append(float(t))
            bs.append(float(s["bytes_sent"]))
            polls[int(p)] = (ts, bs, s)
    ratios = {p: [] for p in range(n)}
    ss = os.path.join(d, "ss.txt")
    if os.path.exists(ss):
        with open(ss) as f:
            for line in f:
                t, pid, b = line.split()
                p = pid_of.get(int(pid))
                if p is None:
                    continue
                c = interp(polls[p][0], polls[p][1], float(t))
                if c:
                    ratios[p].append(float(b) / c)
    for p in range(n):
        ev = jlines(os.path.join(d, "t%d.out" % p))
        start = next((e for e in ev if e["ev"] == "start"), None)
        evals = [e for e in ev if e["ev"] == "eval"]
        done = next((e for e in ev if e["ev"] == "done"), None)
        hit = first_at(evals, target)
        last = polls[p][2]
        peers.append(dict(
            system="gossip", peer=p, start=start, evals=evals, done=done, hit=hit,
            t_start=start["t"] - t0 if start else None,
            rc=rcs.get("t%d" % p), daemon_rc=rcs.get("p%d" % p),
            bytes_total=done["bytes_sent"] if done and done.get("bytes_sent") is not None else None,
            bytes_final_polled=last["bytes_sent"] if last else None,
            exchanges=last.get("exchanges") if last else None,
            ss_ratio=statistics.median(ratios[p]) if ratios[p] else None))
    return dict(meta=meta, t0=t0, peers=peers,
                timeout=os.path.exists(os.path.join(d, "timeout")))


def ddp_part(d, target):
    meta = json.load(open(os.path.join(d, "meta.json")))
    t0 = meta["t0"]
    ev = jlines(os.path.join(d, "w0.out"))
    start = next((e for e in ev if e["ev"] == "start"), None)
    evals = [dict(e, bytes_sent=e["bytes"]) for e in ev if e["ev"] == "eval"]
    done = next((e for e in ev if e["ev"] == "done"), None)
    rcs = read_rc(d)
    ss = [b / done["bytes"] for b in done["bytes_ss"] if b >= 0] if done and done["bytes"] else []
    return dict(meta=meta, t0=t0, peers=[dict(
        system="ddp", peer=0, start=start, evals=evals, done=done, hit=first_at(evals, target),
        t_start=start["t"] - t0 if start else None,
        rc=max(rcs.values()) if rcs else None, daemon_rc=None,
        bytes_total=done["bytes"] if done else None, bytes_final_polled=None, exchanges=None,
        ss_ratio=statistics.mean(ss) if ss else None, ss_all=ss)],
        timeout=os.path.exists(os.path.join(d, "timeout")))


def f(v, fmt="%.4f", none="-"):
    return none if v is None else fmt % v


def mb(v):
    return "-" if v is None else "%.3f MB" % (v / 1e6)


def plots(out, g, dd):
    """DIR/accuracy-steps.png and accuracy-bytes.png: one line a gossip peer,
    DDP's black and thick."""
    steps, nbytes, styles = {}, {}, {}
    for r in g["peers"] + dd["peers"]:
        is_ddp = r["system"] == "ddp"
        lab = "DDP (gloo), %d workers, one model" % dd["meta"]["peers"] if is_ddp else (
            "gossip peer %d (gossipd + torch_cnn.py)" % r["peer"])
        steps[lab] = [(e["step"], e["accuracy"]) for e in r["evals"]]
        nbytes[lab] = [(e.get("bytes_sent"), e["accuracy"]) for e in r["evals"]]
        styles[lab] = dict(color="#000000", width=3) if is_ddp else dict(
            color=PALETTE[r["peer"] % len(PALETTE)], width=1.5)
    what = "attach.sh: %d gossipd peers (%s) against DDP" % (
        g["meta"]["peers"], g["meta"]["options"].replace("--trainer external ", "").strip())
    ylabel = "test accuracy (periodic evaluation)"
    a = plot(os.path.join(out, "accuracy-steps.png"), steps, what + ": accuracy against steps",
             "step (of the peer; DDP: of every worker)", ylabel, styles=styles)
    b = plot(os.path.join(out, "accuracy-bytes.png"), nbytes, what + ": accuracy against bytes sent",
             "bytes sent by the peer, log scale (gossipd: its bytes_sent counter; DDP: all-reduce "
             "volume per worker)", ylabel, logx=True, styles=styles)
    return a or b


def accuracy(out, target, bar, lines):
    g = gossip_part(os.path.join(out, "raw", "gossip"), target)
    dd = ddp_part(os.path.join(out, "raw", "ddp"), target)
    ddp = dd["peers"][0]
    ddp_bytes = ddp["hit"]["bytes_sent"] if ddp["hit"] else None
    with open(os.path.join(out, "accuracy-evals.csv"), "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["system", "peer", "step", "epoch", "t_launch_s", "t_train_s", "accuracy",
                    "bytes_sent"])
        for sysd in (g, dd):
            for r in sysd["peers"]:
                for e in r["evals"]:
                    w.writerow([r["system"], r["peer"], e["step"], "%.3f" % e["epoch"],
                                "%.2f" % (e["t"] - sysd["t0"]),
                                "%.2f" % (e["t"] - r["start"]["t"]) if r["start"] else "",
                                "%.4f" % e["accuracy"],
                                "" if e.get("bytes_sent") is None else "%.0f" % e["bytes_sent"]])
    plotted = plots(out, g, dd)
    fields = ["system", "peer", "steps", "final_accuracy_full", "final_ge_bar",
              "last_eval_accuracy", "t_target_launch_s", "t_target_train_s", "step_target",
              "bytes_target", "ddp_bytes_over_this", "bytes_total", "exchanges",
              "ss_over_counter", "train_loop_s", "step_ms", "exit_status"]
    table = []
    for r, sysd in [(r, g) for r in g["peers"]] + [(ddp, dd)]:
        done, hit = r["done"], r["hit"]
        x = dict(system=r["system"], peer=r["peer"],
                 steps=done["steps"] if done else None,
                 final_accuracy_full=done["accuracy_full"] if done else None,
                 last_eval_accuracy=r["evals"][-1]["accuracy"] if r["evals"] else None,
                 t_target_launch_s=hit["t"] - sysd["t0"] if hit else None,
                 t_target_train_s=hit["t"] - r["start"]["t"] if hit and r["start"] else None,
                 step_target=hit["step"] if hit else None,
                 bytes_target=hit["bytes_sent"] if hit else None,
                 bytes_total=r["bytes_total"], exchanges=r["exchanges"],
                 ss_over_counter=r["ss_ratio"],
                 train_loop_s=done["loop_s"] if done else None,
                 step_ms=1000 * done["step_s"] if done and done.get("step_s") else None,
                 exit_status=r["rc"])
        x["final_ge_bar"] = (None if x["final_accuracy_full"] is None
                             else int(x["final_accuracy_full"] >= bar))
        x["ddp_bytes_over_this"] = (ddp_bytes / x["bytes_target"]
                                    if ddp_bytes and x["bytes_target"] else None)
        table.append(x)
    with open(os.path.join(out, "accuracy.csv"), "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        for x in table:
            w.writerow({k: ("" if v is None else ("%.6g" % v if isinstance(v, float) else v))
                        for k, v in x.items()})

    m = g["meta"]
    tr = m["train"].split()
    ch = tr[tr.index("--channels") + 1]
    ep = tr[tr.index("--epochs") + 1]
    params = ddp["start"]["params"] if ddp["start"] else (
        g["peers"][0]["start"]["params"] if g["peers"][0]["start"] else None)
    lines.append("Part 1: accuracy and traffic. CNN conv %s channels (%s parameters), %d processes, "
                 "%s epochs each, batch 64, SGD momentum 0.9, lr 0.05 warm-up + cosine" %
                 (ch, params, m["peers"], ep))
    lines.append("  gossip: gossipd %s; DDP: gloo all-reduce. Target %.2f, bar %.2f."
                 % (m["options"].strip(), target, bar))
    lines.append("")
    hdr = ("%-7s %4s %6s %11s %5s %9s %9s %6s %12s %9s %12s %5s" %
           ("system", "peer", "steps", "final acc", ">=bar", "t %.2f" % target, "t %.2f" % target,
            "step", "bytes to", "DDP bytes", "bytes", "exit"))
    hdr2 = ("%-7s %4s %6s %11s %5s %9s %9s %6s %12s %9s %12s %5s" %
            ("", "", "", "(full test)", "", "launch s", "train s", "", "%.2f" % target,
             "/ these", "total", ""))
    lines += [hdr, hdr2]
    for x in table:
        lines.append("%-7s %4s %6s %11s %5s %9s %9s %6s %12s %9s %12s %5s" % (
            x["system"], x["peer"] if x["system"] == "gossip" else "all", f(x["steps"], "%d"),
            f(x["final_accuracy_full"]), {None: "-", 1: "yes", 0: "NO"}[x["final_ge_bar"]],
            f(x["t_target_launch_s"], "%.1f", "never"), f(x["t_target_train_s"], "%.1f", "never"),
            f(x["step_target"], "%d", "-"), mb(x["bytes_target"]),
            f(x["ddp_bytes_over_this"], "%.0fx"), mb(x["bytes_total"]), f(x["exit_status"], "%d")))
    gp = [x for x in table if x["system"] == "gossip"]
    accs = [x["final_accuracy_full"] for x in gp if x["final_accuracy_full"] is not None]
    lines.append("")
    if accs:
        lines.append("  gossip final accuracy: min %.4f, mean %.4f; %d of %d peers >= %.2f (the bar: "
                     "every peer)%s" % (min(accs), statistics.mean(accs),
                                        sum(a >= bar for a in accs), len(gp), bar,
                                        "" if len(accs) == len(gp) else "; some peers have none"))
        if ddp["done"]:
            lines.append("  worst peer - DDP: %+.2f points (the issue wants >= -0.3)" % (
                100 * (min(accs) - ddp["done"]["accuracy_full"])))
    hit = [x for x in gp if x["bytes_target"] is not None]
    if len(hit) == len(gp) and ddp_bytes:
        worst = max(hit, key=lambda x: x["bytes_target"])
        lines.append("  bytes to %.2f: DDP %s per worker; gossip worst peer %d %s, mean %s: "
                     "DDP / worst = %.0fx, DDP / mean = %.0fx (the issue wants >= 100x)" % (
                         target, mb(ddp_bytes), worst["peer"], mb(worst["bytes_target"]),
                         mb(statistics.mean(x["bytes_target"] for x in hit)),
                         ddp_bytes / worst["bytes_target"],
                         ddp_bytes / statistics.mean(x["bytes_target"] for x in hit)))
        tl = max(x["t_target_launch_s"] for x in hit)
        tt = max(x["t_target_train_s"] for x in hit)
        d = table[-1]
        st = sorted(x["step_target"] for x in hit)
        lines.append("  steps to %.2f: gossip peers %d-%d (median %g), DDP %d: worst / DDP = "
                     "%.2fx (the issue wants <= 1.25x)" % (
                         target, st[0], st[-1], statistics.median(st), d["step_target"],
                         st[-1] / d["step_target"]))
        lines.append("  time to %.2f: every gossip peer by %.1f s from launch (%.1f s of its "
                     "training); DDP %s s from launch (%s s of training)" % (
                         target, tl, tt, f(d["t_target_launch_s"], "%.1f", "never"),
                         f(d["t_target_train_s"], "%.1f", "never")))
    else:
        lines.append("  bytes to %.2f: %d of %d gossip peers reached it, DDP %s: no ratio for "
                     "the peers that did not" % (target, len(hit), len(gp),
                                                 "did" if ddp_bytes else "did NOT"))
    ssr = [x["ss_over_counter"] for x in gp if x["ss_over_counter"]]
    lines.append("  cross-checks: gossipd TCP bytes_sent (ss) / its own counter, median per peer: %s; "
                 "DDP ss bytes_sent / analytic volume per worker: %s" % (
                     " ".join("%.3f" % v for v in ssr) or "-",
                     " ".join("%.3f" % v for v in ddp.get("ss_all", [])) or "-"))
    bad = [x for x in table if x["exit_status"]]
    notes = []
    if g["timeout"]:
        notes.append("gossip run timed out")
    if dd["timeout"]:
        notes.append("ddp run timed out")
    if bad:
        notes.append("non-zero exits: %s" % ", ".join("%s %s" % (x["system"], x["peer"]) for x in bad))
    drc = [r for r in g["peers"] if r["daemon_rc"]]
    if drc:
        notes.append("gossipd exits: %s" % ", ".join("p%d %d" % (r["peer"], r["daemon_rc"]) for r in drc))
    if notes:
        lines.append("  NOTE: " + "; ".join(notes))
    lines.append("")
    return plotted


def overhead(out, lines):
    d = os.path.join(out, "raw", "overhead")
    meta = json.load(open(os.path.join(d, "meta.json")))
    runs = {}
    with open(os.path.join(d, "runs.txt")) as fh:
        for line in fh:
            k, mode, what, t, l1 = line.split()[:5]
            runs.setdefault(int(k), dict(mode=mode))[what] = (float(t), float(l1))
    cpu = {}
    with open(os.path.join(d, "daemon_cpu.txt")) as fh:
        for line in fh:
            k, s = line.split()
            cpu[int(k)] = float(s)
    rcs = read_rc(d)
    rows = []
    for k in sorted(runs):
        mode = runs[k]["mode"]
        for i in (0, 1):
            ev = jlines(os.path.join(d, "%d-%s-t%d.out" % (k, mode, i)))
            e = next((e for e in ev if e["ev"] == "done"), None)
            g = e is not None and e["peer_step_calls"] > 0
            rows.append(dict(
                run=k, pair=(k + 1) // 2, mode=mode, trainer=i,
                steps=e["steps"] if e else None,
                loop_s=e["loop_s"] if e else None,
                eval_s=e["eval_s"] if e else None,
                step_ms=1000 * e["step_s"] if e else None,
                step_cpu_ms=1000 * e["step_cpu_s"] if e else None,
                peer_step_calls=e["peer_step_calls"] if e else None,
                peer_step_ms=1000 * e["peer_step_s"] / e["peer_step_calls"] if g else None,
                peer_step_share=e["peer_step_s"] / (e["loop_s"] - e["eval_s"]) if g else None,
                peer_step_p50_ms=1000 * e["peer_step_p50_s"] if g else None,
                peer_step_p90_ms=1000 * e["peer_step_p90_s"] if g else None,
                peer_step_p99_ms=1000 * e["peer_step_p99_s"] if g else None,
                peer_step_max_ms=1000 * e["peer_step_max_s"] if g else None,
                mixes=e.get("mixes") if e else None,
                daemons_cpu_s=cpu.get(k),
                load1_begin=runs[k].get("begin", (0, None))[1],
                load1_end=runs[k].get("end", (0, None))[1],
                exit_status=rcs.get("o%dt%d" % (k, i))))
    fields = list(rows[0].keys()) if rows else []
    with open(os.path.join(out, "overhead.csv"), "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        for x in rows:
            w.writerow({k: ("" if v is None else ("%.6g" % v if isinstance(v, float) else v))
                        for k, v in x.items()})

    def mean_of(rr, key):
        v = [x[key] for x in rr if x[key] is not None]
        return statistics.mean(v) if len(v) == len(rr) and v else None

    lines.append("Part 2: overhead. 2 trainers at once, %d steps each per run, CNN conv %s; gossip: "
                 "a 2-peer gossipd job (%s), fresh for each run; alone: --no-gossip" % (
                     meta["steps"], meta["channels"], meta["options"].strip()))
    lines.append("")
    fmt = "%4s %4s %-7s %20s %8s %9s %8s %19s %8s %11s"
    lines.append(fmt % ("run", "pair", "mode", "wall ms/step", "CPU ms", "peer.step", "share",
                        "median/90%/max ms", "daemons", "load 1 min"))
    lines.append(fmt % ("", "", "", "mean (t0 t1)", "/step", "ms mean", "of step",
                        "of peer.step", "CPU s", "begin-end"))
    per = {}
    for k in sorted(runs):
        rr = [x for x in rows if x["run"] == k]
        wall, cpus = mean_of(rr, "step_ms"), mean_of(rr, "step_cpu_ms")
        per[k] = dict(mode=runs[k]["mode"], wall=wall, cpu=cpus, pair=(k + 1) // 2)
        ps, sh = mean_of(rr, "peer_step_ms"), mean_of(rr, "peer_step_share")
        p50, p90 = mean_of(rr, "peer_step_p50_ms"), mean_of(rr, "peer_step_p90_ms")
        mx = [x["peer_step_max_ms"] for x in rr if x["peer_step_max_ms"] is not None]
        lines.append(fmt % (
            k, (k + 1) // 2, runs[k]["mode"],
            "%.2f (%s)" % (wall, " ".join("%.2f" % x["step_ms"] for x in rr)) if wall else "failed",
            f(cpus, "%.2f"), f(ps, "%.3f"), f(100 * sh if sh is not None else None, "%.2f%%"),
            "%.3f/%.2f/%.1f" % (p50, p90, max(mx)) if mx else "-",
            f(cpu.get(k), "%.2f"),
            "%s-%s" % (f(runs[k].get("begin", (0, None))[1], "%.2f"),
                       f(runs[k].get("end", (0, None))[1], "%.2f"))))
    lines.append("")
    g = [v for v in per.values() if v["mode"] == "gossip" and v["wall"]]
    a = [v for v in per.values() if v["mode"] == "alone" and v["wall"]]
    if not g or not a:
        lines.append("  no complete run of each mode: no ratio")
    else:
        pairs = []
        for p in sorted({v["pair"] for v in per.values()}):
            gm = [v["wall"] for v in g if v["pair"] == p]
            am = [v["wall"] for v in a if v["pair"] == p]
            if gm and am:
                pairs.append(gm[0] / am[0])
        gw, aw = statistics.mean(v["wall"] for v in g), statistics.mean(v["wall"] for v in a)
        gc, ac = statistics.mean(v["cpu"] for v in g), statistics.mean(v["cpu"] for v in a)
        dcpu = statistics.mean(cpu[k] / (2 * meta["steps"]) * 1000 for k in cpu) if cpu else 0.0
        gr = [x for x in rows if x["mode"] == "gossip" and x["peer_step_ms"] is not None]
        lines.append("  wall time per step: gossip %.2f ms, alone %.2f ms (means over runs): "
                     "gossip/alone = %.3f (%+.1f%%; the issue wants <= +5%%); per pair: %s" % (
                         gw, aw, gw / aw, 100 * (gw / aw - 1), " ".join("%.3f" % x for x in pairs)))
        lines.append("  CPU time per step: trainer %.2f ms with gossip, %.2f ms alone (%+.1f%%); "
                     "with the daemons' CPU (%.3f ms per trainer step) %.2f ms: %+.1f%% CPU in all" % (
                         gc, ac, 100 * (gc / ac - 1), dcpu, gc + dcpu, 100 * ((gc + dcpu) / ac - 1)))
        lines.append("  inside peer.step(): %.3f ms per step on average (%.2f%% of a gossip step; "
                     "median %.3f ms, 90%% %.2f ms): the wait for the daemon's reply" % (
                         statistics.mean(x["peer_step_ms"] for x in gr),
                         100 * statistics.mean(x["peer_step_share"] for x in gr),
                         statistics.mean(x["peer_step_p50_ms"] for x in gr),
                         statistics.mean(x["peer_step_p90_ms"] for x in gr)))
    bad = [x for x in rows if x["exit_status"]]
    if bad:
        lines.append("  NOTE: non-zero exits: %s" % ", ".join(
            "run %d t%d %d" % (x["run"], x["trainer"], x["exit_status"]) for x in bad))
    lines.append("")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--target", type=float, default=0.90)
    ap.add_argument("--bar", type=float, default=0.91)
    ap.add_argument("parts", nargs="*", default=["accuracy", "overhead"])
    a = ap.parse_args()
    lines = []
    plotted = False
    if "accuracy" in a.parts:
        plotted = accuracy(a.out, a.target, a.bar, lines)
    if "overhead" in a.parts:
        overhead(a.out, lines)
    lp = os.path.join(a.out, "load.txt")
    if os.path.exists(lp):
        lines.append("Machine load (uptime) through the run:")
        lines += ["  " + l.rstrip() for l in open(lp)]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(a.out, "table.txt"), "w") as fh:
        fh.write(text)
    sys.stdout.write(text)
    print("\nCSV files%s and raw logs in %s" % (", PNG plots" if plotted else "", a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
