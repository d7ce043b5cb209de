#!/bin/bash
# Two endpoints that exchanged messages and keep their connection open
# must sleep while idle: under 1% of a core each over 10 s (utime+stime
# from /proc/PID/stat).
FLEET_DUMP_LOGS=40
. "$(dirname "$0")/fleet.sh"

fleet_keygen "$FLEET_DIR/key"
common="--key $FLEET_DIR/key --job idle --deadline 60 --linger 40"
fleet_netpeer B $common --id 1 --expect-done 1
fleet_netpeer A $common --id 2 --peers "127.0.0.1:${FLEET_PORT[B]}" --sizes 0,1000,1048576
fleet_wait_log A '^finished' "finish the exchange" 20
fleet_wait_log B '^finished' "finish the exchange" 20
sleep 0.5

ticks() {
	# Fields 14 and 15 (utime, stime), after the ")" that ends the name.
	sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'
}
hz=$(getconf CLK_TCK)
a0=$(ticks "$(fleet_pid A)"); b0=$(ticks "$(fleet_pid B)")
t0=$(date +%s.%N)
sleep 10
a1=$(ticks "$(fleet_pid A)"); b1=$(ticks "$(fleet_pid B)")
t1=$(date +%s.%N)
for n in A B; do
	eval "d=\$((\${${n,,}1} - \${${n,,}0}))"
	pct=$(echo "scale=3; 100 * $d / $hz / ($t1 - $t0)" | bc)
	echo "$n: $d ticks in $(echo "$t1 - $t0" | bc | cut -c1-5)s = ${pct}% of a core"
	[ "$(echo "$pct < 1" | bc)" = 1 ] || fleet_fail "$n is not idle: ${pct}%"
done
fleet_stop A B
exit 0
