"""The service manager's side of sd_notify(3), for tests/systemd.sh.

Usage: notify_listen.py NOTIFY_SOCKET CONTROL_SOCKET

Binds NOTIFY_SOCKET (AF_UNIX, datagrams), prints "listening", then one
JSON line per message received: {"msg": [its assignments]}. On READY=1 it
asks CONTROL_SOCKET for status before it reads anything else, and prints
{"ready_status": reply} or {"ready_status_error": why}: whether the peer
served at the moment it said it was ready. Standard library only.
"""
import json
import socket
import sys


def ask_status(path):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(path)
        s.sendall(b'{"cmd":"status"}\n')
        buf = b""
        while not buf.endswith(b"\n"):
            d = s.recv(65536)
            if not d:
                raise ConnectionError("closed before a reply")
            buf += d
        return json.loads(buf)


def main():
    notify, control = sys.argv[1:3]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(notify)
    print("listening", flush=True)
    while True:
        msg = sock.recv(65536).decode("utf-8", "replace").split("\n")
        print(json.dumps({"msg": msg}), flush=True)
        if "READY=1" in msg:
            try:
                out = {"ready_status": ask_status(control)}
            except (OSError, ValueError) as e:
                out = {"ready_status_error": repr(e)}
            print(json.dumps(out), flush=True)


main()
