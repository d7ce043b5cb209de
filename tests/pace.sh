#!/bin/bash
# Bounded staleness (--lag) with real daemons: peer a (lag 1) stops
# training while its exchange with a frozen partner is in flight; the
# exchange times out at its deadline, and a goes on when the partner is
# back or when `gossipctl set lag 0` lifts the bound; peer b (lag 0, the
# default) trains on while its partner is frozen.
. "$(dirname "$0")/fleet.sh"
fleet_need_data
fleet_keygen "$FLEET_DIR/key"
# Slow probes and long suspicion: the frozen peer stays alive in a's view
# for the whole test (an exchange with a member no longer alive ends at
# once), so only the exchange's own deadline (or the lag setting) frees
# the trainer; patience 0 makes that deadline exchange_timeout (else it
# is a fraction of a second once the link is measured).
FLEET_ARGS[a]="--lag 1 --exchange-timeout 3 --exchange-patience 0"
fleet_job "a b" --epochs 500 --eval-every 0 --probe-interval 20000 --probe-timeout 10000 \
	--suspicion-timeout 60000 --seed 3

field() { fleet_status "$1" ."$2"; }

# wait_above PEER FIELD N: until PEER's status FIELD exceeds N (15 s at most).
# lag_waits counts a trainer's waits as they begin: on a loaded machine the
# step the bound stops at can come well after any fixed sleep.
wait_above() {
	n=0
	until [ "$(field "$1" "$2")" -gt "$3" ]; do
		n=$((n + 1))
		[ $n -gt 150 ] && fleet_fail "$1's $2 stayed at most $3: $(fleet_tail "$1" 3)"
		sleep 0.1
	done
}

# stalled PEER: the peer's step does not move for one second.
stalled() {
	s1=$(field "$1" step)
	sleep 1
	s2=$(field "$1" step)
	echo "$1 step $s1 -> $s2" >&2
	[ "$s1" = "$s2" ]
}

wait_above a exchanges 5
waits=$(field a lag_waits)

timeouts() { fleet_ctl a --json stats | fleet_json .gossip.timeouts; }
fleet_kill STOP b
sleep 0.5
stalled a || fleet_fail "a (lag 1) trained on while its exchange with a frozen peer ran"
[ "$(field a lag_waits)" -gt "$waits" ] || fleet_fail "a's lag_waits did not grow"
# The exchange's 3 s deadline ends it (b still alive in a's view, a's next
# exchange is with b again and waits as well); b's return frees a.
t0=$(timeouts)
sleep 3
[ "$(timeouts)" -gt "$t0" ] || fleet_fail "a's exchange with the frozen b did not time out"
fleet_kill CONT b
sleep 0.5
stalled a && fleet_fail "a stayed stopped after its partner came back"
fleet_ok "lag 1: training stopped while the exchange hung; the exchange ended at its deadline"

fleet_kill STOP a
sleep 0.5
stalled b && fleet_fail "b (lag 0) stopped training while its partner was frozen"
fleet_kill CONT a
fleet_ok "lag 0: training went on while the partner was frozen"

# Lifting the bound at run time frees a waiting trainer at once.
fleet_ctl a set exchange_timeout 60 >/dev/null || fleet_fail "set exchange_timeout"
wait_above a exchanges "$(field a exchanges)"
waits=$(field a lag_waits)
fleet_kill STOP b
wait_above a lag_waits "$waits"
# The first wait may still be for an answer b sent just before it froze;
# then a trains up to lag x interval steps into its next, hung, exchange.
stalled a || stalled a || fleet_fail "a did not stop on its second hung exchange"
fleet_ctl a set lag 0 >/dev/null || fleet_fail "set lag 0"
sleep 0.3
stalled a && fleet_fail "a stayed stopped after set lag 0"
fleet_kill CONT b
fleet_ok "set lag 0 released the waiting trainer"

waited=$(field a lag_wait_s)
fleet_ctl a leave >/dev/null
fleet_ctl b leave >/dev/null
fleet_wait_exit a 30 || fleet_fail "a exited non-zero"
fleet_wait_exit b 30 || fleet_fail "b exited non-zero"
fleet_ok "both peers left cleanly; a waited $waited s in all"
