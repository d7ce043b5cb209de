#!/bin/sh
# Bounded staleness (--lag) with real daemons: peer a (lag 1) stops
# training while its exchange with a frozen partner is in flight, and goes
# on when the exchange times out or when `gossipctl set lag 0` lifts the
# bound; peer b (lag 0, the default) trains on while its partner is frozen.
. "$(dirname "$0")/lib.sh"
need_data
"$GOSSIPCTL" keygen "$T/key" >/dev/null || fail "keygen"
base=$((25100 + $$ % 50 * 4))
list="127.0.0.1:$base,127.0.0.1:$((base + 1))"
# Long suspicion: the frozen peer stays a member, so only the exchange's
# own deadline (or the lag setting) frees the trainer.
common="--key-file $T/key --peers $list --epochs 500 --eval-every 0
	--suspicion-timeout 60000 --seed 3"
# shellcheck disable=SC2086 # common is a list of words
start a --listen "127.0.0.1:$base" --shard 0/2 --control "$T/a.sock" \
	--lag 1 --exchange-timeout 3 $common
# shellcheck disable=SC2086
start b --listen "127.0.0.1:$((base + 1))" --shard 1/2 --control "$T/b.sock" $common
wait_socket "$T/a.sock"
wait_socket "$T/b.sock"

field() { "$GOSSIPCTL" -s "$T/$1.sock" --json status | json_get "$2"; }

# wait_exchanges PEER N: until PEER has made more than N exchanges.
wait_exchanges() {
	n=0
	until [ "$(field "$1" exchanges)" -gt "$2" ]; do
		n=$((n + 1))
		[ $n -gt 150 ] && fail "$1 made no exchange past $2: $(tail -3 "$T/$1.log")"
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

wait_exchanges a 5
waits=$(field a lag_waits)

kill -STOP "$pid_b"
sleep 0.5
stalled a || fail "a (lag 1) trained on while its exchange with a frozen peer ran"
[ "$(field a lag_waits)" -gt "$waits" ] || fail "a's lag_waits did not grow"
# The exchange's 3 s deadline frees the trainer.
sleep 2.5
stalled a && fail "a stayed stopped after its exchange timed out"
ok "lag 1: training stopped while the exchange hung, and went on at its deadline"
kill -CONT "$pid_b"

kill -STOP "$pid_a"
sleep 0.5
stalled b && fail "b (lag 0) stopped training while its partner was frozen"
kill -CONT "$pid_a"
ok "lag 0: training went on while the partner was frozen"

# Lifting the bound at run time frees a waiting trainer at once.
"$GOSSIPCTL" -s "$T/a.sock" set exchange_timeout 60 >/dev/null || fail "set exchange_timeout"
wait_exchanges a "$(field a exchanges)"
kill -STOP "$pid_b"
sleep 0.5
stalled a || fail "a did not stop on its second hung exchange"
"$GOSSIPCTL" -s "$T/a.sock" set lag 0 >/dev/null || fail "set lag 0"
sleep 0.3
stalled a && fail "a stayed stopped after set lag 0"
kill -CONT "$pid_b"
ok "set lag 0 released the waiting trainer"

waited=$(field a lag_wait_s)
"$GOSSIPCTL" -s "$T/a.sock" leave >/dev/null
"$GOSSIPCTL" -s "$T/b.sock" leave >/dev/null
wait_exit "$pid_a" 30 || fail "a exited non-zero"
wait_exit "$pid_b" 30 || fail "b exited non-zero"
ok "both peers left cleanly; a waited $waited s in all"
