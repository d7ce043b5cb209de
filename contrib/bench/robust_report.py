#!/usr/bin/python3
"""The table of contrib/bench/robust.sh: each run against the honest job.

Usage: robust_report.py --out OUTDIR --seeds "1 2 3" RUN...
Reads OUTDIR/sSEED/RUN/summary.csv (contrib/bench/gossip_report.py) and
writes OUTDIR/table.md (also printed). Per run, medians over the seeds:
the honest peers' final accuracy (min and mean over them, full test set),
the worst honest peer's gap to the honest job's worst peer in points (per
seed, then the median and the worst seed), the suspicion F1 (faulty jobs:
over honest observer and member pairs, over the pairs judged, where the
observer had 3 or more slices of the member, and over members),
and the honest peers' time and bytes per peer to TARGET, and bytes sent in
all (their exit lines), against the honest job's in the same seed: in
jobs of a few tens of seconds, polled once a second, bytes to TARGET swing
with when the poll fell, so the whole job's bytes are the steadier
comparison.
"""
import argparse
import csv
import os
import statistics
import sys


def num(v):
    return float(v) if v not in (None, "") else None


def load(out, seed, run):
    path = os.path.join(out, "s%s" % seed, run, "summary.csv")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        rows = list(csv.DictReader(f))
    return rows[0] if rows else None


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(v, f="%.4f"):
    return "-" if v is None else f % v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seeds", required=True)
    ap.add_argument("runs", nargs="+")
    a = ap.parse_args()
    seeds = a.seeds.split()
    base = {s: load(a.out, s, "honest") for s in seeds}
    lines = ["| run | faulty | honest peers' final acc. min / mean | worst peer vs honest job "
             "(points: median, worst seed) | suspicion F1: pairs / judged / members "
             "| time to target / honest's | bytes to target / honest's | bytes in all / honest's "
             "| failed runs |",
             "|---|---|---|---|---|---|---|---|---|"]
    for run in a.runs:
        mins, means, gaps, f1s, jf1s, mf1s, tr, br, ar = [], [], [], [], [], [], [], [], []
        faulty = failed = 0
        for s in seeds:
            r, b = load(a.out, s, run), base[s]
            if r is None or r.get("failed", "0") not in ("0", "") or r.get("timeout") == "True":
                failed += 1
            if r is None:
                continue
            faulty = int(r.get("faulty") or 0)
            mins.append(num(r["final_acc_min"]))
            means.append(num(r["final_acc_mean"]))
            f1s.append(num(r.get("suspicion_f1")))
            jf1s.append(num(r.get("suspicion_f1_judged")))
            mf1s.append(num(r.get("suspicion_f1_members")))
            if b is not None:
                if num(r["final_acc_min"]) is not None and num(b["final_acc_min"]) is not None:
                    gaps.append(100 * (num(r["final_acc_min"]) - num(b["final_acc_min"])))
                for key, acc in (("t_target_mean", tr), ("bytes_target", br),
                                 ("sent_at_exit_mean", ar)):
                    x, y = num(r.get(key)), num(b.get(key))
                    acc.append(x / y if x is not None and y else None)
        lines.append("| %s | %d | %s / %s | %s, %s | %s / %s / %s | %s | %s | %s | %d of %d |" % (
            run, faulty, fmt(med(mins)), fmt(med(means)), fmt(med(gaps), "%+.2f"),
            fmt(min(gaps) if gaps else None, "%+.2f"), fmt(med(f1s), "%.2f"),
            fmt(med(jf1s), "%.2f"), fmt(med(mf1s), "%.2f"),
            fmt(med(tr), "%.2f"), fmt(med(br), "%.2f"), fmt(med(ar), "%.2f"), failed,
            len(seeds)))
    table = "\n".join(lines) + "\n"
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(table)
    sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
