#!/usr/bin/python3
"""What a churn soak did to training, from the directory contrib/soak/soak.sh
left: its polls.txt (every status answer: microseconds since the start,
slot, run, JSON) and events.log.

  soak_report.py DIR [BASELINE_DIR]

Prints, as markdown:
- events by kind (from events.log);
- exchange gaps: per run of a peer, its time between rounds (its time
  training over the exchanges it started that finished: a round every
  interval steps), the longest time between two of those (the peer's own
  longest_own_gap_s at its last poll training while the chaos lasts; the
  daemon leaves out a time it was stopped) and the longest time it surely
  took no step (but in its closing phase, which takes none) (its count did
  not move from one poll to a later one; shorter ones than the polls'
  interval, about 1.5 s, go unseen), outside any SIGSTOP of its own; a
  peer with either above twice its time between rounds is a stalled one.
  Exchanges it served come at its partners' whim and are left out of the
  bar (a peer between two rounds of its own is not stalled), but the same
  figures over every exchange are printed; the longest gaps that ended
  after the chaos began (a run's longest rises only past its start's),
  and how many of those are above twice the run's time between rounds
  (a job's start on a busy host can stall every peer at once), each
  stalled run's cause as its log gives it (gossipd logs a new longest
  wait between own rounds above twice their mean: when the first try
  began, the tries that mixed nothing, the partner of the exchange that
  mixed and its time), and, with BASELINE_DIR, the same figures without
  churn;
- joiners: per run that pulled the model, the bytes its pull received
  against the model's size, and how far it lies from the job after two
  rounds of its own: exactly, from the checkpoints soak.sh had it and
  every peer training then write at once (near/, its distance to the mean
  of the others against the median of theirs, each to the mean of all
  others but itself; the bar), and as the peers estimate it (its
  consensus_distance at that poll against the median of the others',
  an average of its first few exchanges against ones of many); a soak from
  before near/ has the estimate only, and it is the bar then. Joiners that
  came after a first peer was done (its budget spent) are shown but not
  judged: the job they meet is a handful of peers still training, most of
  them restarted ones catching up (seed 53: 7 others, hundreds of steps
  apart);
- donor kills: whether each came before the donor's answer (the joiner's
  log names it among those that "answered only part of the model"), and
  whether the joiner went on to pull the model;
- the shards some peer trained while the chaos lasted (on average over
  the polls, and the fewest): a job that trains fewer ends lower;
- the survivors' final accuracy, the first peers (restarted ones included)
  apart from the joiners: when the chaos ended (last poll before "chaos
  over", on --eval-samples) and at the end (the final poll, after every
  peer was done: on the whole test set, at equal steps), and with
  BASELINE_DIR (a soak of the same job with --churn no) the differences.
Exits 1 on a stalled peer or a joiner over the bars, 2 on bad usage or on
polls of a daemon older than this report (no longest_own_gap_s).
"""
import collections
import json
import re
import statistics
import sys

TRAINING = ("training", "closing")
PULLING = ("joining", "waiting", "stranded")
POLL_GAP = 3.0


def load(d):
    polls = []
    with open(f"{d}/polls.txt") as f:
        for line in f:
            t, slot, run, js = line.split(" ", 3)
            try:
                st = json.loads(js)
            except ValueError:
                continue
            polls.append((int(t) / 1e6, int(slot), int(run), st))
    events = []
    with open(f"{d}/events.log") as f:
        for line in f:
            t, text = line.strip().split(" ", 1)
            events.append((float(t), text))
    return polls, events


def stopped_windows(events):
    """Per slot, the (from, to) seconds it was SIGSTOPped."""
    out, since = {}, {}
    for t, text in events:
        m = re.match(r"(stop|cont) p(\d+)$", text)
        if not m:
            continue
        s = int(m.group(2))
        if m.group(1) == "stop":
            since[s] = t
        elif s in since:
            out.setdefault(s, []).append((since.pop(s), t))
    for s, t in since.items():
        out.setdefault(s, []).append((t, float("inf")))
    return out


def runs_of(polls):
    runs = {}
    for t, s, r, st in polls:
        runs.setdefault((s, r), []).append((t, st))
    return runs


def overlaps(a, b, windows):
    # 2 s of margin: a poll is up to a second late on either side.
    return any(a < w1 + 2 and w0 - 2 < b for w0, w1 in windows)


