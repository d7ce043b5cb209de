#!/usr/bin/python3
"""Summary of a matrix.py run: matrix_report.py OUT. Jobs named p-* (per-epoch
accuracies of torch_mnist.py), c-* (accuracy at steps of outer_exp.py or
ddp_cnn.py) and ch-* (validation loss at steps of torch_charlm.py or
ddp_charlm.py): mean, min and max over the job's processes, and bytes sent."""
import json, glob, os, sys, statistics as st
root = sys.argv[1]
def lines(f):
    out = []
    for l in open(f, errors="replace"):
        l = l.strip()
        if l.startswith("{"):
            try: out.append(json.loads(l))
            except: pass
    return out
for d in sorted(glob.glob(root + "/*")):
    name = os.path.basename(d); ts = sorted(glob.glob(d + "/t*.log"))
    rows = []
    for t in ts:
        L = lines(t)
        ep = [x for x in L if x.get("ev") == "epoch"]
        ev = [x for x in L if x.get("ev") == "eval"]
        dn = [x for x in L if x.get("ev") == "done"]
        rows.append((os.path.basename(t), ep, ev, dn))
    print("==", name)
    if name.startswith("p-"):
        for e in (1, 2, 3):
            accs = [x["accuracy"] for _, ep, _, _ in rows for x in ep if x["epoch"] == e]
            if accs: print("  epoch %d: mean %.4f min %.4f max %.4f n=%d" % (e, st.mean(accs), min(accs), max(accs), len(accs)))
    elif name.startswith("c-"):
        for s in (100, 200, 300, 400, 450):
            accs = [x.get("acc", x.get("accuracy")) for _, _, ev, _ in rows for x in ev if x["step"] == s]
            if accs: print("  step %d: mean %.4f min %.4f max %.4f" % (s, st.mean(accs), min(accs), max(accs)))
        fin = [x.get("acc", x.get("accuracy_full")) for _, _, _, dn in rows for x in dn]
        print("  final(10k):", fin)
        by = [x.get("bytes") for _, _, ev, _ in rows for x in ev if x["step"] == 450]
        print("  bytes@450:", by)
    else:
        for s in (100, 200, 300, 400, 500, 600):
            v = [x["val_loss"] for _, _, ev, _ in rows for x in ev if x["step"] == s]
            if v: print("  step %d: val mean %.4f min %.4f max %.4f" % (s, st.mean(v), min(v), max(v)))
        b = [x.get("bytes_sent", x.get("bytes")) for _, _, _, dn in rows for x in dn]
        print("  bytes:", b)
