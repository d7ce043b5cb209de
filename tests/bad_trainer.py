"""A training process gone bad, for tests/poison.sh: it attaches to its
gossipd (gossipd-attach(7), spoken here with nothing but the standard
library, as any language could) and, at every step boundary, rewrites the
shared vector with values that must never reach a healthy model:

  far  the model it was given, times 50: finite, absurd
  nan  the same with every 7th value NaN

Usage: bad_trainer.py SOCKET PARAMS far|nan SECONDS
"""
import array
import json
import math
import mmap
import os
import socket
import sys
import time


def request(sock, buf, obj, fds=None):
    """Send obj; return (reply, buf, fds received with it)."""
    sock.sendall((json.dumps(obj) + "\n").encode())
    got = []
    while b"\n" not in buf:
        data, f, _, _ = socket.recv_fds(sock, 65536, 1)
        got += f
        if not data:
            sys.exit("bad_trainer: gossipd closed the connection")
        buf += data
    line, buf = buf.split(b"\n", 1)
    reply = json.loads(line)
    if not reply.get("ok"):
        sys.exit("bad_trainer: %s" % reply.get("error"))
    return reply, buf, got


def main():
    path, params, mode, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    reply, buf, fds = request(sock, b"", {"cmd": "attach", "version": 1, "params": params,
                                          "dtype": "float32", "name": "bad-" + mode})
    mem = mmap.mmap(fds[0], reply["bytes"])
    os.close(fds[0])
    given = array.array("f")
    given.frombytes(mem[:])
    bad = array.array("f", (v * 50.0 for v in given))
    if mode == "nan":
        for i in range(0, len(bad), 7):
            bad[i] = math.nan
    bad = bad.tobytes()
    step = reply["step"]
    taken = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        mem[:] = bad
        reply, buf, _ = request(sock, buf, {"cmd": "step", "step": step, "loss": 1e9})
        if reply.get("stop"):
            break
        step += 1
        taken += 1
        time.sleep(0.01)
    print("bad_trainer: %s, %d steps" % (mode, taken))


main()
