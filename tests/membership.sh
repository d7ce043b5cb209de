#!/bin/bash
# Membership with real daemons on 127.0.0.1, real keys and libfabric: a
# job of 8 started from partial peer lists, a joiner, a graceful leave, a
# SIGKILL, a SIGSTOP past the suspicion time, every control command on a
# member, and SIGTERM for all. Every peer's view is read several times a
# second (fleet_member_until), and the test fails the moment any live peer
# is dead or left in anyone's view.
. "$(dirname "$0")/fleet.sh"
fleet_need_data
FLEET_DUMP_LOGS=15
fleet_keygen "$FLEET_DIR/key"
addr() { echo "127.0.0.1:${FLEET_PORT[$1]}"; }

t0=$(fleet_now)
fleet_member_job 8 2 4 1
fleet_ok "8 peers up in $(printf %.1f "$(fleet_since "$t0")") s"
fleet_member_until agree 10 "8 peers agree"
fleet_ok "8 peers, each told of 2 others (+ itself + an unreachable one): all list all 8 alive $(printf %.2f "$FLEET_TOOK") s after the last one came up"
# Agreement can come before a peer has finished its one step and its
# evaluation, so wait for the budget rather than look once.
n=0
until [ "$(for p in p{0..7}; do fleet_status "$p" '"\(.state) \(.members)"'; done | sort -u)" = "done 8" ]; do
	n=$((n + 1))
	[ $n -gt 300 ] && fleet_fail "30 s after agreement, not every peer is done with 8 members: $(
		for p in p{0..7}; do fleet_status "$p" '"\(.state) \(.members)"'; done | tr '\n' ' ')"
	sleep 0.1
done

fleet_member_join joiner p3
fleet_member_until 'agree and see("joiner"; "alive")' 10 "joiner listed everywhere"
fleet_ok "a 9th peer joined through p3: listed alive everywhere after $(printf %.2f "$FLEET_TOOK") s"

# A graceful leave: left, not dead; exit 0.
r=$(fleet_ctl p5 --json leave) || fleet_fail "leave: $r"
fleet_member_until 'see("p5"; "left")' 10 "left everywhere" "$(addr p5)"
fleet_wait_exit p5 15 || fleet_fail "leaving peer exited $?"
left=$FLEET_TOOK
t0=$(fleet_now)
while [ $(($(fleet_now) - t0)) -lt 2000000 ]; do
	fleet_member_look 'see("p5"; "left")' "$(addr p5)" || fleet_fail "left peer changed state after it exited"
	sleep 0.1
done
fleet_ok "a leaving peer is \`left\` everywhere after $(printf %.2f "$left") s (never dead), exit status 0"

# SIGKILL: dead everywhere within 5 s; nobody else ever dead.
fleet_kill KILL p2
fleet_wait_exit p2 10
fleet_member_until 'see("p2"; "dead")' 5 "killed peer dead everywhere" "$(addr p2)" "$(addr p5)"
fleet_ok "a SIGKILLed peer is dead in every survivor's view after $(printf %.2f "$FLEET_TOOK") s (suspicion_timeout 2 s, limit 5 s)"

# SIGSTOP beyond the suspicion time, then SIGCONT: alive again.
fleet_kill STOP p6
FLEET_STOPPED[p6]=1
gone=("$(addr p2)" "$(addr p5)" "$(addr p6)")
fleet_member_until 'see("p6"; "dead")' 10 "stopped peer dead" "${gone[@]}"
sleep 1
fleet_kill CONT p6
unset "FLEET_STOPPED[p6]"
fleet_member_until 'see("p6"; "alive") and agree' 10 "resumed peer alive everywhere" "${gone[@]}"
inc=$(fleet_ctl p6 --json stats | fleet_json .membership.incarnation)
fleet_ok "a peer SIGSTOPped past its death (incarnation now $inc) is alive everywhere $(printf %.2f "$FLEET_TOOK") s after SIGCONT"

# Watch everything settle for a few more seconds: no false deaths.
gone=("$(addr p2)" "$(addr p5)")
t0=$(fleet_now)
while [ $(($(fleet_now) - t0)) -lt 3000000 ]; do
	fleet_member_look true "${gone[@]}"
	sleep 0.1
done
fleet_ok "no live peer was ever dead or left in any view"

# Control socket: every command on a peer of the job.
for cmd in status peers stats metrics; do
	r=$(fleet_ctl p0 --json "$cmd") || fleet_fail "$cmd: $r"
done
r=$(fleet_ctl p0 --json checkpoint) &&
	fleet_fail "checkpoint without a dir: $r"
[ "$(echo "$r" | fleet_json '.error | contains("checkpoint_dir")')" = true ] ||
	fleet_fail "checkpoint without a dir: $r"
