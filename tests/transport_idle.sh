#!/bin/bash
# Two endpoints that exchanged messages and keep their connection open
# must sleep while idle: under 1% of a core each over 10 s (utime+stime
# from /proc/PID/stat).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "${top_srcdir:-.}/tests/transport_lib.sh"

mkkey "$WORK/key"
common="--key $WORK/key --job idle --deadline 60 --linger 40"
start_any B $common --id 1 --expect-done 1
start_any A $common --id 2 --peers "127.0.0.1:$PORT_B" --sizes 0,1000,1048576
wait_line "$WORK/A.log" '^finished' 20 || die "exchange did not finish"
wait_line "$WORK/B.log" '^finished' 20 || die "exchange did not finish"
sleep 0.5

ticks() {
	# Fields 14 and 15 (utime, stime), after the ")" that ends the name.
	sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'
}
hz=$(getconf CLK_TCK)
a0=$(ticks "$PID_A"); b0=$(ticks "$PID_B")
t0=$(date +%s.%N)
sleep 10
a1=$(ticks "$PID_A"); b1=$(ticks "$PID_B")
t1=$(date +%s.%N)
for n in A B; do
	eval "d=\$((\${${n,,}1} - \${${n,,}0}))"
	pct=$(echo "scale=3; 100 * $d / $hz / ($t1 - $t0)" | bc)
	echo "$n: $d ticks in $(echo "$t1 - $t0" | bc | cut -c1-5)s = ${pct}% of a core"
	[ "$(echo "$pct < 1" | bc)" = 1 ] || die "$n is not idle: ${pct}%"
done
kill -TERM "$PID_A" "$PID_B"
wait_pid "$PID_A" 10
wait_pid "$PID_B" 10
exit 0
