#!/bin/bash
# A leaving peer exits even when its leave announcement ends before its
# trainer does. With leave_timeout 1 ms the announcement's deadline passes
# while the trainer still runs its final evaluation; a member timer that
# then re-arms itself for that past deadline keeps libuv in its timer
# phase, the trainer's wake-up is never read, and the peer hangs with a
# dead control socket (the livelock once seen in 1 of 5 pace.sh runs).
. "$(dirname "$0")/fleet.sh"
fleet_need_data
fleet_keygen "$FLEET_DIR/key"
FLEET_ARGS[a]="--leave-timeout 1"
fleet_job "a b" --epochs 500 --eval-every 0 --seed 5

n=0
until [ "$(fleet_status a .members)" = 2 ] && [ "$(fleet_status a .step)" -gt 0 ]; do
	n=$((n + 1)); [ $n -gt 300 ] && fleet_fail "a did not see b or start training"
	sleep 0.1
done

fleet_ctl a leave >/dev/null || fleet_fail "leave a"
fleet_wait_exit a 20 || fleet_fail "a exited non-zero after leave"
grep -q "done:" "$FLEET_DIR/a.log" || fleet_fail "a left without its final evaluation"
fleet_ok "a peer whose leave deadline passed before its trainer finished exited"

# The partner saw it go and still answers.
n=0
until fleet_ctl b peers 2>/dev/null | grep -q left; do
	n=$((n + 1)); [ $n -gt 100 ] && fleet_fail "b does not show a as left"
	sleep 0.1
done
fleet_ctl b leave >/dev/null || fleet_fail "leave b"
fleet_wait_exit b 30 || fleet_fail "b exited non-zero"
fleet_ok "its partner showed it left and left cleanly too"
