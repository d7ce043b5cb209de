#!/bin/sh
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
. "$(dirname "$0")/lib.sh"
need_data
"$GOSSIPCTL" keygen "$T/key" >/dev/null || fail "keygen"
base=$((25500 + $$ % 50 * 2))
seed=${POISON_SEED:-1}
bad=3
peers=""
for i in 0 1 2; do peers="$peers${peers:+,}127.0.0.1:$((base + i))"; done
for i in 0 1 2; do
	start "p$i" --listen "127.0.0.1:$((base + i))" --key-file "$T/key" \
		--peers "$peers" --shard "$i/4" --epochs 3 --eval-samples 2000 \
		--linger yes --control "$T/p$i.sock" --seed "$seed"
done
# refused_total: bad values the healthy peers have refused so far.
refused_total() {
	t=0
	for i in 0 1 2; do
		"$GOSSIPCTL" -s "$T/p$i.sock" --json stats >"$T/p$i.stats" 2>/dev/null || continue
		r=$($PYTHON -c "import json,sys
print(sum(json.load(sys.stdin)['gossip']['rejected'].values()))" <"$T/p$i.stats") || r=0
		t=$((t + r))
	done
	echo $t
}
for i in 0 1 2; do wait_socket "$T/p$i.sock"; done
# Whether the bad peer's values go far before they go non-finite (and are
# then withheld, never sent) is chance: a run that diverged unseen is
# repeated, up to 5 bad peers in all, while the job still trains.
try=1
while :; do
	start "p$bad" --listen "127.0.0.1:$((base + bad))" --key-file "$T/key" \
		--join "127.0.0.1:$base" --shard "$bad/4" --epochs 3 --eval-samples 2000 \
		--control "$T/p$bad.sock" --seed "$seed" --lr 30 --interval 1
	eval "pb=\$pid_p$bad"
	wait_exit "$pb" 120
	[ "$(refused_total)" -gt 0 ] || [ $try -ge 5 ] && break
	echo "bad peer $try diverged before any of its values was refused; another"
	mv "$T/p$bad.log" "$T/p$bad.$try.log"
	try=$((try + 1))
done
grep -q "bootstrap: model pulled" "$T/p$bad.log" || fail "the bad peer never pulled the model"
for i in 0 1 2; do
	n=0
	st=
	until "$GOSSIPCTL" -s "$T/p$i.sock" --json status >"$T/p$i.json" 2>/dev/null &&
	    st=$(json_get state <"$T/p$i.json") && [ "$st" = done ]; do
		eval "p=\$pid_p$i"
		{ [ "$st" = failed ] || ! kill -0 "$p" 2>/dev/null; } &&
			fail "healthy peer $i failed: $(grep -m1 error "$T/p$i.log")"
		n=$((n + 1))
		[ $n -gt 900 ] && fail "peer $i did not finish: $(tail -3 "$T/p$i.log")"
		sleep 0.2
	done
done
badaddr="127.0.0.1:$((base + bad))"
named=0
refused=0
for i in 0 1 2; do
	acc=$(json_get accuracy <"$T/p$i.json")
	"$GOSSIPCTL" -s "$T/p$i.sock" --json stats >"$T/p$i.stats" || fail "stats $i"
	"$GOSSIPCTL" -s "$T/p$i.sock" --json peers >"$T/p$i.peers" || fail "peers $i"
	r=$($PYTHON -c "import json,sys; g=json.load(sys.stdin)['gossip']
print(sum(g['rejected'].values()))" <"$T/p$i.stats") || fail "no gossip.rejected in stats $i"
	fr=$($PYTHON -c "import json,sys
print(round(json.load(sys.stdin)['gossip']['far_ratio_max'], 2))" <"$T/p$i.stats")
	m=$($PYTHON -c "import json,sys
p=[e for e in json.load(sys.stdin)['peers'] if e['addr']=='$badaddr']
print(sum(p[0]['refused'].values()) if p else 0)" <"$T/p$i.peers") || fail "peers $i: no refused"
	echo "peer $i: accuracy $acc, refused $r values ($(tr -d '\n ' <"$T/p$i.stats" |
	    sed 's/.*"rejected":\({[^}]*}\).*/\1/')), bad peer named $m times, far_ratio_max $fr"
	$PYTHON -c "import sys; sys.exit(0 if $acc >= 0.80 else 1)" ||
		fail "healthy peer $i accuracy $acc < 0.80"
	refused=$((refused + r))
	[ "$m" -gt 0 ] && named=$((named + 1))
done
"$GOSSIPCTL" -s "$T/p0.sock" metrics | grep -q '^gossipd_gossip_rejected_total{reason=' ||
	fail "metrics lack gossipd_gossip_rejected_total"
[ $refused -gt 0 ] || fail "no bad value was counted"
[ $named -gt 0 ] || fail "no healthy peer names $badaddr in peers"
for i in 0 1 2; do "$GOSSIPCTL" -s "$T/p$i.sock" leave >/dev/null; done
for i in 0 1 2; do
	eval "p=\$pid_p$i"
	wait_exit "$p" 30 || fail "healthy peer $i exited non-zero"
done
ok "seed $seed: healthy peers >= 0.80, $refused bad values refused, bad peer named by $named"
