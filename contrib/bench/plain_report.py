#!/usr/bin/python3
"""Turn the raw output of contrib/bench/plain.sh into CSV files and a table.

Usage: plain_report.py --out DIR
Reads DIR/raw/SYSTEM-EPOCHS-REPEAT/ (run, I.out: torch_mnist.py's or
ddp_mnist.py's JSON lines); writes DIR/plain.csv, DIR/runs.csv and
DIR/table.txt (also printed). The definitions are in plain.sh's header.
Standard library only.
"""
import argparse
import csv
import glob
import json
import os
import statistics

SYSTEMS = ("alone", "ddp", "gossip")


def jlines(path):
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    rows, runs = [], []
    for d in sorted(glob.glob(os.path.join(a.out, "raw", "*-*-*"))):
        if not os.path.exists(os.path.join(d, "run")):
            continue
        with open(os.path.join(d, "run")) as f:
            sys_, e, r, secs, status, seed = f.read().strip().split(",")
        e, r, seed = int(e), int(r), int(seed)
        runs.append(dict(system=sys_, epochs=e, repeat=r, seconds=round(float(secs), 1),
                         status=status))
        for o in sorted(glob.glob(os.path.join(d, "*.out"))):
            peer = int(os.path.basename(o)[:-4])
            ev = [x for x in jlines(o) if x.get("ev") == "epoch"]
            done = [x for x in jlines(o) if x.get("ev") == "done"]
            last = ev[-1] if ev and ev[-1]["epoch"] == e else None
            rows.append(dict(system=sys_, epochs=e, repeat=r, peer=peer,
                             accuracy=last["accuracy"] if last else "",
                             loss=round(last["loss"], 4) if last else "",
                             seed=seed + peer,
                             seconds=round(done[0]["seconds"], 1) if done else ""))
    rows.sort(key=lambda x: (x["epochs"], SYSTEMS.index(x["system"]), x["repeat"], x["peer"]))
    runs.sort(key=lambda x: (x["epochs"], x["repeat"], SYSTEMS.index(x["system"])))
    for name, data in (("plain.csv", rows), ("runs.csv", runs)):
        if not data:
            continue
        with open(os.path.join(a.out, name), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(data[0]))
            w.writeheader()
            w.writerows(data)

    # Per system and epochs: per repeat mean/min/max over its processes (a
    # failed process, no accuracy, fails its repeat), then medians over repeats.
    stats = {}
    lines = ["accuracy on the 10k test set at the end of the last epoch; per repeat "
             "mean/min/max over the processes, median over repeats",
             "%-7s %6s %7s %8s %8s %8s  %s" % ("system", "epochs", "repeats", "mean", "min",
                                              "max", "per repeat means")]
    for e in sorted({x["epochs"] for x in rows}):
        for s in SYSTEMS:
            per = {}
            for x in rows:
                if x["system"] == s and x["epochs"] == e:
                    per.setdefault(x["repeat"], []).append(x["accuracy"])
            ok = [v for v in per.values() if v and all(acc != "" for acc in v)]
            if not per:
                continue
            if not ok:
                lines.append("%-7s %6d %7s  failed" % (s, e, "0/%d" % len(per)))
                continue
            means = [statistics.mean(v) for v in ok]
            st = dict(mean=statistics.median(means),
                      min=statistics.median(min(v) for v in ok),
                      max=statistics.median(max(v) for v in ok),
                      means=means, mins=[min(v) for v in ok])
            stats[(s, e)] = st
            lines.append("%-7s %6d %7s %8.4f %8.4f %8.4f  %s" % (
                s, e, "%d/%d" % (len(ok), len(per)), st["mean"], st["min"], st["max"],
                " ".join("%.4f" % m for m in means)))

    def check(what, e, base_sys, key, margin):
        g, b = stats.get(("gossip", e)), stats.get((base_sys, e))
        if g is None or b is None:
            lines.append("n/a   %s (no %s or gossip run of %d epochs)" % (what, base_sys, e))
            return
        lhs, rhs = g[key], b["mean"] + margin
        lines.append("%s  %s: %.4f vs %.4f" % ("PASS" if lhs >= rhs else "FAIL", what, lhs, rhs))

    lines.append("issue 31 (medians over repeats):")
    check("1 epoch: gossip mean >= alone mean + 0.01", 1, "alone", "mean", 0.01)
    check("1 epoch: every gossip peer >= alone mean", 1, "alone", "min", 0.0)
    check("3 epochs: gossip mean >= ddp - 0.005", 3, "ddp", "mean", -0.005)
    check("3 epochs: every gossip peer >= ddp - 0.01", 3, "ddp", "min", -0.01)
    if runs:
        lines.append("runs (wall s from start to the trainers' end): " + ", ".join(
            "%s/%d/%d %.0f%s" % (x["system"], x["epochs"], x["repeat"], x["seconds"],
                                 "" if x["status"] == "ok" else " " + x["status"])
            for x in runs))
    text = "\n".join(lines) + "\n"
    with open(os.path.join(a.out, "table.txt"), "w") as f:
        f.write(text)
    print(text, end="")


if __name__ == "__main__":
    main()
