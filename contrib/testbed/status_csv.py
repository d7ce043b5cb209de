#!/usr/bin/python3
"""Turn testbed.sh's raw status and peers polls into CSV.

Usage: status_csv.py RAWDIR STATUS_CSV LINKS_CSV
RAWDIR holds meta.json (t0), status.txt and links.txt: one poll a line,
"UNIXTIME PEER JSON", JSON being `gossipctl --json status` or `peers`.
Times in the CSV are seconds from the launch of the first peer.
"""
import csv
import json
import os
import sys


def polls(path):
    with open(path) as f:
        for line in f:
            try:
                t, p, js = line.split(" ", 2)
                s = json.loads(js)
            except ValueError:
                continue
            if s.get("ok"):
                yield float(t), int(p), s


def num(v, fmt):
    return "" if v is None else fmt % v


def main():
    raw, status_csv, links_csv = sys.argv[1:4]
    with open(os.path.join(raw, "meta.json")) as f:
        t0 = json.load(f)["t0"]
    with open(status_csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t_s", "peer", "step", "accuracy", "bytes_sent", "exchanges",
                    "consensus_distance", "state"])
        for t, p, s in polls(os.path.join(raw, "status.txt")):
            w.writerow(["%.3f" % (t - t0), p, s.get("step"), num(s.get("accuracy"), "%.4f"),
                        s.get("bytes_sent"), s.get("exchanges"),
                        num(s.get("consensus_distance"), "%.6g"), s.get("state")])
    with open(links_csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t_s", "peer", "link", "bandwidth", "exchange_rtt", "selected", "exchanges"])
        for t, p, s in polls(os.path.join(raw, "links.txt")):
            for l in s.get("peers", []):
                if l.get("self"):
                    continue
                w.writerow(["%.3f" % (t - t0), p, l.get("addr"), num(l.get("bandwidth"), "%.6g"),
                            num(l.get("exchange_rtt"), "%.6g"), l.get("selected"),
                            l.get("exchanges")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
