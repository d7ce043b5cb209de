#!/usr/bin/python3
"""Turn the raw output of contrib/bench/gossip.sh into CSV files and a table.

Usage: gossip_report.py --out OUTDIR [--target 0.85] SYSTEM...
Reads OUTDIR/raw/SYSTEM/ (gossipd: meta.json, p*.log, status.jsonl, ss.txt,
ckpt*/; DDP: meta.json, w0.out) and writes OUTDIR/SYSTEM-evals.csv,
OUTDIR/SYSTEM-job.csv, OUTDIR/summary.csv, OUTDIR/table.md and, through
gnuplot (plot.py; skipped with a warning without it), for each scenario
(iid, skewed) OUTDIR/accuracy-steps-SCENARIO.png and
accuracy-bytes-SCENARIO.png: every peer's evaluations against its steps and
its bytes sent, every system of the scenario and DDP on one chart. The
definitions of the figures are in gossip.sh's header. Needs numpy only: the
gossipd peers' final checkpoints are evaluated on the whole test set, and
averaged, by ckpt_average.py (the job's average model, and each peer's
distance to it).
"""
import argparse
import bisect
import csv
import glob
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckpt_average import average, ckpt_accuracy  # noqa: E402
from plot import PALETTE, plot  # noqa: E402

EVAL_RE = re.compile(r"^(\d\d):(\d\d):(\d\d\.\d+) \S+\s+step (\d+) epoch (\d+): "
                     r"test loss (\S+) accuracy (\S+)")
START_RE = re.compile(r"^(\d\d):(\d\d):(\d\d\.\d+) \S+\s+peer \S+ training .* from step")
DONE_RE = re.compile(r"^(\d\d):(\d\d):(\d\d\.\d+) \S+\s+done: (\d+) steps in (\S+) s, "
                     r"test accuracy ([0-9.]+)")


def log_time(t0, hh, mm, ss):
    """A log line's local time of day as unix time, on t0's day (or the next)."""
    lt = time.localtime(t0)
    midnight = time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday, 0, 0, 0, 0, 0, -1))
    t = midnight + int(hh) * 3600 + int(mm) * 60 + float(ss)
    return t + 86400 if t < t0 - 3600 else t


def interp(ts, vs, t):
    """vs at time t: linear between samples, from 0 at the launch (t = 0)
    up to the first sample, the last sample after the last."""
    if not ts:
        return float("nan")
    i = bisect.bisect_right(ts, t)
    if i == len(ts):
        return vs[-1]
    t_a, v_a = (ts[i - 1], vs[i - 1]) if i > 0 else (0.0, 0.0)
    if ts[i] <= t_a:
        return vs[i]
    return v_a + (vs[i] - v_a) * max(0.0, t - t_a) / (ts[i] - t_a)


SUSPECTS_AT_EXIT = re.compile(r"trust: suspects at exit: (.*)$")
# Slices a member needs to send before bad ones can make it suspect
# (trust.c's TRUST_ALPHA: three): fewer, and a pair is not judged.
JUDGED_SLICES = 3


def suspects_at_exit(d, p):
    """The addresses p's log names as suspect when it exited, or None
    when it has no such line (killed, trust off, or an older build)."""
    path = os.path.join(d, "p%d.log" % p)
    if not os.path.exists(path):
        return None
    found = None
    with open(path, errors="replace") as f:
        for line in f:
            m = SUSPECTS_AT_EXIT.search(line)
            if m:
                found = {} if m.group(1) == "none" else {
                    e.split(" ", 1)[0]: 1.0 for e in m.group(1).split("; ")}
    return found


TRAFFIC_AT_EXIT = re.compile(r"traffic: sent (\d+) bytes")


def sent_at_exit(d, p):
    """The bytes p's log says it sent in all (its exit line), or None."""
    path = os.path.join(d, "p%d.log" % p)
    found = None
    if os.path.exists(path):
        with open(path, errors="replace") as f:
            for line in f:
                m = TRAFFIC_AT_EXIT.search(line)
                if m:
                    found = int(m.group(1))
    return found


