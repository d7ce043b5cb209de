#!/bin/bash
# Mode share with attached processes (gossipd(8), --share-sync): at each
# round a process waits at its step until the others' shares of the round
# came. Two peers whose C processes (tests/attach_client) train side by
# side wait for each other (lag_waits grows, the shares applied, none
# refused but for being early); with share_sync 0 neither waits; with the
# other process stopped (SIGSTOP: its peer lives but shares nothing) a
# process trains on: it waits for the stopped one's share in one round,
# at most share_sync times its steps' time, and not in the rounds after.
. "$(dirname "$0")/fleet.sh"
CLIENT=$FLEET_BUILD/tests/attach_client
[ -x "$CLIENT" ] || fleet_skip "tests/attach_client not built (make check builds it)"
fleet_keygen "$FLEET_DIR/key"
N=256
waits() { fleet_status "$1" .lag_waits; }
share() { fleet_ctl "$1" --json stats | fleet_json ".share.$2"; }
# train NAME PEER STEPS SEED: an attach_client on PEER in the background
train() {
	fleet_start "$1" "$CLIENT" -s "$FLEET_DIR/$2.sock" --params $N --steps "$3" --sleep-ms 5 \
		--seed "$4"
}

fleet_job "a b" --trainer external --mode share --interval 2 --density 0.25 \
	--exchange-timeout 2
train ta a 200 1
train tb b 200 2
for t in ta tb; do
	fleet_wait_exit $t 120 || fleet_fail "$t failed: $(fleet_tail $t 3)"
done
w=$(( $(waits a) + $(waits b) ))
[ "$w" -gt 0 ] || fleet_fail "neither process waited for the other's shares"
for p in a b; do
	[ "$(share $p applied)" -ge 90 ] || fleet_fail "$p applied $(share $p applied) shares, want >= 90"
	# one that came before this peer held the job's model is refused
	# unanchored (gossipd(8), SHARE), whatever the wait
	[ "$(share $p 'refused | del(.unanchored) | add')" = 0 ] ||
		fleet_fail "$p refused shares: $(share $p refused -c)"
done
fleet_ok "two processes, 200 steps each: $w waits for the other's shares (a $(fleet_status a \
.lag_wait_s) s, b $(fleet_status b .lag_wait_s) s); shares applied a $(share a applied), \
b $(share b applied)"

for p in a b; do
	fleet_ctl $p set share_sync 0 >/dev/null || fleet_fail "set share_sync 0 on $p"
done
wa=$(waits a)
wb=$(waits b)
train ua a 100 3
train ub b 100 4
for t in ua ub; do
	fleet_wait_exit $t 120 || fleet_fail "$t failed: $(fleet_tail $t 3)"
done
[ "$(waits a) $(waits b)" = "$wa $wb" ] ||
	fleet_fail "with share_sync 0 a process waited: lag_waits $wa $wb -> $(waits a) $(waits b)"
fleet_ok "share_sync 0: no wait"

for p in a b; do
	fleet_ctl $p set share_sync 0.5 >/dev/null || fleet_fail "set share_sync 0.5 on $p"
done
train vb b 100000 5
fleet_wait_log vb '"event":"attached"' "attach on b" 30
sleep 1
fleet_kill STOP vb
wa=$(waits a)
sa=$(fleet_status a .lag_wait_s)
t0=$(fleet_now)
train va a 100 6
fleet_wait_exit va 60 || fleet_fail "va failed: $(fleet_tail va 3)"
took=$(fleet_since "$t0")
[ "$(waits a)" -gt "$wa" ] || fleet_fail "a did not wait for the stopped process's shares"
# Each wait is at most half the training before it, the first at most
# exchange_timeout (2 s): the waits W of a run of T s keep W <= T / 3 +
# 4 / 3; T / 2 + 2 leaves room for the timer's lateness on a busy machine.
waited=$(fleet_status a .lag_wait_s)
awk -v w="$waited" -v s="$sa" -v t="$took" 'BEGIN { exit !(w - s <= t / 2 + 2) }' ||
	fleet_fail "a waited $waited - $sa s of $took s for a stopped process, more than its bound"
fleet_kill CONT vb
fleet_kill KILL vb
fleet_ok "with b's process stopped, a's trained 100 steps in $took s (lag_wait_s $sa -> $waited)"