Gaps = collections.namedtuple("Gaps", "own own_longest own_chaos every every_longest no_step")


def gaps(runs, stops, t_end, t_chaos):
    """Per run, Gaps over its polls while training, up to t_end: the end
    of the chaos (after it, a peer restarted late trains on while the
    others are done and no longer exchange, which is the job ending, not a
    stall). own, every: its time training (not closing) over its own
    finished exchanges, over every exchange; own_longest, every_longest:
    the daemon's longest gaps; own_chaos: own_longest where it rose after
    t_chaos (None when the longest came before); no_step: the longest
    time the polls show it took no step."""
    rows = {}
    for (s, r), seq in runs.items():
        seq = [(t, st) for t, st in seq if st.get("state") in TRAINING and t < t_end]
        if len(seq) < 5:
            continue
        # Rates over training only: the closing phase exchanges back to
        # back, taking no step, and would make a round look shorter.
        steps = [(t, st) for t, st in seq if st.get("state") == "training"]
        if len(steps) < 2:
            continue
        (t0, st0), (t1, st1) = steps[0], steps[-1]
        dt = t1 - t0
        own = st1.get("own_exchanges", 0) - st0.get("own_exchanges", 0)
        every = st1.get("exchanges", 0) - st0.get("exchanges", 0)
        if own <= 0:
            continue
        # A count that has not moved from one poll to a later one did not
        # move in between: the time from the poll where it last moved to
        # the last poll where it still had not is a stall it surely had
        # (stalls shorter than the polls' interval, about 1.5 s, go
        # unseen). Polls more than POLL_GAP apart are the soak's own pause
        # (starting a joiner, the end checks): a window starts afresh. A
        # closing peer exchanges but takes no step.
        no_step = 0.0
        last_t, last_v, prev = seq[0][0], seq[0][1].get("step", 0), seq[0][0]
        for t, st in seq[1:]:
            v = st.get("step", 0)
            if t - prev > POLL_GAP or v != last_v or st.get("state") == "closing":
                last_t, last_v = t, v
            elif not overlaps(last_t, t, stops.get(s, [])):
                no_step = max(no_step, t - last_t)
            prev = t
        own_longest = seq[-1][1]["longest_own_gap_s"]
        before = max((st.get("longest_own_gap_s") or 0 for t, st in seq if t <= t_chaos), default=0)
        rows[(s, r)] = Gaps(dt / own, own_longest, own_longest if own_longest > before else None,
                            dt / every, seq[-1][1]["longest_gap_s"], no_step)
    return rows


def stalled(g):
    """The runs of g whose longest gap between rounds, or time without a
    step, is above twice their own time between rounds."""
    return [k for k, v in g.items() if max(v.own_longest, v.no_step) > 2 * v.own]


def joiners(polls, runs, events, params):
    """Per run that pulled: (pulled bytes / model bytes, distance / median
    of the others at that poll, its exchanges then)."""
    joined = set()
    for t, text in events:
        m = re.match(r"start p(\d+) run (\d+) pid \d+: --join ", text)
        if m:
            joined.add((int(m.group(1)), int(m.group(2))))
    by_t = {}
    for t, s, r, st in polls:
        by_t.setdefault(t, []).append((s, r, st))
    rows = {}
    for key in sorted(joined):
        seq = [(t, st) for t, st in runs.get(key, []) if st.get("state") not in PULLING]
        # A joiner receives model chunks only while it pulls.
        pulled = seq[-1][1].get("bytes_received_by_type", {}).get("model_chunk") if seq else None
        ratio = None
        for t, st in seq:
            d = st.get("consensus_distance")
            if st.get("own_exchanges", 0) >= 2 and d is not None:
                others = [o.get("consensus_distance") for s, r, o in by_t[t]
                          if (s, r) != key and o.get("state") not in PULLING]
                others = [x for x in others if x is not None]
                if others:
                    ratio = (d / statistics.median(others), st.get("exchanges"))
                break
        rows[key] = (pulled / (4.0 * params) if pulled is not None and params else None, ratio)
    return rows


