#!/usr/bin/python3
"""Turn the raw output of contrib/bench/charlm.sh into CSV files and a table.

Usage: charlm_report.py --out DIR [--loss-tol 0.02] [--bytes-ratio 100]
Reads DIR/raw/gossip/ (meta.json, end.json, t*.out, rc), DIR/raw/ddp/
(meta.json, end.json, w0.out, rc) and DIR/raw/alone/ (a*.out) where they
exist; writes DIR/evals.csv (every evaluation of every trainer),
DIR/summary.csv (one row per evaluation step) and DIR/table.txt (also
printed). The figures are defined in charlm.sh's header. Standard library
only.
"""
import argparse
import csv
import glob
import json
import os
import re
import statistics


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


def jfile(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def read_rc(d):
    rcs = {}
    try:
        with open(os.path.join(d, "rc")) as f:
            for line in f:
                if line.strip():
                    n, rc = line.split()
                    rcs[n] = int(rc)
    except OSError:
        pass
    return rcs


def trainers(d, prefix):
    """{index: [events]} of DIR/PREFIX*.out."""
    out = {}
    for p in glob.glob(os.path.join(d, prefix + "*.out")):
        m = re.search(r"(\d+)\.out$", p)
        if m:
            out[int(m.group(1))] = jlines(p)
    return dict(sorted(out.items()))


def f(v, fmt="%.4f", none="-"):
    return none if v is None else fmt % v


def mb(v):
    return "-" if v is None else "%.2f" % (v / 1e6)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--loss-tol", type=float, default=0.02)
    ap.add_argument("--bytes-ratio", type=float, default=100)
    a = ap.parse_args()
    raw = os.path.join(a.out, "raw")
    lines = []
    rows = []           # evals.csv

    # Every system's evaluations: {system: {trainer: {step: event}}}.
    systems = {}
    times = {}
    for system, prefix in (("gossip", "t"), ("ddp", "w"), ("alone", "a")):
        d = os.path.join(raw, system)
        if not os.path.isdir(d):
            continue
        meta, end = jfile(os.path.join(d, "meta.json")), jfile(os.path.join(d, "end.json"))
        per = {}
        for k, evs in trainers(d, prefix).items():
            ev = {e["step"]: e for e in evs if e.get("ev") == "eval"}
            if system == "ddp" and k != 0:
                continue                    # rank 0 logs for all
            per[k] = ev
            for s, e in sorted(ev.items()):
                rows.append(dict(system=system, trainer=k, step=s,
                                 t=e["t"] - meta.get("t0", e["t"]), val_loss=e["val_loss"],
                                 train_loss=e.get("train_loss"),
                                 bytes=e.get("bytes_sent", e.get("bytes"))))
            done = [e for e in evs if e.get("ev") == "done"]
            if done and system != "ddp":
                times.setdefault(system, []).append(done[-1].get("step_s"))
            if done and system == "ddp":
                times["ddp"] = [done[-1].get("step_s")]
                times["ddp_ss"] = done[-1].get("bytes_ss")
        systems[system] = per
        if meta and end:
            times[system + "_wall"] = end["t_end"] - meta["t0"]
        bad = {n: rc for n, rc in read_rc(d).items() if rc}
        if bad or os.path.exists(os.path.join(d, "timeout")):
            lines.append("%s: %s%s" % (system, "timed out; " if os.path.exists(
                os.path.join(d, "timeout")) else "", "exit statuses " + ", ".join(
                    "%s %d" % kv for kv in sorted(bad.items())) if bad else ""))

    with open(os.path.join(a.out, "evals.csv"), "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["system", "trainer", "step", "t", "val_loss",
                                           "train_loss", "bytes"])
        w.writeheader()
        w.writerows(rows)

    gossip, ddp, alone = systems.get("gossip", {}), systems.get("ddp", {}).get(0, {}), \
        systems.get("alone", {})
    peers = sorted(gossip)
    steps = sorted(set(ddp) | {s for ev in gossip.values() for s in ev})
    summary = []
    for s in steps:
        r = {"step": s, "ddp_val_loss": ddp[s]["val_loss"] if s in ddp else None,
             "ddp_bytes": ddp[s]["bytes"] if s in ddp else None}
        vals = [gossip[p][s]["val_loss"] for p in peers if s in gossip[p]]
        sent = [gossip[p][s].get("bytes_sent") for p in peers if s in gossip[p]]
        for p in peers:
            r["peer%d_val_loss" % p] = gossip[p][s]["val_loss"] if s in gossip[p] else None
        for p in peers:
            r["peer%d_bytes" % p] = gossip[p][s].get("bytes_sent") if s in gossip[p] else None
        r["peers_mean_val_loss"] = statistics.mean(vals) if vals else None
        r["peers_worst_val_loss"] = max(vals) if vals else None
        r["mean_over_ddp"] = (r["peers_mean_val_loss"] / r["ddp_val_loss"]
                              if vals and r["ddp_val_loss"] else None)
        r["worst_over_ddp"] = (r["peers_worst_val_loss"] / r["ddp_val_loss"]
                               if vals and r["ddp_val_loss"] else None)
        sent = [b for b in sent if b is not None]
        r["peers_max_bytes"] = max(sent) if sent else None
        r["ddp_over_peer_bytes"] = (r["ddp_bytes"] / r["peers_max_bytes"]
                                    if sent and r["ddp_bytes"] and r["peers_max_bytes"] else None)
        avals = [alone[p][s]["val_loss"] for p in sorted(alone) if s in alone[p]]
        r["alone_mean_val_loss"] = statistics.mean(avals) if avals else None
        summary.append(r)
    if summary:
        with open(os.path.join(a.out, "summary.csv"), "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(summary[0]))
            w.writeheader()
            w.writerows(summary)

    # The table.
    head = "%6s %8s " % ("step", "DDP") + " ".join("%8s" % ("peer%d" % p) for p in peers) + \
        " %8s %9s %9s" % ("mean", "mean/DDP", "worst/DDP") + \
        (" %8s" % "alone" if alone else "") + " %10s %12s %8s" % (
            "DDP MB", "peer max MB", "DDP/peer")
    lines.append("validation loss (nats per character) at equal steps; bytes sent per worker")
    lines.append(head)
    for r in summary:
        lines.append("%6d %8s " % (r["step"], f(r["ddp_val_loss"])) + " ".join(
            "%8s" % f(r["peer%d_val_loss" % p]) for p in peers) + " %8s %9s %9s" % (
            f(r["peers_mean_val_loss"]), f(r["mean_over_ddp"]), f(r["worst_over_ddp"])) +
            (" %8s" % f(r["alone_mean_val_loss"]) if alone else "") + " %10s %12s %8s" % (
            mb(r["ddp_bytes"]), mb(r["peers_max_bytes"]), f(r["ddp_over_peer_bytes"], "%.0f")))
    if summary:
        last = summary[-1]
        lines.append("")
        lines.append("bytes sent at step %d: DDP %s MB per worker; peers %s MB" % (
            last["step"], mb(last["ddp_bytes"]),
            " ".join(mb(last["peer%d_bytes" % p]) for p in peers)))
        if times.get("ddp_ss"):
            lines.append("DDP workers' TCP bytes_sent by ss at their end (cross-check): %s MB" %
                         " ".join(mb(b) if b and b >= 0 else "-" for b in times["ddp_ss"]))
        for system in ("gossip", "ddp", "alone"):
            st = [x for x in times.get(system, []) if x is not None]
            if st:
                lines.append("%s: %.3f s a step without evaluations (mean of trainers), "
                             "%s s wall for the system" % (
                                 system, statistics.mean(st),
                                 f(times.get(system + "_wall"), "%.0f")))
        lines.append("")
        ok_loss = last["worst_over_ddp"] is not None and \
            last["worst_over_ddp"] <= 1 + a.loss_tol
        lines.append("%s: every peer's validation loss within %g%% of DDP's at step %d "
                     "(worst peer %s, mean %s of DDP's)" % (
                         "PASS" if ok_loss else "FAIL", 100 * a.loss_tol, last["step"],
                         f(last["worst_over_ddp"]), f(last["mean_over_ddp"])))
        ok_bytes = last["ddp_over_peer_bytes"] is not None and \
            last["ddp_over_peer_bytes"] >= a.bytes_ratio
        lines.append("%s: DDP's bytes per worker >= %gx the most a peer sent, at step %d "
                     "(%sx)" % ("PASS" if ok_bytes else "FAIL", a.bytes_ratio, last["step"],
                                f(last["ddp_over_peer_bytes"], "%.0f")))
    text = "\n".join(lines) + "\n"
    with open(os.path.join(a.out, "table.txt"), "w") as fh:
        fh.write(text)
    print(text, end="")
    print("\nCSV files and raw logs in %s" % a.out)


if __name__ == "__main__":
    main()
