#!/usr/bin/python3
"""Gather the output of contrib/bench/report into plots and summary.md.

Usage: summary.py --out OUTDIR [--target 0.85]
Reads OUTDIR/suites.txt (suite, exit code), and per testbed or loopback suite
OUTDIR/SUITE/summary.csv and SUITE-job.csv files written by gossip_report.py;
writes OUTDIR/SUITE-time.png and SUITE-bytes.png (job mean accuracy against
seconds from training start and against bytes sent per peer, one line per
system) with gnuplot, and OUTDIR/summary.md (also printed). Times compared
are from the start of training (first step of any peer; DDP: after its
rendezvous), so that process start-up, which on 2 cores varies by seconds
between runs, does not decide a ratio; the from-launch figures are in each
suite's table.md.
"""
import argparse
import csv
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import gossip_report  # noqa: E402 (log parsing shared with the per-suite tables)


def rows(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def fnum(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def base(system):
    """Policy or system name without the -rK repetition suffix."""
    return re.sub(r"-r\d+$", "", system)


def plot(out, suite, systems, target):
    """Two PNGs for one suite; returns their file names (or [] without gnuplot).
    Repetitions of a system share its colour and its key entry."""
    if not shutil.which("gnuplot"):
        return []
    start = {s["system"]: fnum(s["t_train_start"]) or 0.0 for s in systems}
    series = []
    for s in systems:
        name = s["system"]
        job = rows(os.path.join(out, suite, name + "-job.csv"))
        if not job:
            continue
        dat = os.path.join(out, suite, name + "-plot.dat")
        with open(dat, "w") as f:
            for r in job:
                f.write("%s %s %s\n" % (float(r["t_s"]) - start[name], r["mean_accuracy"],
                                        float(r["bytes_sent_per_peer"]) / 1e6))
        series.append((base(name), dat))
    if not series:
        return []
    pngs = []
    for kind, col, xl in (("time", 1, "seconds from training start"),
                          ("bytes", 3, "MB sent per peer (mean)")):
        png = "%s-%s.png" % (suite, kind)
        colours, parts = {}, []
        for n, d in series:
            first = n not in colours
            colours.setdefault(n, len(colours) + 1)
            parts.append("'%s' using %d:2 with lines lw 2 lc %d %s" % (
                d, col, colours[n], "title '%s'" % n if first else "notitle"))
        lines = ", ".join(parts)
        script = ("set terminal pngcairo size 800,500\nset output '%s'\n"
                  "set title '%s: job mean test accuracy (2000 samples)'\n"
                  "set xlabel '%s'\nset ylabel 'accuracy'\nset yrange [0.6:0.9]\n"
                  "set key bottom right\nset grid\n%s"
                  "plot %s, %g with lines dt 2 lc rgb 'gray' title 'target'\n" % (
                      os.path.join(out, png), suite, xl,
                      "set logscale x\n" if kind == "bytes" else "", lines, target))
        r = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
        if r.returncode == 0:
            pngs.append(png)
        else:
            sys.stderr.write("summary.py: gnuplot failed for %s: %s" % (png, r.stderr))
    return pngs


def last_start(out, suite, system):
    """Seconds from launch to the moment the LAST gossipd peer began training
    (None for DDP, whose workers start together after the rendezvous)."""
    d = os.path.join(out, suite, "raw", system)
    try:
        with open(os.path.join(d, "meta.json")) as f:
            meta = json.load(f)
    except OSError:
        return None
    if meta.get("kind") != "gossipd":
        return None
    ts = []
    for p in range(meta["peers"]):
        with open(os.path.join(d, "p%d.log" % p), errors="replace") as f:
            for line in f:
                m = gossip_report.START_RE.match(line)
                if m:
                    ts.append(gossip_report.log_time(meta["t0"], *m.group(1, 2, 3)) - meta["t0"])
                    break
    return max(ts) if len(ts) == meta["peers"] else None


def t_train(s):
    t, st = fnum(s["t_target_mean"]), fnum(s["t_train_start"])
    return t - st if t is not None and st is not None else None


def t_all(s):
    t, st = fnum(s["t_target_mean"]), s.get("t_last_start")
    if st is None:
        st = fnum(s["t_train_start"])
    return t - st if t is not None and st is not None else None


def fmt(v, f="%.2f"):
    return "not reached" if v is None else f % v


def verdict(r, goal):
    if r is None:
        return "n/a"
    if goal is None:
        return "for comparison, no goal"
    return "goal <= %.2f: %s" % (goal, "met" if r <= goal else "NOT met")


def compare(md, systems, a, b, goal, what):
    """Table of the per-system medians of a and b and the ratio a/b of time
    to target (goal None: shown for comparison only)."""
    groups = {}
    for s in systems:
        if base(s["system"]) in (a, b):
            groups.setdefault(base(s["system"]), []).append(s)
    md.append("| system | runs | time to target from first peer's training start, s (each run) "
              "| median | from last peer's training start, s (each run) | median "
              "| final acc. mean (full test set) | runs failed or timed out |")
    md.append("|---|---|---|---|---|---|---|---|")
    med, med_all = {}, {}
    for g, ss in groups.items():
        ts = [t_train(s) for s in ss]
        ok = [t for t in ts if t is not None]
        med[g] = statistics.median(ok) if len(ok) == len(ts) and ok else None
        ta = [t_all(s) for s in ss]
        ok = [t for t in ta if t is not None]
        med_all[g] = statistics.median(ok) if len(ok) == len(ta) and ok else None
        fa = [fnum(s["final_acc_mean"]) for s in ss if fnum(s["final_acc_mean"]) is not None]
        bad = sum(1 for s in ss if s["failed"] not in ("", "0") or s["timeout"] == "True")
        md.append("| %s | %d | %s | %s | %s | %s | %s | %d |" % (
            g, len(ss), ", ".join(fmt(t, "%.1f") for t in ts), fmt(med[g], "%.1f"),
            ", ".join(fmt(t, "%.1f") for t in ta), fmt(med_all[g], "%.1f"),
            ", ".join("%.4f" % x for x in fa) or "n/a", bad))
    r = med[a] / med[b] if med.get(a) and med.get(b) else None
    md.append("")
    md.append("**%s: time to target %s / %s = %s** from the first peer's start (%s)" % (
        what, a, b, fmt(r), verdict(r, goal)))
    r = med_all[a] / med_all[b] if med_all.get(a) and med_all.get(b) else None
    md.append("")
    md.append("**%s: time to target %s / %s = %s** from the last peer's start (%s)" % (
        what, a, b, fmt(r), verdict(r, goal)))
    md.append("")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--target", type=float, default=0.85)
    a = ap.parse_args()
    out = a.out
    md = ["# Benchmark report", ""]
    suites = {}
    if os.path.exists(os.path.join(out, "suites.txt")):
        with open(os.path.join(out, "suites.txt")) as f:
            for line in f:
                n, rc = line.split()
                suites[n] = int(rc)
    md.append("| suite | exit code | output |")
    md.append("|---|---|---|")
    for n, rc in suites.items():
        md.append("| %s | %d%s | %s/ |" % (n, rc, "" if rc == 0 else " (FAILED)", n))
    md.append("")

    for suite, title in (("hetero", "Testbed: 4 fast + 4 slow (50x) links, adaptive vs random"),
                         ("twosite", "Testbed: two sites of 4, 100 Mbit/s inside, 2 Mbit/s between"),
                         ("uniform", "Testbed: every link ~100 Mbit/s, gossipd saps 1% vs PyTorch DDP"),
                         ("gossip", "Loopback: saps vs dense vs DDP")):
        systems = rows(os.path.join(out, suite, "summary.csv"))
        if not systems:
            continue
        md.append("## " + title)
        md.append("")
        names = {base(s["system"]) for s in systems}
        for s in systems:
            s["t_last_start"] = last_start(out, suite, s["system"])
        if suite in ("hetero", "twosite") and {"adaptive", "random"} <= names:
            compare(md, systems, "adaptive", "random", 0.6,
                    "adaptive vs random, paced (--lag)")
        if suite == "hetero" and {"adaptive-free", "random-free"} <= names:
            compare(md, systems, "adaptive-free", "random-free", None,
                    "adaptive vs random, free-running (--lag 0)")
        if suite == "uniform" and {"saps", "ddp"} <= names:
            compare(md, systems, "saps", "ddp", 0.5, "gossip saps 1% vs DDP")
        md.append("Per-run table (gossip_report.py; `from launch` includes process start-up):")
        md.append("")
        with open(os.path.join(out, suite, "table.md")) as f:
            md.append(f.read())
        for png in plot(out, suite, systems, a.target):
            md.append("![%s](%s)" % (png, png))
        md.append("")

    for suite, csvname in (("trainer", "trainer.csv"), ("transport", "transport.csv")):
        p = os.path.join(out, suite, csvname)
        if os.path.exists(p):
            md.append("## %s (CSV: %s/%s; see its log.txt for the table)" % (suite, suite, csvname))
            md.append("")
            md.append("```")
            with open(os.path.join(out, suite, "log.txt"), errors="replace") as f:
                md.extend(line.rstrip() for line in f.readlines()[-25:])
            md.append("```")
            md.append("")
    text = "\n".join(md) + "\n"
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