def near(d):
    """{(slot, run): (distance / others' median, peers, steps apart)} of
    each joiner measured in d/near: from checkpoints written at once, the
    joiner's RMS distance to the mean of the others against the median of
    each other's to the mean of all others but itself."""
    import glob
    import os
    import numpy as np
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
    from ckpt_average import read_ckpt

    rows = {}
    for nd in sorted(glob.glob(f"{d}/near/p*.*")):
        key = tuple(int(x) for x in re.match(r"p(\d+)\.(\d+)$", os.path.basename(nd)).groups())
        ck = {}
        for f in glob.glob(f"{nd}/p*.gdc"):
            k = tuple(int(x) for x in re.match(r"p(\d+)\.(\d+)\.gdc$", os.path.basename(f)).groups())
            _, _, step, x = read_ckpt(f)
            ck[k] = (step, x)
        if key not in ck or len(ck) < 3:
            continue
        others = [ck[k][1] for k in ck if k != key]
        total = np.sum(others, axis=0)
        n = len(others)
        mean = total / n
        own = float(np.sqrt(((ck[key][1] - mean) ** 2).mean()))
        theirs = [float(np.sqrt(((x - (total - x) / (n - 1)) ** 2).mean())) for x in others]
        steps = [st for st, _ in ck.values()]
        rows[key] = (own / statistics.median(theirs), n, max(steps) - min(steps))
    return rows


def final_poll(events):
    return max((t for t, text in events if text == "final poll"), default=float("inf"))


def donor_kills(d, events):
    """Per donor kill: (victim slot, joiner slot.run, before the answer,
    the joiner pulled)."""
    rows = []
    for _, text in events:
        m = re.match(r"kill -9 p(\d+) \(donor, state \w+, of p(\d+) run (\d+) from (\S+)\)", text)
        if not m:
            continue
        try:
            log = open(f"{d}/p{m.group(2)}.{m.group(3)}.log", errors="replace").read()
        except OSError:
            log = ""
        missed = any(m.group(4) in line.split(" answered only part")[0].split()[-1].split(",")
                     for line in log.splitlines() if " answered only part of the model" in line)
        rows.append((int(m.group(1)), f"p{m.group(2)}.{m.group(3)}", missed,
                     "bootstrap: model pulled from" in log))
    return rows


def accuracy_at(polls, events, mark):
    """Per slot: its accuracy at the last poll before the event MARK (or
    at the final poll for "final poll"), and its state then."""
    t_mark = max((t for t, text in events if text == mark), default=None)
    if t_mark is None:
        return {}
    last = {}
    for t, s, r, st in polls:
        if st.get("accuracy") is None:
            continue
        # Before a mark, the polls of its last 15 s (a poll of 64 busy
        # peers took up to 8 s): the peers running then.
        # events.log keeps hundredths of a second, the polls microseconds:
        # the final poll's first answers may come before the mark as read.
        if (mark == "final poll" and t >= t_mark - 0.005) or \
                (mark != "final poll" and t_mark - 15 <= t < t_mark - 0.005):
            last[s] = (st["accuracy"], st.get("state"))
    return last


def originals(events):
    return {int(m.group(1)) for _, text in events
            if (m := re.match(r"start p(\d+) run 1 pid \d+: --peers \(all", text))}


def first_done(polls, events):
    """When a poll first found a first peer done (its budget spent)."""
    first = originals(events)
    return min([float("inf")] + [t for t, s, r, st in polls if s in first and st.get("state") == "done"])


def coverage(polls, events, t_from, t_to):
    """Shards some peer was training at each poll from t_from to t_to or
    the first poll that found a first peer done (its budget spent), if
    sooner: (their mean count, the lowest, the shards). A slot's shard is
    the one soak.sh noted it took vacant, or slot mod N."""
    n = len(originals(events))
    t_to = min(t_to, first_done(polls, events))
    took = {int(m.group(1)): int(m.group(2)) for _, text in events
            if (m := re.match(r"p(\d+) takes vacant shard (\d+)$", text))}
    at = {}
    for t, s, r, st in polls:
        if t_from <= t < t_to and st.get("state") in TRAINING:
            at.setdefault(t, set()).add(took.get(s, s % n))
    if not at:
        return None
    return statistics.mean(len(v) for v in at.values()), min(len(v) for v in at.values()), n