def suspicion_f1(d, meta):
    """How well the honest peers' suspicion (>= 0.5) picks out the faulty
    members: F1 over (honest observer, other member) pairs. Each observer's
    verdict is what its log names as suspect at exit, or else its latest
    look (`peers`, in peers.txt) that listed every member. A pair counts
    even where the observer never exchanged with the member, so the F1 of
    the members, each flagged when at least one honest observer suspects
    it, is given too (f1_members), and the F1 over the pairs judged, where
    the observer's latest look counts JUDGED_SLICES or more slices of the
    member (f1_judged, None without such a look; judged: how many). Also
    the pairs' counts. None without faulty members or verdicts."""
    faulty, n, base = set(meta["faulty"]), meta["peers"], meta["base"]
    latest, slices = {}, {}
    path = os.path.join(d, "peers.txt")
    if not faulty:
        return None
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    _, p, js = line.split(" ", 2)
                    listed = json.loads(js)["peers"]
                except (ValueError, KeyError):
                    continue
                seen = {e["addr"]: e.get("suspicion", 0) for e in listed if not e["self"]}
                if int(p) not in faulty and len(seen) >= n - 1:
                    latest[int(p)] = seen
                    slices[int(p)] = {int(e["addr"].rsplit(":", 1)[1]) - base:
                                      e.get("slices", 0) for e in listed if not e["self"]}
    for p in range(n):
        at_exit = suspects_at_exit(d, p) if p not in faulty else None
        if at_exit is not None:
            latest[p] = at_exit
    tp = fp = fn = 0
    judged = [0, 0, 0]      # tp, fp, fn over the pairs judged
    by_anyone = set()
    for p, seen in latest.items():
        flagged = {int(a.rsplit(":", 1)[1]) - base for a, sus in seen.items() if sus >= 0.5}
        by_anyone |= flagged
        for q in range(n):
            if q == p:
                continue
            bad = q in faulty
            verdict = (bad and q in flagged, q in flagged and not bad, bad and q not in flagged)
            tp, fp, fn = tp + verdict[0], fp + verdict[1], fn + verdict[2]
            if slices.get(p, {}).get(q, 0) >= JUDGED_SLICES:
                judged = [j + v for j, v in zip(judged, verdict)]
    if not latest:
        return None
    mtp = len(by_anyone & faulty)
    mfp, mfn = len(by_anyone - faulty), len(faulty - by_anyone)
    return dict(f1=f1_of(tp, fp, fn), tp=tp, fp=fp, fn=fn, observers=len(latest),
                f1_members=f1_of(mtp, mfp, mfn),
                f1_judged=f1_of(*judged) if sum(judged) else None, judged=sum(judged))


def f1_of(tp, fp, fn):
    return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 1.0


