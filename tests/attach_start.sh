#!/bin/bash
# One starting model for a fresh job of attached processes (--start agree,
# gossipd(8) START), through tests/attach_client, whose fresh model depends
# on its --seed as a self-seeding script's does.
#
# Three peers whose processes attach at once: exactly one is answered
# fresh, the one on the lowest address, and the other two get its model bit
# for bit. With --start own every process keeps its own. A peer that came
# first, alone, starts from its own, and a later peer on a lower address
# gets that model. A peer whose lowest member never has a process starts
# from its own once start_timeout has passed, and not before. Processes
# seeded alike that attach with gd_client_attach_from are all fresh with
# one model, and the lowest's peer tells the other two so: nothing is
# pulled. (A source that
# goes down mid-agreement: test_rounds's rounds_agree_source_down.)
. "$(dirname "$0")/fleet.sh"
CLIENT=$FLEET_BUILD/tests/attach_client
[ -x "$CLIENT" ] || fleet_skip "tests/attach_client not built (make check builds it)"
fleet_keygen "$FLEET_DIR/key"
N=300

# attached NAME FILTER / done NAME FILTER: jq FILTER of NAME's event line.
attached() { grep '^{"event":"attached"' "$FLEET_LOGS/$1.log" | fleet_json "$2"; }
done_ev() { grep '^{"event":"done"' "$FLEET_LOGS/$1.log" | fleet_json "$2"; }
# clients SEED NAME...: one process per peer NAME (seeds SEED, SEED+1, ...),
# started together, each attaching and leaving after its first boundary.
clients() {
	local seed=$1 n
	shift
	for n in "$@"; do
		fleet_start "c$n" timeout 120 "$CLIENT" -s "$FLEET_DIR/$n.sock" --params $N \
			--steps 0 --seed "$seed"
		seed=$((seed + 1))
	done
	for n in "$@"; do
		fleet_wait_exit "c$n" 120 || fleet_fail "client on $n exited $?: $(fleet_tail "c$n")"
	done
}
# lowest NAME...: the name whose address is lowest in byte order.
lowest() {
	local n
	for n in "$@"; do echo "127.0.0.1:${FLEET_PORT[$n]} $n"; done | LC_ALL=C sort | head -n 1 |
		cut -d' ' -f2
}

# --- agree: three at once ---
fleet_job "a b c" --trainer external
clients 1 a b c
low=$(lowest a b c)
src=$(done_ev "c$low" .hash)
for n in a b c; do
	got=$(attached "c$n" '"\(.fresh) \(.hash)"')
	if [ "$n" = "$low" ]; then
		[ "${got%% *}" = true ] || fleet_fail "$n, the lowest address, was not fresh: $got"
	else
		[ "$got" = "false $src" ] ||
			fleet_fail "$n did not get $low's model ($src): fresh and hash $got"
	fi
done
grep -q "start: no member holds a model yet, and this peer is the lowest" "$FLEET_LOGS/$low.log" ||
	fleet_fail "$low did not log why it started from its own: $(fleet_tail "$low")"
fleet_ok "three processes with their own seeds: $low (lowest address) fresh, the others got its \
model bit for bit ($src)"
for n in a b c; do fleet_stop "$n"; done

# --- own: each its own ---
fleet_job "d e" --trainer external --start own
clients 1 d e
[ "$(attached cd .fresh) $(attached ce .fresh)" = "true true" ] ||
	fleet_fail "start own: not both fresh"
[ "$(done_ev cd .hash)" != "$(done_ev ce .hash)" ] || fleet_fail "start own: the models are alike"
fleet_ok "--start own: both fresh, with models of their own"
for n in d e; do fleet_stop "$n"; done

# --- the first alone keeps its own; a lower address that comes later takes it ---
fleet_port "FLEET_PORT[f]"
fleet_port "FLEET_PORT[g]"
first=f later=g
[ "$(lowest f g)" = f ] && first=g later=f
peers=127.0.0.1:${FLEET_PORT[f]},127.0.0.1:${FLEET_PORT[g]}
fleet_gossipd $first --listen "127.0.0.1:${FLEET_PORT[$first]}" --key-file "$FLEET_DIR/key" \
	--peers "$peers" --trainer external
fleet_wait_up $first
clients 1 $first
[ "$(attached "c$first" .fresh)" = true ] || fleet_fail "$first, alone, was not fresh"
grep -q "start: no other member is live" "$FLEET_LOGS/$first.log" ||
	fleet_fail "$first did not log that it was alone: $(fleet_tail $first)"
fleet_gossipd $later --listen "127.0.0.1:${FLEET_PORT[$later]}" --key-file "$FLEET_DIR/key" \
	--peers "$peers" --trainer external
fleet_wait_up $later
clients 2 $later
[ "$(attached "c$later" '"\(.fresh) \(.hash)"')" = "false $(done_ev "c$first" .hash)" ] ||
	fleet_fail "$later (lower address) did not get $first's model: $(attached "c$later" . -c)"
fleet_ok "a peer alone started from its own; a later one on a lower address got that model"
for n in f g; do fleet_stop "$n"; done

# --- the lowest never has a process: its own after start_timeout ---
fleet_job "p q" --trainer external --start-timeout 2
low=$(lowest p q)
other=p
[ "$low" = p ] && other=q
t0=$(fleet_now)
clients 1 $other
took=$((($(fleet_now) - t0) / 1000))
[ "$(attached "c$other" .fresh)" = true ] || fleet_fail "$other was not fresh after the deadline"
[ "$took" -ge 2000 ] || fleet_fail "$other started from its own after $took ms, before start_timeout"
grep -q "start: the deadline (start_timeout) passed" "$FLEET_LOGS/$other.log" ||
	fleet_fail "$other did not log the deadline: $(fleet_tail $other)"
fleet_ok "with no process on $low, $other started from its own after $took ms (start_timeout 2 s)"

# --- gd_client_attach_from, seeded alike: nobody pulls ---
fleet_job "s t u" --trainer external
for n in s t u; do
	fleet_start "c$n" timeout 120 "$CLIENT" -s "$FLEET_DIR/$n.sock" --params $N --steps 0 \
		--seed 9 --from
done
for n in s t u; do
	fleet_wait_exit "c$n" 120 || fleet_fail "client on $n exited $?: $(fleet_tail "c$n")"
done
low=$(lowest s t u)
src=$(attached "c$low" .hash)
for n in s t u; do
	[ "$(attached "c$n" '"\(.fresh) \(.hash)"')" = "true $src" ] ||
		fleet_fail "$n: want fresh with the seed's model $src: $(attached "c$n" . -c)"
	[ "$n" = "$low" ] || grep -q "start: .* same digest as this peer's process, so nothing \
was pulled" "$FLEET_LOGS/$n.log" || fleet_fail "$n pulled: $(fleet_tail "$n")"
done
n=$(fleet_ctl "$low" --json stats | fleet_json .pull.same_start)
[ "$n" = 2 ] || fleet_fail "$low answered $n requests that the asker holds the start, want 2"
fleet_ok "three processes seeded alike (gd_client_attach_from): all fresh with one model, \
$low answered the other two that they hold it, nothing pulled"
