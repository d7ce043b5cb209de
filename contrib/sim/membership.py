#!/usr/bin/env python3
"""Tables of the membership simulator (contrib/sim/membership_sim) for
several job sizes: failure detection, joins, false suspicions, traffic,
and what each run cost. Runs one size at a time, each with every seed, and
pools the kills and joins of all seeds of a size.

Usage: contrib/sim/membership.py [--bin PATH] [--seeds S] [N ...] [-- SIM_ARGS]
(default sizes 100 1000; run it under nice on a shared machine).
"""
import argparse
import os
import statistics
import subprocess
import sys


def run(binary, n, seed, extra):
    out = subprocess.run([binary, "-n", str(n), "--seed", str(seed)] + extra,
                         check=True, capture_output=True, text=True).stdout
    vals, events = {}, []
    for line in out.splitlines():
        f = line.split()
        if f[0] == "event":
            events.append(dict(zip(f[2::2], f[3::2])) | {"what": f[1]})
        else:
            vals[f[0]] = f[1]
    return vals, events


def times(events, what, key):
    """The times of one kind of event; None for one that never completed."""
    return [None if float(e[key]) < 0 else float(e[key])
            for e in events if e["what"] == what and key in e]


def med_max(xs):
    if not xs:
        return "-"
    if None in xs:
        done = [x for x in xs if x is not None]
        return "%d of %d never" % (len(xs) - len(done), len(xs))
    return "%.2f / %.2f" % (statistics.median(xs), max(xs))


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    ap = argparse.ArgumentParser()
    top = os.environ.get("top_builddir",
                         os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ap.add_argument("--bin", default=os.path.join(top, "contrib", "sim", "membership_sim"))
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("sizes", nargs="*", type=int, default=[100, 1000])
    a = ap.parse_args(argv)

    rows = []
    for n in a.sizes:
        runs = [run(a.bin, n, s, extra) for s in range(1, a.seeds + 1)]
        ev = [e for _, es in runs for e in es]
        v = [r for r, _ in runs]

        def mean(k):
            return statistics.mean(float(r[k]) for r in v)

        def worst(k):
            return max(float(r[k]) for r in v)
        watched = sum(float(r["watched_s"]) for r in v)
        rows.append({
            "n": n,
            "agree": "warm" if v[0]["start"] == "warm"
                     else "%.1f" % worst("agree_s") if all(float(r["agree_s"]) >= 0 for r in v)
                     else "never",
            "suspect": med_max(times(ev, "kill", "first_change_s")),
            "dead": med_max(times(ev, "kill", "everywhere_s")),
            "kills": len(times(ev, "kill", "everywhere_s")),
            "left": med_max(times(ev, "leave", "everywhere_s")),
            "join": med_max(times(ev, "join", "everywhere_s")),
            "full": med_max(times(ev, "join", "full_view_s")) + "".join(
                " (%s of %s at the next event)" % (e["lists"], e["of"]) for e in ev
                if e["what"] == "join" and e["lists"] != e["of"]),
            "fsusp": "%.1f (%d views)" % (
                sum(int(r["false_episodes"]) for r in v) * 3600 / watched,
                sum(int(r["false_suspicions"]) for r in v)),
            "fdead": "%d" % sum(int(r["false_deaths"]) for r in v),
            "bps": "%.0f" % mean("steady_bytes_per_peer_s"),
            "sync": "%.0f" % mean("steady_bytes_per_peer_s_sync"),
            "frames": "%.0f" % mean("steady_frame_bytes_per_peer_s"),
            "mps": "%.1f" % mean("steady_msgs_per_peer_s"),
            "max": "%d (%s)" % (worst("max_msg_bytes"), v[0]["max_msg_type"]),
            "share": "%.1e" % (worst("max_msg_bytes") / float(v[0]["max_message_size"])),
            "inline": "%d" % worst("msgs_over_inline"),
            "burst": "-" if v[0]["start"] == "warm"
                     else "%.1f" % (worst("start_busiest_bytes") / 1e6),
            "start": "-" if v[0]["start"] == "warm"
                     else "%.0f (%.0f)" % (mean("start_bytes_per_peer") / 1e3,
                                           mean("settle_bytes_per_peer_s")),
            "sim": "%.0f" % mean("sim_s"),
            "cpu": "%.1f" % mean("cpu_s"),
            "wall": "%.1f" % mean("wall_s"),
            "rss": "%.0f" % worst("maxrss_mib"),
            "cpu_peer": "%.0f" % (mean("cpu_s") * 1e6 / (n * mean("sim_s"))),
        })
        print("N=%d done" % n, file=sys.stderr)

    print("Seeds %d per size; times in s, median / max over the pooled events%s.\n"
          % (a.seeds, "; simulator options: " + " ".join(extra) if extra else ""))
    print("| peers | agree after last start | killed: first suspect | killed: dead in every view "
          "(kills) | leave: left everywhere | join: known everywhere | joiner lists all "
          "| false suspicions/h (views) | false deaths |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %(n)d | %(agree)s | %(suspect)s | %(dead)s (%(kills)d) | %(left)s | %(join)s "
              "| %(full)s | %(fsusp)s | %(fdead)s |" % r)
    print("\n| peers | steady B/peer/s | of it SYNC | with frame headers | msgs/peer/s "
          "| largest message B | / max_message_size | over inline frame "
          "| busiest peer's MB sent during the start "
          "| kB a peer sent until agreement (B/peer/s in the 30 s after) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %(n)d | %(bps)s | %(sync)s | %(frames)s | %(mps)s | %(max)s | %(share)s "
              "| %(inline)s | %(burst)s | %(start)s |" % r)
    print("\n| peers | simulated s | CPU s | wall s | max RSS MiB | CPU us per peer per simulated s |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print("| %(n)d | %(sim)s | %(cpu)s | %(wall)s | %(rss)s | %(cpu_peer)s |" % r)


if __name__ == "__main__":
    main()