def gossip_system(name, d, meta):
    t0 = meta["t0"]
    n = meta["peers"]
    # faulty members (contrib/bench/robust.sh): every figure is the
    # honest peers' alone
    honest = [p for p in range(n) if p not in set(meta.get("faulty", []))]
    evals, starts, done = [], [], {}
    for p in honest:
        with open(os.path.join(d, "p%d.log" % p), errors="replace") as f:
            for line in f:
                m = EVAL_RE.match(line)
                if m:
                    evals.append((log_time(t0, *m.group(1, 2, 3)) - t0, p, int(m.group(4)),
                                  float(m.group(7))))
                    continue
                m = START_RE.match(line)
                if m:
                    starts.append(log_time(t0, *m.group(1, 2, 3)) - t0)
                    continue
                m = DONE_RE.match(line)
                if m:
                    done[p] = (int(m.group(4)), float(m.group(6)))
    # Per-peer byte counters against time, from the status polls.
    polls = {p: ([], [], []) for p in range(n)}
    pid_of = {}
    with open(os.path.join(d, "pids")) as f:
        for line in f:
            i, pid = line.split()
            pid_of[int(pid)] = int(i)
    last_status = {}
    with open(os.path.join(d, "status.txt")) as f:
        for line in f:
            try:
                t, p, js = line.split(" ", 2)
                s = json.loads(js)
            except ValueError:
                continue
            if not s.get("ok"):
                continue
            p = int(p)
            if p not in honest:
                continue
            ts, total, gos = polls[p]
            ts.append(float(t) - t0)
            total.append(float(s["bytes_sent"]))
            by = s.get("bytes_sent_by_type", {})
            gos.append(float(sum(v for k, v in by.items() if k.startswith("gossip"))))
            last_status[p] = s
    # ss cross-check: kernel TCP bytes_sent of each peer's open sockets
    # over its own counter, at every ss sample taken while the peer was
    # being polled (median: sockets closed while leaving undercount).
    ss_ratio = []
    if os.path.exists(os.path.join(d, "ss.txt")):
        with open(os.path.join(d, "ss.txt")) as f:
            for line in f:
                t, pid, b = line.split()
                p = pid_of.get(int(pid))
                if p is None:
                    continue
                t = float(t) - t0
                ts, total, _ = polls[p]
                if ts and ts[0] <= t <= ts[-1]:
                    c = interp(ts, total, t)
                    if c > 0:
                        ss_ratio.append(float(b) / c)
    ss_ratio.sort()
    ss_ratio = [ss_ratio[len(ss_ratio) // 2]] if ss_ratio else []
    evals.sort()
    rows = []
    for t, p, step, acc in evals:
        ts, total, gos = polls[p]
        rows.append((t, p, step, acc, interp(ts, total, t), interp(ts, gos, t)))
    finals, final_paths = {}, []
    for p in honest:
        ck = sorted(glob.glob(os.path.join(d, "ckpt%d" % p, "ckpt-*.gdc")),
                    key=lambda s: int(re.findall(r"(\d+)\.gdc$", s)[0]))
        if ck:
            finals[p] = ckpt_accuracy(ck[-1])
            final_paths.append(ck[-1])
    consensus = average(final_paths) if len(final_paths) > 1 else None
    final_bytes = [last_status[p]["bytes_sent"] for p in last_status]
    exch = [last_status[p]["exchanges"] for p in last_status]
    steps = [last_status[p]["step"] for p in last_status]
    def bytes_at(t):
        tot = [interp(polls[p][0], polls[p][1], t) for p in honest if polls[p][0]]
        gos = [interp(polls[p][0], polls[p][2], t) for p in honest if polls[p][0]]
        return sum(tot) / len(tot), sum(gos) / len(gos)
    sent = [b for b in (sent_at_exit(d, p) for p in honest) if b is not None]
    return dict(n=len(honest), rows=rows, bytes_at=bytes_at, trust=suspicion_f1(d, meta),
                sent_at_exit=sent,
                start=min(starts) if starts else float("nan"),
                finals=finals, consensus=consensus, done=done, ss_ratio=ss_ratio,
                final_bytes_polled=final_bytes, exchanges=exch, steps_polled=steps)


def ddp_system(name, d, meta):
    t0 = meta["t0"]
    rows, start, final = [], float("nan"), None
    with open(os.path.join(d, "w0.out")) as f:
        for line in f:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e["ev"] == "start":
                start = e["t"] - t0
            elif e["ev"] == "eval":
                rows.append((e["t"] - t0, 0, e["step"], e["accuracy"], e["bytes"], e["bytes"]))
            elif e["ev"] == "done":
                final = e
    finals = {0: (final["steps"], final["accuracy_full"])} if final else {}
    ss = final["bytes_ss"] if final else []
    ss_ratio = [b / final["bytes"] for b in ss if b >= 0] if final else []
    def bytes_at(t):
        """Analytic bytes at the evaluation logged at or after t."""
        for rt, _, _, _, b, g in rows:
            if rt >= t - 1e-9:
                return b, g
        return float("nan"), float("nan")
    return dict(n=1, rows=rows, bytes_at=bytes_at, start=start, finals=finals, done={}, ss_ratio=ss_ratio,
                final_bytes_polled=[final["bytes"]] if final else [], exchanges=[],
                steps_polled=[final["steps"]] if final else [])


def job_curve(r):
    """(t, mean, min) of the peers' latest evaluations, at every evaluation
    once every peer has evaluated."""
    latest, curve = {}, []
    for t, p, _, acc, _, _ in r["rows"]:
        latest[p] = acc
        if len(latest) < r["n"]:
            continue
        accs = list(latest.values())
        curve.append((t, sum(accs) / len(accs), min(accs)))
    return curve


def steps_to(r, target):
    """The first step at which every peer has evaluated and their mean is
    at least target (DDP: its one model's); None if never."""
    at = {}
    for _, p, step, acc, _, _ in r["rows"]:
        at.setdefault(step, {})[p] = acc
    return next((step for step in sorted(at) if len(at[step]) == r["n"] and
                 sum(at[step].values()) / r["n"] >= target), None)


def scenario(meta):
    """iid or skewed: a gossipd system's shards (DDP's are iid, and it is
    drawn in both scenarios' plots as the reference)."""
    opts = meta["options"].split()
    part = opts[opts.index("--partition") + 1] if "--partition" in opts else "iid"
    return "iid" if part == "iid" else "skewed"


def plots(out, res):
    """OUTDIR/accuracy-steps-SCENARIO.png and accuracy-bytes-SCENARIO.png:
    every evaluation of every gossipd peer of the scenario's systems (one
    colour a system, one line a peer) and DDP's (black, thick)."""
    ddp = [s for s, r in res.items() if r["meta"]["kind"] == "ddp"]
    written = False
    for sc in ("iid", "skewed"):
        systems = [s for s, r in res.items()
                   if r["meta"]["kind"] != "ddp" and scenario(r["meta"]) == sc]
        if not systems:
            continue
        steps, nbytes, styles = {}, {}, {}
        for i, s in enumerate(systems + ddp):
            r = res[s]
            is_ddp = r["meta"]["kind"] == "ddp"
            peers = sorted({p for _, p, _, _, _, _ in r["rows"]})
            for p in peers:
                lab = "%s p%d" % (s, p)
                ev = [x for x in r["rows"] if x[1] == p]
                steps[lab] = [(step, acc) for _, _, step, acc, _, _ in ev]
                nbytes[lab] = [(b, acc) for _, _, _, acc, b, _ in ev]
                styles[lab] = dict(
                    color="#000000" if is_ddp else PALETTE[i % len(PALETTE)],
                    width=3 if is_ddp else 1.2,
                    key=None if p != peers[0] else (
                        "%s: DDP, %d workers, one model%s" % (
                            s, r["meta"]["peers"], "" if sc == "iid" else " (iid shards)")
                        if is_ddp else "%s: gossipd, %d peers" % (s, len(peers))))
        where = "iid shards" if sc == "iid" else "label-skewed shards"
        ylabel = "test accuracy (periodic evaluation)"
        written |= plot(os.path.join(out, "accuracy-steps-%s.png" % sc), steps,
                        "gossip.sh, %s: accuracy against steps, every peer" % where,
                        "step (of the peer; DDP: of every worker)", ylabel, styles=styles)
        written |= plot(os.path.join(out, "accuracy-bytes-%s.png" % sc), nbytes,
                        "gossip.sh, %s: accuracy against bytes sent, every peer" % where,
                        "bytes sent by the peer, log scale (gossipd: its bytes_sent "
                        "counter; DDP: all-reduce volume per worker)",
                        ylabel, logx=True, styles=styles)
    return written


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--target", type=float, default=0.85)
    ap.add_argument("systems", nargs="+")
    a = ap.parse_args()
    res = {}
    for s in a.systems:
        d = os.path.join(a.out, "raw", s)
        with open(os.path.join(d, "meta.json")) as f:
            meta = json.load(f)
        r = (ddp_system if meta["kind"] == "ddp" else gossip_system)(s, d, meta)
        r["meta"] = meta
        r["timeout"] = os.path.exists(os.path.join(d, "timeout"))
        rcs = []
        if os.path.exists(os.path.join(d, "rc")):
            with open(os.path.join(d, "rc")) as f:
                rcs = [int(x.split()[1]) for x in f if x.strip()]
        r["failed"] = sum(1 for x in rcs if x != 0)
        res[s] = r

    summary = []
    for s, r in res.items():
        with open(os.path.join(a.out, s + "-evals.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["system", "peer", "t_s", "step", "accuracy", "bytes_sent", "gossip_bytes_sent"])
            for t, p, step, acc, b, g in r["rows"]:
                w.writerow([s, p, "%.3f" % t, step, "%.4f" % acc, "%.0f" % b, "%.0f" % g])
        curve = job_curve(r)
        bytes_at = r["bytes_at"]
        with open(os.path.join(a.out, s + "-job.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["system", "t_s", "mean_accuracy", "min_accuracy",
                        "bytes_sent_per_peer", "gossip_bytes_sent_per_peer"])
            for t, mean, mn in curve:
                b, g = bytes_at(t)
                w.writerow([s, "%.3f" % t, "%.4f" % mean, "%.4f" % mn, "%.0f" % b, "%.0f" % g])
        t_mean = next((t for t, mean, _ in curve if mean >= a.target), None)
        t_all = next((t for t, _, mn in curve if mn >= a.target), None)
        b_mean = bytes_at(t_mean) if t_mean is not None else (None, None)
        fa = [acc for _, acc in r["finals"].values()]
        last_acc = {}
        for _, p, _, acc, _, _ in r["rows"]:
            last_acc[p] = acc
        summary.append(dict(
            system=s, kind=r["meta"]["kind"], options=r["meta"]["options"],
            peers=r["meta"]["peers"] - len(r["meta"].get("faulty", [])), epochs=r["meta"]["epochs"],
            final_acc_min=min(fa) if fa else None,
            final_acc_mean=sum(fa) / len(fa) if fa else None,
            final_ckpts=len(fa),
            avg_model_acc=r["consensus"]["avg_acc"] if r.get("consensus") else None,
            dist_to_avg_mean=(sum(x[2] for x in r["consensus"]["peers"]) /
                              len(r["consensus"]["peers"]) if r.get("consensus") else None),
            dist_to_avg_max=(max(x[2] for x in r["consensus"]["peers"])
                             if r.get("consensus") else None),
            last_eval_min=min(last_acc.values()) if last_acc else None,
            last_eval_mean=sum(last_acc.values()) / len(last_acc) if last_acc else None,
            t_target_mean=t_mean, t_target_all=t_all, steps_target=steps_to(r, a.target),
            t_train_start=r["start"],
            bytes_target=b_mean[0], gossip_bytes_target=b_mean[1],
            final_bytes_polled_mean=(sum(r["final_bytes_polled"]) / len(r["final_bytes_polled"])
                                     if r["final_bytes_polled"] else None),
            exchanges_mean=(sum(r["exchanges"]) / len(r["exchanges"]) if r["exchanges"] else None),
            sent_at_exit_mean=(sum(r["sent_at_exit"]) / len(r["sent_at_exit"])
                               if r.get("sent_at_exit") else None),
            ss_over_counter=(sum(r["ss_ratio"]) / len(r["ss_ratio"]) if r["ss_ratio"] else None),
            failed=r["failed"], timeout=r["timeout"],
            faulty=len(r["meta"].get("faulty", [])),
            suspicion_f1=r["trust"]["f1"] if r.get("trust") else None,
            suspicion_f1_members=r["trust"]["f1_members"] if r.get("trust") else None,
            suspicion_f1_judged=r["trust"]["f1_judged"] if r.get("trust") else None))
    fields = list(summary[0].keys()) + ["bytes_ratio_ddp_over_this", "time_ratio_this_over_ddp",
                                        "steps_ratio_this_over_ddp"]
    ddp = next((x for x in summary if x["kind"] == "ddp"), None)
    for x in summary:
        x["bytes_ratio_ddp_over_this"] = (ddp["bytes_target"] / x["bytes_target"]
                                          if ddp and ddp["bytes_target"] and x["bytes_target"] else None)
        x["time_ratio_this_over_ddp"] = (x["t_target_mean"] / ddp["t_target_mean"]
                                         if ddp and ddp["t_target_mean"] and x["t_target_mean"] else None)
        x["steps_ratio_this_over_ddp"] = (x["steps_target"] / ddp["steps_target"]
                                          if ddp and ddp["steps_target"] and x["steps_target"]
                                          else None)
    with open(os.path.join(a.out, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for x in summary:
            w.writerow({k: ("" if v is None else ("%.6g" % v if isinstance(v, float) else v))
                        for k, v in x.items()})

    def fmt(v, f="%.2f", none="not reached"):
        return none if v is None else f % v

    def mb(v):
        return "not reached" if v is None else ("%.3g MB" % (v / 1e6))

    lines = ["| system | peers | final acc. min / mean (full test set) | time to %.2f from launch (s) "
             "| from training start (s) | bytes/peer to %.2f | DDP bytes / these "
             "| time / DDP's (launch) | time / DDP's (training) "
             "| steps to %.2f (/ DDP's) "
             "| average model's acc. | distance to it, mean / max |" % (a.target, a.target, a.target),
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    ts_ddp = (ddp["t_target_mean"] - ddp["t_train_start"]
              if ddp and ddp["t_target_mean"] is not None else None)
    for x in summary:
        opts = x["options"].split()
        part = opts[opts.index("--partition") + 1] if "--partition" in opts else "iid"
        if x["kind"] == "ddp":
            label = "PyTorch DDP (gloo, %s)" % x["options"].replace("gloo ", "")
        else:
            mode = opts[opts.index("--mode") + 1] if "--mode" in opts else "(defaults)"
            dens = opts[opts.index("--density") + 1] if "--density" in opts else None
            label = "gossipd %s%s, %s" % (
                mode, " %g%%" % (100 * float(dens)) if dens and mode != "dense" else "", part)
            rest = " ".join(o for o in opts if o not in ("--mode", mode, "--partition", part,
                                                         "--density", dens))
            if rest:
                label += ", " + rest
        t = x["t_target_mean"]
        t_tr = t - x["t_train_start"] if t is not None else None
        acc = ("n/a" if x["final_acc_min"] is None else
               "%.4f / %.4f" % (x["final_acc_min"], x["final_acc_mean"]))
        note = ""
        if x["failed"] or x["timeout"]:
            note = " (%d failed%s)" % (x["failed"], ", timed out" if x["timeout"] else "")
        lines.append("| %s%s | %d | %s | %s | %s | %s | %s | %s | %s | %s%s | %s | %s |" % (
            label, note, x["peers"], acc, fmt(t, "%.1f"), fmt(t_tr, "%.1f"),
            mb(x["bytes_target"]), fmt(x["bytes_ratio_ddp_over_this"], "%.0fx", "-"),
            fmt(x["time_ratio_this_over_ddp"], "%.2f", "-"),
            fmt(t_tr / ts_ddp if t_tr is not None and ts_ddp else None, "%.2f", "-"),
            fmt(x["steps_target"], "%d"),
            fmt(x["steps_ratio_this_over_ddp"], " (%.2f)", ""),
            fmt(x["avg_model_acc"], "%.4f", "-"),
            "-" if x["dist_to_avg_mean"] is None else
            "%.3f / %.3f" % (x["dist_to_avg_mean"], x["dist_to_avg_max"])))
    table = "\n".join(lines) + "\n"
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(table)
    sys.stdout.write(table)
    plotted = plots(a.out, res)
    print("\nCSV files%s and raw logs in %s (summary.csv has the every-peer time, "
          "gossip-only bytes and the ss cross-check)" % (", PNG plots" if plotted else "", a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