def accuracy_rows(argv, events, polls):
    """Lines comparing the first peers' accuracy with the baseline's."""
    first = originals(events)
    base = None
    if len(argv) == 3:
        bpolls, bevents = load(argv[2])
        base = (bpolls, bevents)
    for mark, what in (("chaos over", "when the chaos ended (on --eval-samples)"),
                       ("final poll", "at the end (every peer done: whole test set, equal steps)")):
        acc = accuracy_at(polls, events, mark)
        if not acc:
            continue
        mine = [a for s, (a, _) in acc.items() if s in first]
        joined = [a for s, (a, _) in acc.items() if s not in first]
        undone = sorted(f"p{s}" for s, (_, st) in acc.items() if st != "done")
        line = f"\n{what}: first peers {len(mine)}"
        if mine:
            line += f" mean {statistics.mean(mine):.4f}, min {min(mine):.4f}"
        if joined:
            line += f"; joiners {len(joined)} mean {statistics.mean(joined):.4f}"
        if mark == "final poll" and undone:
            line += f"; not done: {' '.join(undone)}"
        print(line)
        if base is None or not mine:
            continue
        b = [a for a, _ in accuracy_at(base[0], base[1], mark).values()]
        if b:
            print(f"without churn {len(b)}: mean {statistics.mean(b):.4f}, min {min(b):.4f};"
                  f" first peers' mean - baseline's: {100 * (statistics.mean(mine) - statistics.mean(b)):+.2f} points")


def stall_cause(d, slot, run):
    """The log line where run's longest wait between own rounds was told,
    without its time and level; None when the log has none."""
    best, text = -1.0, None
    try:
        with open(f"{d}/p{slot}.{run}.log", errors="replace") as f:
            for line in f:
                m = re.search(r"gossip: ([0-9.]+) s between own rounds, (.*)", line)
                if m and float(m[1]) > best:
                    best, text = float(m[1]), f"{m[1]} s, {m[2]}"
    except OSError:
        return None
    return text


