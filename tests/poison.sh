#!/bin/bash
# A diverging peer fails alone (issue 11): 4 peers, each on a quarter of
# Fashion-MNIST, one started with --lr 30. Its values go non-finite or
# absurd; the healthy peers refuse them (counted by reason in stats), name
# it in `peers`, and finish with their normal accuracy (>= 0.80 at 3
# epochs). POISON_SEED picks the job seed (the issue saw seeds 1 and 2 take
# healthy peers down). The bad peer is a joiner (--join), started with the
# others: a peer listed in --peers trains from its start and could diverge
# (about 0.3 s at --lr 30) before it knew a partner, and the test would
# prove nothing; a joiner knows the members before its first step, and with
# --interval 1 it offers its values at every step while it diverges.
. "$(dirname "$0")/fleet.sh"
fleet_need_data
fleet_keygen "$FLEET_DIR/key"
seed=${POISON_SEED:-1}
bad=3
addrs=()
job() {
	local i port peers
	addrs=()
	for i in 0 1 2; do
		fleet_port port
		addrs+=("127.0.0.1:$port")
	done
	peers=$(IFS=,; echo "${addrs[*]}")
	for i in 0 1 2; do
		fleet_gossipd "p$i" --listen "${addrs[i]}" --key-file "$FLEET_DIR/key" \
			--peers "$peers" --shard "$i/4" --epochs 3 --eval-samples 2000 \
			--linger yes --seed "$seed"
	done
	for i in 0 1 2; do fleet_wait_up "p$i" || return; done
}
# refused_total: bad values the healthy peers have refused so far.
refused_total() {
	t=0
	for i in 0 1 2; do
		fleet_ctl "p$i" --json stats >"$FLEET_DIR/p$i.stats" 2>/dev/null || continue
		r=$(fleet_json '[.gossip.rejected[]] | add // 0' <"$FLEET_DIR/p$i.stats") || r=0
		t=$((t + r))
	done
	echo $t
}
fleet_up job
# bad_peer: the bad peer, up; on the same address every time, as long as
# that is not taken meanwhile.
badaddr=
bad_peer() {
	local port
	if [ -z "$badaddr" ]; then
		fleet_port port
		badaddr=127.0.0.1:$port
	fi
	fleet_gossipd "p$bad" --listen "$badaddr" --key-file "$FLEET_DIR/key" \
		--join "${addrs[0]}" --shard "$bad/4" --epochs 3 --eval-samples 2000 \
		--seed "$seed" --lr 30 --interval 1
	fleet_wait_up "p$bad" || { badaddr=; return 3; }
}
# Whether the bad peer's values go far before they go non-finite (and are
# then withheld, never sent) is chance: a run that diverged unseen is
# repeated, up to 5 bad peers in all, while the job still trains.
try=1
while :; do
	fleet_up bad_peer
	fleet_wait_exit "p$bad" 120
	[ "$(refused_total)" -gt 0 ] || [ $try -ge 5 ] && break
	echo "bad peer $try diverged before any of its values was refused; another"
	mv "$FLEET_DIR/p$bad.log" "$FLEET_DIR/p$bad.$try.log"
	try=$((try + 1))
done
grep -q "bootstrap: model pulled" "$FLEET_DIR/p$bad.log" || fleet_fail "the bad peer never pulled the model"
for i in 0 1 2; do
	n=0
	st=
	until fleet_ctl "p$i" --json status >"$FLEET_DIR/p$i.json" 2>/dev/null &&
	    st=$(fleet_json .state <"$FLEET_DIR/p$i.json") && [ "$st" = done ]; do
		{ [ "$st" = failed ] || ! fleet_alive "$(fleet_pid "p$i")"; } &&
			fleet_fail "healthy peer $i failed: $(grep -m1 error "$FLEET_DIR/p$i.log")"
		n=$((n + 1))
		[ $n -gt 900 ] && fleet_fail "peer $i did not finish: $(fleet_tail "p$i" 3)"
		sleep 0.2
	done
done
named=0
refused=0
for i in 0 1 2; do
	acc=$(fleet_json .accuracy <"$FLEET_DIR/p$i.json")
	fleet_ctl "p$i" --json stats >"$FLEET_DIR/p$i.stats" || fleet_fail "stats $i"
	fleet_ctl "p$i" --json peers >"$FLEET_DIR/p$i.peers" || fleet_fail "peers $i"
	r=$(fleet_json '[.gossip.rejected[]] | add // 0' <"$FLEET_DIR/p$i.stats") ||
		fleet_fail "no gossip.rejected in stats $i"
	fr=$(fleet_json '.gossip.far_ratio_max * 100 | round / 100' <"$FLEET_DIR/p$i.stats")
	m=$(fleet_json '(first(.peers[] | select(.addr == $a)) | [.refused[]] | add) // 0' \
		--arg a "$badaddr" <"$FLEET_DIR/p$i.peers") || fleet_fail "peers $i: no refused"
	echo "peer $i: accuracy $acc, refused $r values ($(tr -d '\n ' <"$FLEET_DIR/p$i.stats" |
	    sed 's/.*"rejected":\({[^}]*}\).*/\1/')), bad peer named $m times, far_ratio_max $fr"
	$PYTHON -c "import sys; sys.exit(0 if $acc >= 0.80 else 1)" ||
		fleet_fail "healthy peer $i accuracy $acc < 0.80"
	refused=$((refused + r))
	[ "$m" -gt 0 ] && named=$((named + 1))
done
fleet_ctl p0 metrics | grep -q '^gossipd_gossip_rejected_total{reason=' ||
	fleet_fail "metrics lack gossipd_gossip_rejected_total"
[ $refused -gt 0 ] || fleet_fail "no bad value was counted"
[ $named -gt 0 ] || fleet_fail "no healthy peer names $badaddr in peers"
for i in 0 1 2; do fleet_ctl "p$i" leave >/dev/null; done
for i in 0 1 2; do
	fleet_wait_exit "p$i" 30 || fleet_fail "healthy peer $i exited non-zero"
done
fleet_ok "seed $seed: healthy peers >= 0.80, $refused bad values refused, bad peer named by $named"
