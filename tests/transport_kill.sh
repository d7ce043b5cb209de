#!/bin/bash
# A peer SIGKILLed in the middle of a 64 MiB transfer: the sender must
# learn it within its deadline, go on talking to a third peer, and talk to
# the killed peer again once it restarts on the same address.
FLEET_DUMP_LOGS=40
. "$(dirname "$0")/fleet.sh"

fleet_keygen "$FLEET_DIR/key"
timeout_ms=1000
common="--key $FLEET_DIR/key --job kill --timeout $timeout_ms --deadline 60"
# The sender's deadline for a 64 MiB message: timeout + 64 MiB at 32 MiB/s.
deadline=3

fleet_netpeer V $common --id 1 --expect-done 1
fleet_netpeer T $common --id 3 --expect-done 1
fleet_netpeer A $common --id 2 --kill-test "127.0.0.1:${FLEET_PORT[V]},127.0.0.1:${FLEET_PORT[T]}"
fleet_wait_log A '^progress 2' "complete a 64 MiB transfer" 30
# A keeps one 64 MiB message in flight at all times: kill during the next.
sleep 0.05
fleet_kill KILL V
t0=$(date +%s.%N)
fleet_wait_log A '^victim-down' "notice the dead peer" $((deadline + 2))
t1=$(date +%s.%N)
took=$(echo "$t1 - $t0" | bc)
echo "sender noticed the kill after ${took}s (deadline ${deadline}s)"
# The slack covers the sender's 100 ms deadline tick and this script's
# polling; a deadline that were not honoured would show as 60 s.
[ "$(echo "$took <= $deadline + 1" | bc)" = 1 ] || fleet_fail "too slow: ${took}s"
sleep 0.5
mv "$FLEET_DIR/V.log" "$FLEET_DIR/V-killed.log"
fleet_wait_exit V 5
fleet_start V "$NETPEER" --listen "127.0.0.1:${FLEET_PORT[V]}" $common --id 1 --expect-done 1
fleet_wait_up V 10 '^ready' || fleet_fail "the killed peer could not restart on its address"
fleet_wait_exit A 30 || fleet_fail "sender did not finish"
grep -q '^victim-back' "$FLEET_DIR/A.log" || fleet_fail "no traffic after the restart"
grep -q '^victim big transfer ok' "$FLEET_DIR/A.log" || fleet_fail "no big transfer after restart"
fleet_wait_exit V 20 || fleet_fail "restarted peer failed"
fleet_wait_exit T 20 || fleet_fail "third peer failed"
[ "$(fleet_netpeer_stat V .bad_content)" = 0 ] || fleet_fail "bad content at the restarted peer"
[ "$(fleet_netpeer_stat T .bad_content)" = 0 ] || fleet_fail "bad content at the third peer"
exit 0
