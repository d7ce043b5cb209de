#!/bin/sh
# Gossip training with real daemons: 4 peers on 127.0.0.1, each on a
# quarter of Fashion-MNIST, exchanging 1% slices (saps). Every peer reaches
# >= 0.80 test accuracy, exchanges happen, and the same job in dense mode
# sends >= 50x more bytes. The interval (32 steps) is one both modes keep
# up with, so they make about as many exchanges and the bytes compare the
# exchanges themselves.
. "$(dirname "$0")/lib.sh"
need_data
"$GOSSIPCTL" keygen "$T/key" >/dev/null || fail "keygen"
base=$((24200 + $$ % 50 * 8))

# run MODE: a 4-peer job; sets total to the bytes sent by all peers. Not
# run in a subshell: the daemons' pids must reach lib.sh's cleanup.
run() {
	mode=$1
	peers=""
	for i in 0 1 2 3; do peers="$peers${peers:+,}127.0.0.1:$((base + i))"; done
	for i in 0 1 2 3; do
		start "$mode$i" --listen "127.0.0.1:$((base + i))" --key-file "$T/key" \
			--peers "$peers" --shard "$i/4" --epochs 2 --eval-samples 2000 \
			--mode "$mode" --interval 32 --linger yes --control "$T/$mode$i.sock" --seed 5
	done
	for i in 0 1 2 3; do wait_socket "$T/$mode$i.sock"; done
	# Wait until every peer has spent its budget, then read its counters.
	for i in 0 1 2 3; do
		n=0
		until "$GOSSIPCTL" -s "$T/$mode$i.sock" --json status >"$T/$mode$i.json" 2>/dev/null &&
		    [ "$(json_get state <"$T/$mode$i.json")" = done ]; do
			n=$((n + 1))
			[ $n -gt 600 ] && fail "$mode peer $i did not finish: $(tail -3 "$T/$mode$i.log")"
			sleep 0.2
		done
	done
	total=0
	for i in 0 1 2 3; do
		acc=$(json_get accuracy <"$T/$mode$i.json")
		ex=$(json_get exchanges <"$T/$mode$i.json")
		sent=$(json_get bytes_sent <"$T/$mode$i.json")
		$PYTHON -c "import sys; sys.exit(0 if $acc >= 0.80 else 1)" ||
			fail "$mode peer $i accuracy $acc < 0.80"
		[ "$ex" -gt 0 ] || fail "$mode peer $i made no exchange"
		echo "$mode peer $i: accuracy $acc, $ex exchanges, $sent bytes sent"
		total=$((total + sent))
	done
	for i in 0 1 2 3; do "$GOSSIPCTL" -s "$T/$mode$i.sock" leave >/dev/null; done
	for i in 0 1 2 3; do
		eval "p=\$pid_$mode$i"
		wait_exit "$p" 30 || fail "$mode peer $i exited non-zero"
	done
}

run saps
saps=$total
dist=$(json_get consensus_distance <"$T/saps0.json")
ok "saps: every peer >= 0.80, $saps bytes in all, consensus distance $dist"
run dense
dense=$total
ratio=$($PYTHON -c "print(round($dense / $saps, 1))")
$PYTHON -c "import sys; sys.exit(0 if $dense >= 50 * $saps else 1)" ||
	fail "dense sent only ${ratio}x the bytes of saps ($dense vs $saps)"
ok "dense sent ${ratio}x the bytes of saps ($dense vs $saps)"
