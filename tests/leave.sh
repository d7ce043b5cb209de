#!/bin/sh
# A leaving peer exits even when its leave announcement ends before its
# trainer does. With leave_timeout 1 ms the announcement's deadline passes
# while the trainer still runs its final evaluation; a member timer that
# then re-arms itself for that past deadline keeps libuv in its timer
# phase, the trainer's wake-up is never read, and the peer hangs with a
# dead control socket (the livelock once seen in 1 of 5 pace.sh runs).
. "$(dirname "$0")/lib.sh"
need_data
"$GOSSIPCTL" keygen "$T/key" >/dev/null || fail "keygen"
base=$((25300 + $$ % 50 * 2))
list="127.0.0.1:$base,127.0.0.1:$((base + 1))"
common="--key-file $T/key --peers $list --epochs 500 --eval-every 0 --seed 5"
# shellcheck disable=SC2086 # common is a list of words
start a --listen "127.0.0.1:$base" --shard 0/2 --control "$T/a.sock" \
	--leave-timeout 1 $common
# shellcheck disable=SC2086
start b --listen "127.0.0.1:$((base + 1))" --shard 1/2 --control "$T/b.sock" $common
wait_socket "$T/a.sock"
wait_socket "$T/b.sock"

field() { "$GOSSIPCTL" -s "$T/$1.sock" --json status | json_get "$2"; }
n=0
until [ "$(field a members 2>/dev/null)" = 2 ] && [ "$(field a step 2>/dev/null)" -gt 0 ]; do
	n=$((n + 1)); [ $n -gt 300 ] && fail "a did not see b or start training"
	sleep 0.1
done

"$GOSSIPCTL" -s "$T/a.sock" leave >/dev/null || fail "leave a"
wait_exit "$pid_a" 20 || fail "a exited non-zero after leave"
grep -q "done:" "$T/a.log" || fail "a left without its final evaluation"
ok "a peer whose leave deadline passed before its trainer finished exited"

# The partner saw it go and still answers.
n=0
until "$GOSSIPCTL" -s "$T/b.sock" peers 2>/dev/null | grep -q left; do
	n=$((n + 1)); [ $n -gt 100 ] && fail "b does not show a as left"
	sleep 0.1
done
"$GOSSIPCTL" -s "$T/b.sock" leave >/dev/null || fail "leave b"
wait_exit "$pid_b" 30 || fail "b exited non-zero"
ok "its partner showed it left and left cleanly too"