fleet_ctl p0 --json peers | fleet_json '.peers[] | select(has("id") and has("addr") and has("state")
	and has("incarnation") and has("rtt") and has("bandwidth") and has("last_contact")
	and has("last_exchange") and has("selected") and has("self") | not)
	| "peers entry lacks a field: \(tojson)"' | grep . && fleet_fail "peers entries"
r=$(fleet_ctl p0 --json peers)
[ "$(echo "$r" | fleet_json 'any(.peers[]; (.self | not) and .state == "alive" and .rtt > 0)')" = true ] ||
	fleet_fail "no rtt measured: $r"
# The live count is of this instant: a member p0 suspects for a moment is
# not in it, so give it a few looks.
n=0
until fleet_ctl p0 --json metrics | fleet_json .text >"$FLEET_DIR/metrics" &&
	grep -qx 'gossipd_members 7' "$FLEET_DIR/metrics"; do
	n=$((n + 1))
	[ $n -gt 50 ] && fleet_fail "metrics: gossipd_members is not 7 for 5 s: $(head -c 2000 "$FLEET_DIR/metrics")"
	sleep 0.1
done
for want in '# TYPE gossipd_members gauge' '# HELP gossipd_membership_pings_sent_total' \
	'gossipd_transport_bytes_sent_total{type="ping"}' gossipd_membership_deaths_total; do
	grep -qF "$want" "$FLEET_DIR/metrics" || fleet_fail "metrics lack $want: $(head -c 2000 "$FLEET_DIR/metrics")"
done
out=$(fleet_ctl p0 peers) || fleet_fail "gossipctl peers"
case $out in *ADDRESS*) ;; *) fleet_fail "peers table: $out" ;; esac
case $out in *"(this peer)"*) ;; *) fleet_fail "peers table: $out" ;; esac
case $out in *dead*) ;; *) fleet_fail "peers table: $out" ;; esac
out=$(fleet_ctl p0 metrics) || fleet_fail "gossipctl metrics"
case $out in "# HELP"*) ;; *) fleet_fail "gossipctl metrics: $(head -c 500 <<<"$out")" ;; esac
while read -r key value ok; do
	rc=0
	fleet_ctl p0 set "$key" "$value" >/dev/null 2>"$FLEET_DIR/set.err" || rc=$?
	[ $((rc == 0)) = "$ok" ] || fleet_fail "set $key $value: rc $rc $(cat "$FLEET_DIR/set.err")"
done <<'SET'
probe_interval 400 1
suspicion_timeout 3000 1
probe_timeout 900 0
indirect_checks 2 0
probe_interval 500 1
SET
# Abuse on a busy member: errors, and the peer stays in the job. Bash
# cannot speak to a Unix socket, hence Python.
$PYTHON - "$FLEET_DIR/p0.sock" <<'PY' || fleet_fail "control abuse"
import json, socket, sys

def conn():
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(sys.argv[1])
    return s

def line(s):
    buf = b""
    while not buf.endswith(b"\n"):
        d = s.recv(65536)
        if not d:
            break
        buf += d
    return buf

s = conn()
s.sendall(b'{"cmd":"watch"}\n')
if not json.loads(line(s))["ok"]:
    sys.exit("watch failed")
s.close()
s = conn()
for bad in (b"{nope\n", b'{"cmd":"frobnicate"}\n', b'{"cmd":7}\n'):
    s.sendall(bad)
    r = json.loads(line(s))
    if r["ok"] is not False or not r["error"]:
        sys.exit("%r got %s" % (bad, r))
s.close()
big = conn()
try:
    big.sendall(b"{" + b" " * (1 << 20) + b"}\n")
except OSError:
    pass
buf = big.recv(65536)
if b'"ok":false' not in buf.replace(b" ", b""):
    sys.exit("1 MiB line: %r" % buf[:200])
big.close()
many = []
for _ in range(100):
    m = conn()
    m.sendall(b'{"cmd":"peers"}\n')
    many.append(m)
for m in many:
    buf = line(m)
    if not json.loads(buf)["ok"]:
        sys.exit("one of 100 clients: %s" % buf[:200])
    m.close()
PY
fleet_member_until agree 5 "job intact after control abuse" "$(addr p2)" "$(addr p5)"
fleet_ok "status, peers, stats, metrics, watch, checkpoint, set; bad JSON, unknown command, 1 MiB line, 100 clients: answered, job unaffected"

# Everyone leaves on SIGTERM with exit 0; nobody hangs.
t0=$(fleet_now)
names=$(fleet_names)
# shellcheck disable=SC2086 # names are single words
fleet_kill TERM $names
for p in $names; do
	fleet_wait_exit "$p" 20 || fleet_fail "$p exited $? after SIGTERM"
done
fleet_ok "SIGTERM: $(wc -w <<<"$names") peers left with exit 0 in $(printf %.1f "$(fleet_since "$t0")") s"
