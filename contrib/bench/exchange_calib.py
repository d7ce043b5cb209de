#!/usr/bin/python3
"""The exchange simulator against live jobs: their consensus distance,
measured exactly from their checkpoints, beside exchange_sim's for the
same job. contrib/bench/exchange_calib.sh runs the live jobs and calls it.

  exchange_calib.py SIM RATE MOMENTUM NONE_DIR INTERVAL:DIR...

NONE_DIR is a job that made no exchanges: how far its peers walked apart
by its first checkpoint fits --noise (the simulator's peers walk as
sqrt(steps); the live ones walk slower as they go, the loss pulling them
back, and what an exchange every few steps meets is the walk of a few
steps), what they walked apart past that by the last one, growing as the
square of the steps, is --own-drift (each peer's shard pulls its model its
own way), and each parameter's spread across its peers at the last step
is --noise-profile (a real model's parameters move very unlike one
another, and delta's top k picks the ones that move most). Or, instead of
a drift, the growth past sqrt(steps) is a walk that speeds up: step k's
noise 1 + g k times the first's variance (--noise-growth), fitted to the
same two checkpoints. The trainer's
momentum (MOMENTUM, the jobs' --momentum: exchange_calib.sh reads
gossipd's default, 0.8) carries each peer on where it was heading,
exchanges or not, and its walk from a common start ramps up: s steps walk
as sum_k (1 - MOMENTUM^k)^2 steps would, so the rows with momentum
fit --noise and --own-drift again by that. --start-model, the start the
peers resumed, rounds the values that travel to int8 at a real model's
magnitudes. Each INTERVAL:DIR is a job exchanging
every INTERVAL steps; exchange_sim then runs it (the same peers, rate and
interval, one site, no drift, a common start, delta) and a table prints
the two distances at a tenth of the run each, and their ratio.
Needs numpy.
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckpt_average import read_ckpt  # noqa: E402


def steps(d):
    """{steps since the start: [checkpoint of each peer]} for the steps
    every peer wrote; the start is the first (their common model)."""
    peers = sorted(glob.glob(f"{d}/p*.ckpt"))
    by = {}
    for p in peers:
        for f in glob.glob(f"{p}/ckpt-*.gdc"):
            by.setdefault(int(re.search(r"ckpt-(\d+)\.gdc$", f).group(1)), []).append(f)
    by = {s: fs for s, fs in by.items() if len(fs) == len(peers)}
    s0 = min(by)
    return {s - s0: fs for s, fs in by.items() if s > s0}, len(peers)


def stack(files):
    return np.stack([read_ckpt(f)[3] for f in files])


def distance(x):
    """RMS over peers of ||x_i - mean|| / sqrt(d)."""
    return float(np.sqrt(((x - x.mean(0)) ** 2).sum(1).mean() / x.shape[1]))


def curve(d):
    by, n = steps(d)
    return {s: distance(stack(fs)) for s, fs in sorted(by.items())}, n


def walk(s, g, mu):
    """The variance, in units of sigma^2, of a peer's walk over s steps when
    step j's noise has 1 + g j times sigma^2 and momentum mu carries it on
    (what it adds by step s: 1 - mu^(s - j + 1) of it)."""
    j = np.arange(1, s + 1)
    return float(((1 + g * j) * (1 - mu ** (s - j + 1)) ** 2).sum())


def fit_growth(d0, d1, s0, s1, n, mu):
    """(g, sigma) of a walk through distance d0 after s0 steps and d1 after
    s1 (the peers' spread is (n - 1) / n of one walk's variance); g = 0
    when the walk does not speed up."""
    want = (d1 / d0) ** 2
    lo, hi = 0.0, 1.0
    if walk(s1, 0, mu) / walk(s0, 0, mu) >= want:
        hi = 0.0
    while hi > 0 and walk(s1, hi, mu) / walk(s0, hi, mu) < want and hi < 1e6:
        hi *= 2
    for _ in range(60 if hi > 0 else 0):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if walk(s1, mid, mu) / walk(s0, mid, mu) < want else (lo, mid)
    g = (lo + hi) / 2
    return g, float(np.sqrt(d0 ** 2 / ((n - 1) / n * walk(s0, g, mu))))


def main():
    if len(sys.argv) < 6:
        sys.exit(__doc__)
    sim, rate, momentum, none_dir = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
    by, n = steps(none_dir)
    last = max(by)
    x = stack(by[last])
    dim = x.shape[1]
    spread = x.std(0).astype("<f4")
    # The common start: every peer's first checkpoint (the one it resumed).
    first = sorted(glob.glob(f"{none_dir}/p0.ckpt/ckpt-*.gdc"))[0]
    start_model = read_ckpt(first)[3].astype("<f4")
    free, _ = curve(none_dir)
    # A walk of s steps of sigma per value: (n - 1) / n * sigma^2 * s.
    sig = [np.sqrt(dd ** 2 / (s * (n - 1) / n)) for s, dd in free.items()]
    sigma = sig[0]
    # and a drift of beta per step of each peer's own: (n - 1) / n * beta^2 * s^2.
    beta = float(np.sqrt(max(0.0, free[last] ** 2 / ((n - 1) / n) - sigma ** 2 * last))) / last
    # With momentum mu a peer's walk apart from a common start ramps up:
    # s steps walk sum_k (1 - mu^k)^2 steps' worth, and drift sum_k (1 - mu^k).
    mu = float(momentum)
    s0 = min(free)
    walk = sum((1 - mu ** k) ** 2 for k in range(1, s0 + 1))
    sigma_m = float(np.sqrt(free[s0] ** 2 / ((n - 1) / n * walk)))
    walk_last = sum((1 - mu ** k) ** 2 for k in range(1, last + 1))
    beta_m = float(np.sqrt(max(0.0, free[last] ** 2 / ((n - 1) / n) - sigma_m ** 2 * walk_last))) \
        / sum(1 - mu ** k for k in range(1, last + 1))
    # Or the walk speeds up: step k's noise has 1 + g k times sigma^2
    # (exchange_sim --noise-growth), fitted to the same two checkpoints.
    grow, sigma_g = fit_growth(free[s0], free[last], s0, last, n, 0.0)
    grow_m, sigma_gm = fit_growth(free[s0], free[last], s0, last, n, mu)
    print(f"no exchanges ({none_dir}): {n} peers, {dim} values, steps {min(free)}-{last};"
          f" sigma per step from distance^2 / steps: {sig[0]:.3g} after {min(free)} steps"
          f" (--noise), {sig[-1]:.3g} after {last}; the rest as a drift of each peer's own:"
          f" {beta:.3g} per step (--own-drift); fitted with momentum {momentum}'s ramp:"
          f" {sigma_m:.3g} and {beta_m:.3g}; as a walk that speeds up: --noise {sigma_g:.3g}"
          f" --noise-growth {grow:.3g} (with momentum {sigma_gm:.3g}, {grow_m:.3g})")
    print("| steps | " + " | ".join(str(s) for s in free) + " |")
    print("|---|" + "---|" * len(free))
    print("| distance, live | " + " | ".join(f"{v:.3g}" for v in free.values()) + " |")
    with tempfile.TemporaryDirectory() as tmp:
        prof = os.path.join(tmp, "profile.f32")
        spread.tofile(prof)
        start = os.path.join(tmp, "start.f32")
        start_model.tofile(start)
        for arg in sys.argv[5:]:
            interval, d = arg.split(":", 1)
            live, _ = curve(d)
            rows = []
            kinds = [("alike", []), ("profile", ["--noise-profile", prof])]
            if beta > 0:
                kinds.append(("profile, own drift", ["--noise-profile", prof,
                                                     "--own-drift", f"{beta:.6g}"]))
            kinds.append(("profile, momentum", ["--noise-profile", prof, "--momentum", momentum,
                                                "--noise", f"{sigma_m:.6g}"]))
            kinds.append(("profile, own drift, momentum", ["--noise-profile", prof, "--momentum", momentum,
                                                           "--noise", f"{sigma_m:.6g}",
                                                           "--own-drift", f"{beta_m:.6g}"]))
            kinds.append(("profile, own drift, momentum, int8 at the start's values",
                          kinds[-1][1] + ["--start-model", start]))
            kinds.append(("profile, growing noise", ["--noise-profile", prof,
                                                     "--noise", f"{sigma_g:.6g}",
                                                     "--noise-growth", f"{grow:.6g}"]))
            kinds.append(("profile, growing noise, momentum", ["--noise-profile", prof,
                                                               "--momentum", momentum,
                                                               "--noise", f"{sigma_gm:.6g}",
                                                               "--noise-growth", f"{grow_m:.6g}"]))
            for label, extra in kinds:
                series = os.path.join(tmp, f"{interval}-{len(rows)}.txt")
                subprocess.run([sim, "-n", str(n), "--dim", str(dim), "--wire-d", str(dim),
                                "--mode", "delta", "--init-spread", "0", "--drift", "0",
                                "--noise", f"{sigma:.6g}", "--steps-per-s", str(rate),
                                "--rate-spread", "0", "--sites", "1", "--local-ms", "0.05,0.05",
                                "--interval", interval, "--duration", str(max(live) / rate),
                                "--sample", str(min(live) / rate), "--series", series] + extra,
                               check=True, stdout=subprocess.DEVNULL)
                sim_at = {}
                with open(series) as f:
                    for line in f:
                        if not line.startswith("#"):
                            t, cd = line.split()[:2]
                            sim_at[round(float(t) * rate)] = float(cd)
                rows.append((label, sim_at))
            show = [s for i, s in enumerate(live) if i % max(1, len(live) // 10) == 0 or s == max(live)]
            print(f"\nexchanging every {interval} steps ({d}):")
            print("| steps | " + " | ".join(str(s) for s in show) + " |")
            print("|---|" + "---|" * len(show))
            print("| distance, live | " + " | ".join(f"{live[s]:.3g}" for s in show) + " |")
            summary = []
            for label, sim_at in rows:
                print(f"| simulated, {label} | " + " | ".join(
                    f"{sim_at[s]:.3g}" if s in sim_at else "" for s in show) + " |")
                print(f"| simulated / live, {label} | " + " | ".join(
                    f"{sim_at[s] / live[s]:.2f}" if s in sim_at else "" for s in show) + " |")
                r = [sim_at[s] / live[s] for s in live if s in sim_at]
                summary.append(f"{label} {min(r):.2f}-{max(r):.2f} (median {np.median(r):.2f})")
            print(f"simulated / live over all {len(live)} checkpoints: " + "; ".join(summary))


if __name__ == "__main__":
    main()
