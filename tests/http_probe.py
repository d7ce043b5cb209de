#!/usr/bin/python3
"""What tests/metrics_http.sh asks of a peer's /metrics listener, over raw
sockets (standard library only): http_probe.py PORT OUTFILE.

Writes a good scrape to OUTFILE, then sends what a port open to a network
gets (HEAD, a wrong method, a wrong path, garbage, a request line that is
not HTTP/1.x, a 64 KiB head, 40 connections that never finish their
request) and checks each reply. Prints one line per check; exits 1 with
the reason on the first failure.
"""
import socket
import sys
import time

PORT = int(sys.argv[1])
DEADLINE_S = 5  # httpd.c HTTPD_DEADLINE_MS
MAX_CLIENTS = 32  # httpd.c HTTPD_MAX_CLIENTS


def fail(why):
    print("FAIL: " + why)
    sys.exit(1)


def connect():
    s = socket.create_connection(("127.0.0.1", PORT), timeout=30)
    return s


def read_all(s):
    """Everything until the server closes (an abort counts as the end)."""
    data = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    except ConnectionResetError:
        pass
    return data


def ask(raw):
    s = connect()
    s.sendall(raw)
    data = read_all(s)
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = lines[0].split(" ")[1] if lines and lines[0].startswith("HTTP/1.1 ") else None
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers, body


def expect(name, raw, code, check=None):
    status, headers, body = ask(raw)
    if status != code:
        fail("%s: status %s, wanted %s" % (name, status, code))
    if check is not None:
        check(headers, body)
    print("ok: %s -> %s" % (name, code))
    return headers, body


def scrape():
    return expect("GET /metrics", b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", "200")


def good(headers, body):
    if not headers.get("content-type", "").startswith("text/plain; version=0.0.4"):
        fail("content type %r" % headers.get("content-type"))
    if int(headers.get("content-length", -1)) != len(body):
        fail("content length %s, body %d bytes" % (headers.get("content-length"), len(body)))


# A scrape that shows the partner: the per-peer series exist once the two
# peers know each other.
t0 = time.time()
while True:
    headers, body = scrape()
    good(headers, body)
    if b"gossipd_peer_state{" in body and b"gossipd_exchanges_total 0\n" not in body:
        break
    if time.time() - t0 > 60:
        fail("no per-peer series or no exchange within 60 s")
    time.sleep(0.5)
open(sys.argv[2], "wb").write(body)

expect("HEAD /metrics", b"HEAD /metrics HTTP/1.0\r\n\r\n", "200",
       lambda h, b: b == b"" and int(h["content-length"]) > 1000 or fail("HEAD body or length"))
expect("GET /metrics?x=1", b"GET /metrics?x=1 HTTP/1.1\r\n\r\n", "200", good)
expect("POST /metrics", b"POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", "405",
       lambda h, b: h.get("allow") == "GET, HEAD" or fail("405 without Allow: GET, HEAD"))
expect("GET /", b"GET / HTTP/1.1\r\n\r\n", "404")
expect("GET /metricsX", b"GET /metricsX HTTP/1.1\r\n\r\n", "404")
expect("garbage", b"\x00\xff\x16\x03\x01 garbage\r\n\r\n", "400")
expect("no version", b"GET /metrics\r\n\r\n", "400")
expect("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "400")
expect("lower-case method", b"get /metrics HTTP/1.1\r\n\r\n", "400")
expect("64 KiB head", b"GET /metrics HTTP/1.1\r\n" + b"X-Pad: " + b"a" * 65536 + b"\r\n\r\n",
       "431")

# Slow clients: more than the table holds, each a partial request line.
slow = []
for i in range(MAX_CLIENTS + 8):
    s = connect()
    s.sendall(b"GET /met")
    slow.append(s)
time.sleep(0.3)
t = time.time()
headers, body = scrape()   # gets in: the oldest slow one makes room
good(headers, body)
print("ok: a scrape among %d slow clients answered in %.2f s" % (len(slow), time.time() - t))
codes = {}
for s in slow:
    s.settimeout(3 * DEADLINE_S)
    try:
        data = read_all(s)
    except socket.timeout:
        fail("a slow client was not closed within %d s" % (3 * DEADLINE_S))
    code = data[9:12].decode("latin-1") if data.startswith(b"HTTP/1.1 ") else "closed"
    codes[code] = codes.get(code, 0) + 1
    s.close()
if codes.get("408", 0) < MAX_CLIENTS - 8:
    fail("slow clients' endings: %s (wanted most answered 408)" % codes)
print("ok: slow clients ended: %s" % codes)
headers, body = scrape()
good(headers, body)
text = body.decode()
for want in ('gossipd_http_requests_total{code="400"} 4', 'gossipd_http_requests_total{code="431"} 1',
             'gossipd_http_requests_total{code="405"} 1', 'gossipd_http_requests_total{code="404"} 2'):
    if want + "\n" not in text:
        fail("the listener's counters lack %r" % want)
evicted = [l for l in text.split("\n") if l.startswith("gossipd_http_evicted_total ")]
if not evicted or int(evicted[0].split()[1]) < 8:
    fail("evicted connections not counted: %r" % evicted)
print("ok: the listener counted every error reply and %s evicted" % evicted[0].split()[1])