def gap_rows(g, d, chaos_from, label):
    """Prints g's figures (d: the soak's directory, for the logs);
    returns how many runs stalled."""
    def spread(xs):
        xs = sorted(xs)
        return f"median {statistics.median(xs):.2f} s, {xs[0]:.2f}-{xs[-1]:.2f} s"
    bad = stalled(g)
    chaos = [v.own_chaos for v in g.values() if v.own_chaos is not None]
    print(f"\n{label}exchange gaps over {len(g)} runs: time between rounds (its own finished"
          f" exchanges) {spread(v.own for v in g.values())}; longest between two rounds"
          f" {spread(v.own_longest for v in g.values())}; longest / time between rounds:"
          f" median {statistics.median(v.own_longest / v.own for v in g.values()):.2f},"
          f" max {max(v.own_longest / v.own for v in g.values()):.2f};"
          f" longest without a step: max {max(v.no_step for v in g.values()):.1f} s;"
          f" stalled (either above twice its time between rounds): {len(bad)}"
          + "".join(f"\n  p{k[0]} run {k[1]}: between rounds {g[k].own:.2f} s, longest"
                    f" {g[k].own_longest:.2f} s, without a step {g[k].no_step:.1f} s"
                    + (f"\n    log: {c}" if (c := stall_cause(d, *k)) else "") for k in sorted(bad)))
    print(f"{label}every exchange (served ones too): time between them"
          f" {spread(v.every for v in g.values())}; longest between two"
          f" {spread(v.every_longest for v in g.values())}")
    late = sum(v.own_chaos is not None and v.own_chaos > 2 * v.own for v in g.values())
    print(f"{label}a run's new longest between rounds after {chaos_from:.0f} s: {len(chaos)} runs"
          + (f", {spread(chaos)}; above twice its time between rounds: {late}" if chaos else ""))
    return len(bad)


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    polls, events = load(argv[1])
    # A daemon from before own_exchanges: its gaps cannot be judged here.
    for d in argv[1:]:
        ps = polls if d == argv[1] else load(d)[0]
        if any(st.get("state") == "training" and "longest_own_gap_s" not in st for _, _, _, st in ps):
            print(f"soak_report.py: {d}: a training peer's status has no longest_own_gap_s"
                  " (a daemon older than this report)", file=sys.stderr)
            return 2
    params = next((int(m.group(1)) for _, text in events
                   if (m := re.match(r"model parameters (\d+)$", text))), None)
    kinds = {}
    for _, text in events:
        m = re.match(r"(kill -9|stop|leave|start) p\d+( run \d+ pid \d+: (--join|--resume))?"
                     r"(?: \((\w+),)?", text)
        if not m:
            continue
        k = {"kill -9": "kill " + (m.group(4) or "any"), "stop": "SIGSTOP", "leave": "leave",
             "start": {"--join": "join", "--resume": "restart"}.get(m.group(3))}[m.group(1)]
        if k:
            kinds[k] = kinds.get(k, 0) + 1
    print("| event | count |\n|---|---|")
    for k in sorted(kinds):
        print(f"| {k} | {kinds[k]} |")

    runs = runs_of(polls)
    chaos_over = min((t for t, text in events if text == "chaos over"), default=final_poll(events))
    chaos_from = min((t for t, text in events if re.match(r"(kill|stop|leave|start p\d+ run \d+ pid \d+: --(join|resume))", text)),
                     default=chaos_over)
    g = gaps(runs, stopped_windows(events), chaos_over, chaos_from)
    bad = 0
    if g:
        bad += gap_rows(g, argv[1], chaos_from, "")
        if len(argv) == 3:
            bpolls, bevents = load(argv[2])
            bg = gaps(runs_of(bpolls), {}, min((t for t, text in bevents if text == "chaos over"),
                      default=final_poll(bevents)), chaos_from)
            if bg:
                gap_rows(bg, argv[2], chaos_from, "without churn, ")

    j = joiners(polls, runs, events, params)
    if j:
        nr = near(argv[1])
        print("\n| joiner (slot.run) | pulled / model | exact distance / others' median (peers, steps apart)"
              " | estimated distance / others' median (own exchanges) |\n|---|---|---|---|")
        for (s, r), (pull, dist) in sorted(j.items()):
            ex = nr.get((s, r))
            print(f"| p{s}.{r} | {pull:.2f}" if pull is not None else f"| p{s}.{r} | -",
                  f"| {ex[0]:.2f} ({ex[1]}, {ex[2]})" if ex else "| -",
                  f"| {dist[0]:.2f} ({dist[1]}) |" if dist else "| - |")
        over_pull = [k for k, v in j.items() if v[0] is not None and v[0] > 1.2]
        # The exact figure where soak.sh took one; the estimate in a soak
        # from before near/. Only joiners into a running job.
        done = first_done(polls, events)
        came = {(int(m.group(1)), int(m.group(2))): t for t, text in events
                if (m := re.match(r"start p(\d+) run (\d+) pid \d+: --join ", text))}
        judged = {k: nr[k][0] for k in nr} if nr else {k: v[1][0] for k, v in j.items() if v[1]}
        late = {k for k in judged if came.get(k, 0) >= done}
        over_dist = [k for k, v in judged.items() if v > 1.0 and k not in late]
        over_late = [k for k in late if judged[k] > 1.0]
        over_est = [k for k, v in j.items() if v[1] is not None and v[1][0] > 1.0 and k not in late]
        print(f"\njoiners {len(j)}: pulled over 1.2x the model {len(over_pull)}, measured exactly"
              f" {len(nr)}, came after a first peer was done {len(late)}; of the others, above the"
              f" job's median distance after 2 rounds {len(over_dist)}"
              f" ({'exactly' if nr else 'estimated'}; estimated {len(over_est)}); of the late ones"
              f" {len(over_late)}" + "".join(f" (p{s}.{r})" for s, r in sorted(over_late)))
        bad += len(over_pull) + len(over_dist)

    dk = donor_kills(argv[1], events)
    if dk:
        print(f"\ndonor kills {len(dk)}: before the donor's answer {sum(r[2] for r in dk)},"
              f" joiner pulled the model anyway {sum(r[3] for r in dk)}"
              f" ({', '.join(f'p{v} of {j}' + (' mid-pull' if mid else '') for v, j, mid, _ in dk)})")
        bad += sum(not r[3] for r in dk)

    cov = coverage(polls, events, chaos_from, chaos_over)
    if cov:
        print(f"\nshards some peer trained while the chaos lasted (until a first peer was"
              f" done): {cov[0]:.1f} of {cov[2]} on average, {cov[1]} at the lowest (a shard"
              " whose peers all left is trained by nobody until a joiner takes it)")
    accuracy_rows(argv, events, polls)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
