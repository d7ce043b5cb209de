#!/bin/bash
# A first exchange over a link never measured, with a partner frozen just
# then (SIGSTOP), with real daemons: the link has no time of its own, so
# the exchange may wait exchange_timeout (here 60 s); the initiator's
# membership probes the partner at once instead of in its turn, and the
# suspicion ends the exchange within a probe period. Once the partner is
# back the exchanges go on, and a measured link asks for no more probes.
#
# Peer a's own probes come every 30 s, the first 30 s after its start, so
# none is in flight around the freeze: what ends the exchange is the probe
# its exchange asked for, with the period set to 2 s just before. Neither
# peer starts exchanges (interval 100000) until a is told to (interval 1):
# until then no exchange of a's measured its link to b.
. "$(dirname "$0")/fleet.sh"
fleet_need_data
fleet_keygen "$FLEET_DIR/key"
FLEET_ARGS[a]="--probe-interval 30000 --probe-timeout 1000 --exchange-timeout 60"
fleet_job "a b" --epochs 500 --eval-every 0 --max-step-rate 20 --interval 100000 --seed 5

astat() { fleet_ctl a --json stats | fleet_json "$1"; }

# wait_exchanges N WHAT: until a finished N more exchanges (30 s at most).
wait_exchanges() {
	local base n=0
	base=$(astat .gossip.completed)
	until [ "$(astat .gossip.completed)" -ge $((base + $1)) ]; do
		n=$((n + 1))
		[ $n -gt 300 ] && fleet_fail "$2: $(fleet_tail a 3)"
		sleep 0.1
	done
}

fleet_wait_status a .members 2 "see b alive" 20
[ "$(astat .gossip.initiated)" = 0 ] || fleet_fail "a exchanged before it was told to"
fleet_kill STOP b
fleet_ctl a set probe_interval 2000 >/dev/null || fleet_fail "set probe_interval"
t0=$(fleet_now)
fleet_ctl a set interval 1 >/dev/null || fleet_fail "set interval"
n=0
until [ "$(astat .gossip.partner_gone)" -ge 1 ]; do
	n=$((n + 1))
	[ $n -gt 200 ] && fleet_fail "a's exchange with the frozen b did not end in 20 s:" \
		"$(astat .gossip) $(fleet_tail a 3)"
	sleep 0.1
done
took=$(fleet_since "$t0")
[ "$(astat .membership.probes_asked)" -ge 1 ] ||
	fleet_fail "a's exchange asked for no probe of b (it ended after $took s): $(astat .membership)"
[ "$(astat .gossip.timeouts)" = 0 ] || fleet_fail "the exchange ran to its timeout"
# Without the probe the transport gives up on b after its 10 s.
[ "${took%%.*}" -lt 8 ] || fleet_fail "the exchange ended only after $took s"
fleet_ok "a's first exchange with the frozen b ended by its probe after $took s"

fleet_kill CONT b
wait_exchanges 5 "a did not exchange with b again in 30 s"
asked=$(astat .membership.probes_asked)
wait_exchanges 10 "a's exchanges stopped"
[ "$(astat .membership.probes_asked)" = "$asked" ] ||
	fleet_fail "a asked for probes over a measured link: $asked, then $(astat .membership.probes_asked)"
fleet_ok "b back: a exchanges with it again, asking for no probe over the measured link"
