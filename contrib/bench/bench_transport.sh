#!/bin/bash
# Transport benchmark: our full stack (tcp;ofi_rxm + the negotiated AEAD,
# acknowledged messages) against a plain TCP socket pair for 4 MiB
# throughput with WINDOWS messages in flight and the CPU time each side
# spends per GB (user + system, whole process), and against fi_pingpong
# (libfabric-bin, same provider, no crypto) and a plain TCP ping-pong for
# 64-byte round trips; and our throughput with the transport's workers
# (the default) against the loop thread sealing and opening alone
# (--threads -1). Everything on 127.0.0.1, side by side in one run,
# REPEATS times; medians are reported. Both ends run on this machine, so
# its cores bound our throughput at nproc / (both ends' CPU s/GB): the
# "CPU bound" rows give that ceiling against TCP's throughput.
#
#   make contrib/bench/bench_transport && contrib/bench/bench_transport.sh
#
# Env: BUILD (build dir, default .), REPEATS (3), COUNT (200), WINDOWS
# ("1 4 16"), CSV (bench_transport.csv), PORT (23400).
set -e
BUILD=${BUILD:-.}
REPEATS=${REPEATS:-3}
COUNT=${COUNT:-200}
WINDOWS=${WINDOWS:-1 4 16}
CSV=${CSV:-bench_transport.csv}
PORT=${PORT:-23400}
BENCH="$BUILD/contrib/bench/bench_transport"
[ -x "$BENCH" ] || { echo "build it first: make contrib/bench/bench_transport"; exit 1; }
command -v fi_pingpong >/dev/null || { echo "fi_pingpong missing: apt-get install libfabric-bin"; exit 1; }

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cpu_keys="cpu_ours_tx cpu_ours_rx cpu_tcp_tx cpu_tcp_rx"
hdr="run,window,tput_ours_MBps,tput_tcp_MBps,rtt_ours_us,rtt_tcp_us,rtt_fi_pingpong_us"
for k in $cpu_keys; do
	hdr="$hdr,${k}_user_s_per_GB,${k}_sys_s_per_GB"
done
hdr="$hdr,tput_ours_loop_only_MBps"
echo "$hdr" >"$CSV"
for r in $(seq "$REPEATS"); do
	for w in $WINDOWS; do
		"$BENCH" --count "$COUNT" --window "$w" --port "$PORT" >"$tmp/b"
		get() { awk -v k="$1" '$1 == k { print $2 }' "$tmp/b"; }
		# fi_pingpong prints usec/xfer = round trip / 2 (two transfers
		# per iteration): double it for a round trip.
		fi_pingpong -p tcp -e rdm -I 5000 -S 64 -B $((PORT + 10)) \
		    >"$tmp/pps" 2>&1 &
		spid=$!
		sleep 0.5
		fi_pingpong -p tcp -e rdm -I 5000 -S 64 -P $((PORT + 10)) \
		    127.0.0.1 >"$tmp/ppc" 2>&1
		wait $spid
		pp=$(awk '$1 == 64 { print 2 * $7 }' "$tmp/ppc")
		row="$r,$w,$(get tput_ours_MBps),$(get tput_tcp_MBps),$(get rtt_ours_us),$(get rtt_tcp_us),$pp"
		for k in $cpu_keys; do
			row="$row,$(get ${k}_user_s_per_GB),$(get ${k}_sys_s_per_GB)"
		done
		"$BENCH" --count "$COUNT" --window "$w" --port "$PORT" \
		    --threads -1 >"$tmp/b"
		row="$row,$(get tput_ours_MBps)"
		echo "$row" >>"$CSV"
	done
done

col() { awk -F, -v w="$1" -v c="$2" 'NR > 1 && $2 == w { print $c }' "$CSV" | median; }
# user + system seconds per GB of columns c and c+1, median over runs
cpu() { awk -F, -v w="$1" -v c="$2" 'NR > 1 && $2 == w { print $c + $(c + 1) }' "$CSV" | median; }
first=${WINDOWS%% *}
echo
echo "4 MiB messages, $COUNT per run, median of $REPEATS runs (CSV: $CSV)"
printf "%-34s %12s %12s %8s\n" "measure" "ours" "baseline" "ratio"
# tput LABEL COLUMN: our throughput against the one in COLUMN, each window
tput() {
	for w in $WINDOWS; do
		o=$(col $w 3); t=$(col $w $2)
		printf "%-34s %9.0f MB/s %9.0f MB/s %7.1f%%\n" \
		    "$(printf "$1" $w)" "$o" "$t" "$(echo "100 * $o / $t" | bc -l)"
	done
}
tput "throughput, window %s vs plain TCP" 4
tput "window %s, workers vs loop only" 16
for w in $WINDOWS; do
	for side in "sender 8 12" "receiver 10 14"; do
		set -- $side
		o=$(cpu $w $2); t=$(cpu $w $3)
		printf "%-34s %8.3f s/GB %8.3f s/GB %7.2fx\n" \
		    "CPU, $1, window $w vs TCP" "$o" "$t" "$(echo "$o / $t" | bc -l)"
	done
done
# Both ends share this machine's cores: whatever the overlap, ours cannot
# pass NPROC / (both ends' CPU seconds per GB). Against TCP's throughput
# this is the highest share of it that this machine allows ours.
cores=$(nproc)
for w in $WINDOWS; do
	b=$(echo "1000 * $cores / ($(cpu $w 8) + $(cpu $w 10))" | bc -l); t=$(col $w 4)
	printf "%-34s %9.0f MB/s %9.0f MB/s %7.1f%%\n" \
	    "CPU bound ($cores cores), window $w vs TCP" "$b" "$t" "$(echo "100 * $b / $t" | bc -l)"
done
o=$(col $first 5); t=$(col $first 6); p=$(col $first 7)
printf "%-34s %10.1f us %10.1f us %7.2fx\n" "64 B round trip vs fi_pingpong" "$o" "$p" \
    "$(echo "$o / $p" | bc -l)"
printf "%-34s %10.1f us %10.1f us %7.2fx\n" "64 B round trip vs plain TCP" "$o" "$t" \
    "$(echo "$o / $t" | bc -l)"
