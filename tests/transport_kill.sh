#!/bin/bash
# A peer SIGKILLed in the middle of a 64 MiB transfer: the sender must
# learn it within its deadline, go on talking to a third peer, and talk to
# the killed peer again once it restarts on the same address.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "${top_srcdir:-.}/tests/transport_lib.sh"
command -v jq >/dev/null || { echo "SKIP: jq not installed"; exit 77; }

mkkey "$WORK/key"
timeout_ms=1000
common="--key $WORK/key --job kill --timeout $timeout_ms --deadline 60"
# The sender's deadline for a 64 MiB message: timeout + 64 MiB at 32 MiB/s.
deadline=3

start_any V $common --id 1 --expect-done 1
start_any T $common --id 3 --expect-done 1
start_any A $common --id 2 --kill-test "127.0.0.1:$PORT_V,127.0.0.1:$PORT_T"
wait_line "$WORK/A.log" '^progress 2' 30 || die "no 64 MiB transfers completed"
# A keeps one 64 MiB message in flight at all times: kill during the next.
sleep 0.05
kill -9 "$PID_V"
t0=$(date +%s.%N)
wait_line "$WORK/A.log" '^victim-down' $((deadline + 2)) ||
    die "sender did not notice the dead peer"
t1=$(date +%s.%N)
took=$(echo "$t1 - $t0" | bc)
echo "sender noticed the kill after ${took}s (deadline ${deadline}s)"
# The slack covers the sender's 100 ms deadline tick and this script's
# polling; a deadline that were not honoured would show as 60 s.
[ "$(echo "$took <= $deadline + 1" | bc)" = 1 ] || die "too slow: ${took}s"
sleep 0.5
mv "$WORK/V.log" "$WORK/V-killed.log"
start_peer V "$PORT_V" $common --id 1 --expect-done 1 ||
    die "the killed peer could not restart on its address"
wait_pid "$PID_A" 30 || die "sender did not finish"
grep -q '^victim-back' "$WORK/A.log" || die "no traffic after the restart"
grep -q '^victim big transfer ok' "$WORK/A.log" || die "no big transfer after restart"
wait_pid "$PID_V" 20 || die "restarted peer failed"
wait_pid "$PID_T" 20 || die "third peer failed"
[ "$(stat_of V .bad_content)" = 0 ] || die "bad content at the restarted peer"
[ "$(stat_of T .bad_content)" = 0 ] || die "bad content at the third peer"
exit 0
