"""Line charts for the benchmark reports (gossip_report.py, attach_report.py).

One function, plot(), draws series {label: [(x, y), ...]} as lines on one
PNG through gnuplot (Debian: gnuplot-nox), run in a subprocess; the pngcairo
terminal where gnuplot has it, else png. Where gnuplot is missing it prints
one warning line (once per process) and draws nothing: a report's CSV files
and tables do not depend on it. Standard library only.
"""
import math
import os
import shutil
import subprocess
import sys

_state = {"warned": False, "terminal": None}

# Colours for the lines without one of their own, in this order.
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
           "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"]


def _warn(msg):
    print("%s: %s" % (os.path.basename(sys.argv[0]) or "plot", msg), file=sys.stderr)


def _quote(s):
    return '"%s"' % str(s).replace("\\", "\\\\").replace('"', '\\"')


def _terminal(gp):
    if _state["terminal"] is None:
        r = subprocess.run([gp, "-e", "set terminal pngcairo"], capture_output=True, text=True)
        _state["terminal"] = "pngcairo" if r.returncode == 0 else "png"
    return _state["terminal"]


def plot(path, series, title, xlabel, ylabel, logx=False, styles=None, size=(1000, 700)):
    """Write a PNG at path with one line per entry of series.

    series: {label: [(x, y), ...]}, in drawing order, each line's points in
    the order given; points that are not finite, and with logx those at
    x <= 0, are left out. styles: {label: {"color": "#rrggbb", "width":
    line width (1 if absent), "key": the legend's text for the line (the
    label if absent; None or "" for no entry, e.g. for the 2nd..nth peer of
    a system that has one entry)}}. logx: log-scale x axis (bytes).
    Returns whether the PNG was written."""
    gp = shutil.which("gnuplot")
    if gp is None:
        if not _state["warned"]:
            _warn("gnuplot not found (apt-get install gnuplot-nox): no PNG plots, "
                  "the CSV files and tables are unaffected")
            _state["warned"] = True
        return False
    styles = styles or {}
    blocks, plots = [], []
    for i, (label, pts) in enumerate(series.items()):
        pts = [(float(x), float(y)) for x, y in pts
               if x is not None and y is not None and math.isfinite(float(x))
               and math.isfinite(float(y)) and (not logx or float(x) > 0)]
        if not pts:
            continue
        st = styles.get(label, {})
        color = st.get("color") or PALETTE[i % len(PALETTE)]
        key = st.get("key", label)
        name = "$d%d" % len(blocks)
        blocks.append("%s << EOD\n%s\nEOD\n" % (
            name, "\n".join("%.10g %.10g" % p for p in pts)))
        plots.append("%s using 1:2 with linespoints pt 7 ps 0.4 lw %g lc rgb %s %s" % (
            name, st.get("width", 1), _quote(color),
            "title %s" % _quote(key) if key else "notitle"))
    if not plots:
        _warn("%s: no points to plot" % path)
        return False
    script = "".join(blocks) + "\n".join([
        "set terminal %s noenhanced size %d,%d font \",11\"" % (_terminal(gp), size[0], size[1]),
        "set output %s" % _quote(path),
        "set title %s" % _quote(title),
        "set xlabel %s" % _quote(xlabel),
        "set ylabel %s" % _quote(ylabel),
        "set grid",
        "set key above box",
        "set offsets 0, 0, graph 0.03, 0",
        "set logscale x" if logx else "unset logscale x",
        "set format x %s" % _quote("%.0s %cB" if logx else "%g"),
        "plot " + ", \\\n     ".join(plots),
        "set output",
        ""])
    try:
        r = subprocess.run([gp], input=script, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        _warn("gnuplot failed for %s: %s" % (path, e))
        return False
    if r.returncode != 0:
        _warn("gnuplot failed for %s: %s" % (path, r.stderr.strip().splitlines()[-1:]))
        return False
    return True
