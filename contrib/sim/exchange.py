#!/usr/bin/python3
"""Runs contrib/sim/exchange_sim at several sizes, random against adaptive
selection on the same seed and network (three sites, 10:1 bandwidth), and
prints markdown tables; with --plot, a PNG of the consensus distance
against time for every size (gnuplot).

    contrib/sim/exchange.py [--sizes 100,1000,10000] [--plot contrib/sim/exchange.png]

Every row is one run of the simulator with its defaults (exchange_sim -h)
and the row's own options. At 10,000 peers each pick sees --view 200
others drawn afresh (select's cost is peers x links used per pick; at
1,000 peers --view 200 gives the figures of a full view)."""
import argparse
import concurrent.futures
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SIM = os.path.join(HERE, "exchange_sim")

# (label, options): the rows of every size
VARIANTS = [
    ("none", ["--interval", "1000000000"]),
    ("random", ["--select", "random"]),
    ("adaptive", ["--select", "adaptive"]),
    ("adaptive, stale_after 60", ["--select", "adaptive", "--stale-after", "60"]),
]


def run(n, opts, series, args):
    cmd = [SIM, "-n", str(n), "--seed", str(args.seed), "--duration", str(args.duration)] + opts
    if n > args.full_view_max:
        cmd += ["--view", str(args.view)]
    out = subprocess.run(["nice", "-n", "19"] + cmd + ["--series", series], check=True,
                         capture_output=True, text=True).stdout
    kv = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    kv["cmd"] = " ".join([os.path.relpath(SIM)] + cmd[1:])
    return kv


def table(rows):
    cols = [("peers", "peers"), ("select", "label"), ("exchanges/peer", "exchanges_per_peer"),
            ("exchanges/s", "exchanges_per_s"), ("MB/peer/s", "mb"),
            ("same site", "same_site_share"), ("distance start", "cd_start"),
            ("distance end", "cd_end"), ("mean, last 1/4", "cd_floor"),
            ("daemon's figure", "daemon_distance_end"),
            ("s to 0.3x", "time_to_level_s"), ("exch/peer to 0.3x", "exchanges_per_peer_at_level"),
            ("cpu s", "cpu_s"), ("MiB", "maxrss_mib")]
    print("| " + " | ".join(c[0] for c in cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        r["mb"] = "%.2f" % (float(r["bytes_per_peer_s"]) / 1e6)
        cells = []
        for _, k in cols:
            v = r.get(k, "")
            if k in ("time_to_level_s", "exchanges_per_peer_at_level") and v.startswith("-1"):
                v = "not reached"
            cells.append(v)
        print("| " + " | ".join(cells) + " |")


def plot(png, series, sizes):
    colors = {100: "#1f77b4", 1000: "#2ca02c", 10000: "#d62728"}

    def lines(xcol, with_none):
        out = []
        for n in sizes:
            for label, dash in (("adaptive", 1), ("random", 2)):
                out.append("'%s' using %d:2 with lines lw 2 dt %d lc rgb '%s' title '%d peers, %s'"
                           % (series[(n, label)], xcol, dash, colors.get(n, "black"), n, label))
            if with_none:
                out.append("'%s' using 1:2 with lines lw 1 dt 3 lc rgb '%s'"
                           " title '%d peers, no exchanges'"
                           % (series[(n, "none")], colors.get(n, "black"), n))
        return ", \\\n     ".join(out)

    script = """set terminal pngcairo size 1200,520 font ',10'
set output '%s'
set multiplot layout 1,2 title 'exchange\\_sim: consensus distance; 3 sites, 10:1 bandwidth, saps 0.04, int8, 1e8-value model'
set ylabel 'RMS over peers of ||x_i - mean|| / sqrt(dim)'
set logscale y
set yrange [0.15:1.2]
set ytics (0.2, 0.3, 0.5, 0.7, 1)
set grid
set key bottom left
set xlabel 'simulated seconds'
plot %s
set xlabel 'exchanges per peer (completed, counted by their initiator)'
unset key
plot %s
unset multiplot
""" % (png, lines(1, True), lines(4, False))
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100,1000,10000")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--duration", type=float, default=60)
    ap.add_argument("--view", type=int, default=200)
    ap.add_argument("--full-view-max", type=int, default=1000,
                    help="sizes above this pass --view (default 1000)")
    ap.add_argument("--plot", help="write a PNG of distance against time here")
    ap.add_argument("--jobs", type=int, default=1, help="runs at once (default 1)")
    ap.add_argument("--series-dir", help="keep the runs' series here (default: a temporary"
                    " directory)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    tmp = args.series_dir or tempfile.mkdtemp(prefix="exchange_sim.")
    os.makedirs(tmp, exist_ok=True)
    series, todo = {}, []
    for n in sizes:
        for label, opts in VARIANTS:
            f = os.path.join(tmp, "%d-%s.dat" % (n, label.replace(",", "").replace(" ", "-")))
            series[(n, label)] = f
            todo.append((n, label, opts, f))

    def one(job):
        n, label, opts, f = job
        kv = run(n, opts, f, args)
        kv["label"] = label
        print("ran: %s (%s cpu s)" % (kv["cmd"], kv["cpu_s"]), file=sys.stderr)
        return kv

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
        rows = list(ex.map(one, todo))
    table(rows)
    if args.plot:
        plot(args.plot, series, sizes)
        print("\nplot: %s" % args.plot)


if __name__ == "__main__":
    main()
