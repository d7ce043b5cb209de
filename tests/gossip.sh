#!/bin/bash
# Gossip training with real daemons: 4 peers on 127.0.0.1, each on a
# quarter of Fashion-MNIST, exchanging 1% slices (saps). Every peer reaches
# >= 0.80 test accuracy, exchanges happen, and the same job in dense mode
# sends >= 50x more bytes. The interval (32 steps) is one both modes keep
# up with, so they make about as many exchanges and the bytes compare the
# exchanges themselves.
# No closing phase (close_budget 0): its traffic, at a density of its own,
# is not what the modes' comparison is about.
. "$(dirname "$0")/fleet.sh"
fleet_need_data
fleet_keygen "$FLEET_DIR/key"

# job MODE: a 4-peer job in MODE, up.
job() {
	local i port addrs=() peers
	for i in 0 1 2 3; do
		fleet_port port
		addrs+=("127.0.0.1:$port")
	done
	peers=$(IFS=,; echo "${addrs[*]}")
	for i in 0 1 2 3; do
		fleet_gossipd "$1$i" --listen "${addrs[i]}" --key-file "$FLEET_DIR/key" \
			--peers "$peers" --shard "$i/4" --epochs 2 --eval-samples 2000 \
			--mode "$1" --density 0.01 --interval 32 --linger yes --seed 5 \
			--close-budget 0
	done
	for i in 0 1 2 3; do fleet_wait_up "$1$i" || return; done
}

# run MODE: the job in MODE, to its end; sets total to the bytes sent by all
# peers. Not run in a subshell: the daemons must stay known to fleet.sh.
run() {
	mode=$1
	fleet_up job "$mode"
	# Wait until every peer has spent its budget, then read its counters.
	for i in 0 1 2 3; do
		fleet_wait_status "$mode$i" .state done "finish" 120
		fleet_ctl "$mode$i" --json status >"$FLEET_DIR/$mode$i.json" || fleet_fail "status $mode$i"
	done
	total=0
	for i in 0 1 2 3; do
		acc=$(fleet_json .accuracy <"$FLEET_DIR/$mode$i.json")
		ex=$(fleet_json .exchanges <"$FLEET_DIR/$mode$i.json")
		sent=$(fleet_json .bytes_sent <"$FLEET_DIR/$mode$i.json")
		$PYTHON -c "import sys; sys.exit(0 if $acc >= 0.80 else 1)" ||
			fleet_fail "$mode peer $i accuracy $acc < 0.80"
		[ "$ex" -gt 0 ] || fleet_fail "$mode peer $i made no exchange"
		echo "$mode peer $i: accuracy $acc, $ex exchanges, $sent bytes sent"
		total=$((total + sent))
	done
	for i in 0 1 2 3; do fleet_ctl "$mode$i" leave >/dev/null; done
	for i in 0 1 2 3; do
		fleet_wait_exit "$mode$i" 30 || fleet_fail "$mode peer $i exited non-zero"
	done
}

run saps
saps=$total
dist=$(fleet_json .consensus_distance <"$FLEET_DIR/saps0.json")
fleet_ok "saps: every peer >= 0.80, $saps bytes in all, consensus distance $dist"
run dense
dense=$total
ratio=$($PYTHON -c "print(round($dense / $saps, 1))")
$PYTHON -c "import sys; sys.exit(0 if $dense >= 50 * $saps else 1)" ||
	fleet_fail "dense sent only ${ratio}x the bytes of saps ($dense vs $saps)"
fleet_ok "dense sent ${ratio}x the bytes of saps ($dense vs $saps)"
