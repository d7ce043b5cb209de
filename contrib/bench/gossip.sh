#!/bin/bash
# Gossip training against all-reduce, side by side in one run on this
# machine: 8 gossipd peers on 127.0.0.1 with iid shards with the daemon's
# defaults (`delta`), in `saps` mode (DENSITY slices, fp32 values: the
# mode gossipd had before delta) and in `dense` mode (whole model, fp32:
# the in-binary baseline), 8 PyTorch DDP workers (gloo all-reduce, same
# MLP, batch 64 per worker, same SGD and schedule shape), and the defaults
# and `saps` again on label-skewed shards (dirichlet:0.5, `noniid_delta`
# and `noniid`) with the same budget. The systems run one after the other,
# never at once, so each has both cores.
#
# Measured, per system (contrib/bench/gossip_report.py does the arithmetic):
#   time to TARGET  seconds from the launch of the first process to the first
#                   moment the MEAN over the peers of each peer's latest
#                   evaluation is >= TARGET (every peer must have evaluated
#                   once). DDP's workers hold one model, so it is its own
#                   evaluation. Also given from the start of training (the
#                   first gossipd step of any peer; DDP: after rendezvous).
#                   The "every peer >= TARGET" time is in summary.csv.
#   steps to TARGET the first step (of each peer; DDP: of every worker) at
#                   which every peer has evaluated and their mean is >=
#                   TARGET; over DDP's, how many more steps gossip takes.
#   bytes to TARGET bytes sent per peer at that moment, mean over peers:
#                   gossipd's own bytes_sent counter (all its traffic:
#                   gossip, membership, handshakes), polled every POLL s and
#                   interpolated in time; DDP: the ring all-reduce volume
#                   2(n-1)/n * 4d bytes per step, checked at the end against
#                   the bytes_sent of the workers' TCP sockets (ss).
#   final accuracy  on the whole test set (10000 images): gossipd peers'
#                   final checkpoints, evaluated by gossip_report.py; DDP's
#                   model. Periodic evaluations use the first EVAL_SAMPLES
#                   test images in both systems, on every peer or worker.
#   average model   gossipd: the mean of the peers' final checkpoints, on
#                   the whole test set, and each peer's distance to it
#                   (||x_p - mean|| / ||mean||, mean and max over peers):
#                   how far the peers are from agreeing on the job's model
#                   (contrib/bench/ckpt_average.py, also usable alone).
#
# Run from the build directory (or set BUILD):
#     contrib/bench/gossip.sh [OUTDIR]     (default OUTDIR: ./bench-gossip)
# Environment (defaults in brackets):
#   BUILD         directory holding src/gossipd and src/gossipctl [.]
#   PYTHON        Python with torch and numpy [/usr/bin/python3]
#   PEERS [8]  EPOCHS [20]  SEED [1]  INTERVAL [4]
#   DENSITY [0.01]  of the saps systems
#   EVAL_EVERY [40] steps   EVAL_SAMPLES [2000]   TARGET [0.85]
#   DDP_LR [0.05]   the DDP learning rate, momentum 0.9 (gossipd's defaults,
#                   lr 0.1 with momentum 0.8, take steps of the same size:
#                   lr / (1 - momentum); the mean of 8 gossip peers moves
#                   like DDP at that rate)
#   SYSTEMS ["delta saps dense ddp noniid_delta noniid"]   which runs, in
#                 this order; besides those six, NAME:PARTITION:OPTION,OPTION,... is a gossipd
#                 run named NAME with those options (commas become spaces),
#                 e.g. d4:dirichlet:0.5:--mode,delta,--density,0.04
#   RUN_LIMIT [240] seconds before a run is killed and counted as failed
#   POLL [0.5]      seconds between status polls of the gossipd peers
#   GOSSIPD_OPTS [] more options for every gossipd (e.g. --select random)
#   KILL_AT []      churn in every gossipd run: SIGKILL the last peer this
#                   many seconds after launch, or at the first poll that
#                   finds another peer in state `closing` (KILL_AT=closing:
#                   the last peer then keeps closing until killed); its
#                   shard then has no final model, the survivors are what
#                   is reported
#   JOIN_AT []      seconds after launch (or `closing`) a new peer joins
#                   through peer 0 (--join) with the last peer's shard;
#                   its final model counts like the others'
#   REJOIN_AT []    with FAULTY: this many seconds after launch (or
#                   `suspected`: once peer 0 suspects half as many members
#                   as there are faulty ones) the faulty peers are SIGKILLed
#                   and each started again on its address through peer 0
#                   (--join), a new process with a new id and the same
#                   fault (a Sybil rejoin after its penalty)
#   FAULTY [0]      in a system whose options (or GOSSIPD_OPTS) hold --fault KIND[:X], the
#                   last FAULTY peers are faulty members: tests/gossipd_faulty
#                   (`make tests/gossipd_faulty`) with --fault KIND[:X]
#                   (src/fault.h), the others plain gossipd without it.
#                   Every figure is then the honest peers' alone, and the
#                   report adds how well the honest peers' suspicion
#                   (the suspects each log names at exit, else `peers`
#                   read every 2 s into peers.txt) picks out the faulty
#                   ones (contrib/bench/robust.sh)
# Ports: free ones, from tests/fleet.sh: consecutive ones for each gossipd
# run, one for the DDP rendezvous (gloo's own pair sockets take ephemeral
# ports).
# Output in OUTDIR: SYSTEM-evals.csv (every evaluation: time, peer, step,
# accuracy, bytes sent), SYSTEM-job.csv (the job's mean/min accuracy and
# mean bytes per peer against time), summary.csv, table.md (also printed);
# accuracy-steps-iid.png and accuracy-bytes-iid.png (the systems on iid
# shards), accuracy-steps-skewed.png and accuracy-bytes-skewed.png (those on
# skewed ones): every peer's evaluations against its steps and against its
# bytes sent (log scale), one line a peer, one colour a system, DDP's black
# and thick on each (drawn by gnuplot through contrib/bench/plot.py; without
# gnuplot, a warning and no plots); raw logs under OUTDIR/raw/SYSTEM/.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-./bench-gossip}
build=${BUILD:-.}
python=${PYTHON:-/usr/bin/python3}
npeers=${PEERS:-8}
epochs=${EPOCHS:-20}
seed=${SEED:-1}
density=${DENSITY:-0.01}
interval=${INTERVAL:-4}
eval_every=${EVAL_EVERY:-40}
eval_samples=${EVAL_SAMPLES:-2000}
target=${TARGET:-0.85}
ddp_lr=${DDP_LR:-0.05}
systems=${SYSTEMS:-delta saps dense ddp noniid_delta noniid}
run_limit=${RUN_LIMIT:-240}
extra=${GOSSIPD_OPTS:-}
kill_at=${KILL_AT:-}
join_at=${JOIN_AT:-}
rejoin_at=${REJOIN_AT:-}
poll=${POLL:-0.5}
faulty=${FAULTY:-0}
FLEET_BUILD=$build
. "$here/../../tests/fleet.sh"

for f in "$GOSSIPD" "$GOSSIPCTL"; do
	if [ ! -x "$f" ]; then
		echo "gossip.sh: $f not found: run 'make src/gossipd src/gossipctl' in the build directory, or set BUILD" >&2
		exit 2
	fi
done
if ! "$python" -c 'import torch, numpy' 2>/dev/null; then
	echo "gossip.sh: $python cannot import torch and numpy (apt-get install python3-torch)" >&2
	exit 2
fi

mkdir -p "$out/raw"
out=$(cd "$out" && pwd)
trap 'echo "gossip.sh: interrupted" >&2; exit 130' INT TERM

now() { date +%s.%N; }

# stop_all: TERM first (gossipd leaves cleanly), KILL what is left after 3 s.
stop_all() {
	# shellcheck disable=SC2046 # names are single words
	fleet_stop $(fleet_names)
}

# peer I JOIN EXTRA_OPTIONS...: start $name's gossipd peer I on port
# base+I, with shard I (a joiner, I = npeers: the last one's); JOIN is
# empty or a member to join through. With KILL_AT=closing the last peer
# keeps closing until it is killed (or --close-timeout): peers reach their
# closing phases seconds apart where the cores are busy, and one that ended
# by distance before peer 0's began had left when the kill came.
peer() {
	local i=$1 join=$2 shard=$1 victim= bin=$GOSSIPD a fault= opts=()
	shift 2
	# --fault KIND goes to the faulty peers alone, with their binary
	# shellcheck disable=SC2086 # GOSSIPD_OPTS is a list of words
	for a in "$@" $extra; do
		if [ "$fault" = next ]; then
			fault=$a
		elif [ "$a" = --fault ]; then
			fault=next
		else
			opts+=("$a")
		fi
	done
	if [ -n "$fault" ] && [ "$i" -ge $((npeers - faulty)) ] && [ "$i" -lt "$npeers" ]; then
		bin=$FLEET_BUILD/tests/gossipd_faulty
		opts+=(--fault "$fault")
	fi
	[ "$i" -lt "$npeers" ] || shard=$((npeers - 1))
	[ "$kill_at" = closing ] && [ "$i" -eq $((npeers - 1)) ] && victim="--close-distance 0 --close-budget 1000"
	mkdir -p "$dir/ckpt$i"
	# shellcheck disable=SC2086 # GOSSIPD_OPTS is a list of words
	GOSSIPD=$bin fleet_gossipd "p$i" --listen "127.0.0.1:$((base + i))" --key-file "$FLEET_DIR/$name.key" \
		${join:+--join "$join"} --peers "$list" --shard "$shard/$npeers" \
		--job "bench-$name" --seed "$seed" --epochs "$epochs" \
		--eval-every "$eval_every" --eval-samples "$eval_samples" \
		--interval "$interval" \
		--checkpoint-dir "$dir/ckpt$i" --checkpoint-every 100000000 \
		--checkpoint-keep 1 "${opts[@]}" $victim
	echo "$i $(fleet_pid "p$i")" >>"$dir/pids"
}

# due WHEN: has the moment WHEN (seconds after t0, or `closing`: a poll
# found peer $closer, not the last one, in its closing phase, or
# `suspected`: peer 0 suspects half of $nfaulty members or more) come? Every
# poll looks at every peer: a phase that ends by distance can be over
# between two polls of one peer.
due() {
	case $1 in
	closing) [ -n "$closer" ] ;;
	suspected)
		local n
		n=$(fleet_ctl p0 --json stats 2>/dev/null | fleet_json '.trust.suspects // 0' 2>/dev/null) || n=0
		[ "${n:-0}" -ge $(((nfaulty + 1) / 2)) ] ;;
	*) [ "$(echo "$(now) - $t0 >= $1" | bc)" = 1 ] ;;
	esac
}

# launch EXTRA_OPTIONS...: run $name's gossipd peers on consecutive free
# ports (one more kept for a joiner), up; t0 is when the first was started.
launch() {
	local i=0
	list=
	fleet_port base "$((npeers + 1))"
	while [ $i -lt "$npeers" ]; do
		list="$list${list:+,}127.0.0.1:$((base + i))"
		i=$((i + 1))
	done
	echo "== $name: $npeers gossipd peers on 127.0.0.1:$base.., $* ($epochs epochs)" >&2
	t0=$(now)
	: >"$dir/pids"
	i=0
	while [ $i -lt "$npeers" ]; do
		peer "$i" "" "$@"
		i=$((i + 1))
	done
	i=0
	while [ $i -lt "$npeers" ]; do
		fleet_wait_up "p$i" 120 || return
		i=$((i + 1))
	done
}

# peers_poller FILE N: every 2 s, the `peers` of each of p0..pN-1 that
# answers, as a line "time index JSON" of FILE, until killed. It runs from
# the launch on: 16 peers on 2 cores train for most of the time fleet_up
# waits for the last of them, so the loop of run_gossip would first look
# when most had finished.
peers_poller() {
	local file=$1 n=$2 i st
	while :; do
		i=0
		while [ $i -lt "$n" ]; do
			st=$(fleet_ctl "p$i" --json peers 2>/dev/null) && echo "$(now) $i $st" >>"$file"
			i=$((i + 1))
		done
		sleep 2
	done
}

# run_gossip NAME EXTRA_OPTIONS...
run_gossip() {
	name=$1
	shift
	dir=$out/raw/$name
	rm -rf "${dir:?}"
	mkdir -p "$dir"
	FLEET_LOGS=$dir
	local killed= joined= rejoined= polled=$npeers churn= nfaulty=0 poller=
	case " $* $extra " in *" --fault "*) nfaulty=$faulty ;; esac
	[ "$nfaulty" -eq 0 ] || [ -x "$FLEET_BUILD/tests/gossipd_faulty" ] || {
		echo "gossip.sh: $FLEET_BUILD/tests/gossipd_faulty not found: make tests/gossipd_faulty" >&2
		exit 2
	}
	fleet_keygen "$FLEET_DIR/$name.key"
	: >"$dir/peers.txt"
	if [ "$nfaulty" -gt 0 ]; then
		peers_poller "$dir/peers.txt" $((npeers + 1)) &
		poller=$!
	fi
	fleet_up launch "$@"
	closer=
	[ -n "$kill_at" ] && churn=" (SIGKILL at $kill_at)"
	[ "$kill_at" = closing ] && churn="$churn (the victim closing until killed)"
	[ -n "$join_at" ] && churn="$churn (join at $join_at)"
	[ -n "$rejoin_at" ] && [ "$nfaulty" -gt 0 ] && churn="$churn (faulty rejoin at $rejoin_at)"
	# Poll every peer's status (and, as a cross-check, the bytes_sent of
	# each process's TCP sockets) until all are gone or the limit passes.
	: >"$dir/status.txt"
	: >"$dir/ss.txt"
	while fleet_any_alive; do
		if [ "$(echo "$(now) - $t0 > $run_limit" | bc)" = 1 ]; then
			echo "gossip.sh: $name ran past ${run_limit}s; killing it" >&2
			echo "timeout" >"$dir/timeout"
			stop_all
			break
		fi
		i=0
		while [ $i -lt "$polled" ]; do
			t=$(now)
			if st=$(fleet_ctl "p$i" --json status 2>/dev/null); then
				echo "$t $i $st" >>"$dir/status.txt"
				case $closer:$st in
				:*'"state":"closing"'*) [ "$i" -ge $((npeers - 1)) ] || closer=$i ;;
				esac
			fi
			i=$((i + 1))
		done
		if [ -n "$kill_at" ] && [ -z "$killed" ] && due "$kill_at"; then
			echo "== $name: SIGKILL p$((npeers - 1)) at $(echo "$(now) - $t0" | bc) s" >&2
			fleet_kill KILL "p$((npeers - 1))"
			killed=1
		fi
		if [ -n "$rejoin_at" ] && [ "$nfaulty" -gt 0 ] && [ -z "$rejoined" ] &&
			due "$rejoin_at"; then
			echo "== $name: the faulty peers rejoin under new ids at $(echo "$(now) - $t0" | bc) s" >&2
			for ((i = npeers - nfaulty; i < npeers; i++)); do
				fleet_kill KILL "p$i"
				fleet_wait_exit "p$i" 10 || true
				peer "$i" "127.0.0.1:$base" "$@"
			done
			rejoined=1
		fi
		if [ -n "$join_at" ] && [ -z "$joined" ] && due "$join_at"; then
			echo "== $name: p$npeers joins at $(echo "$(now) - $t0" | bc) s" >&2
			peer "$npeers" "127.0.0.1:$base" "$@"
			joined=1
			polled=$((npeers + 1))
		fi
		t=$(now)
		ss -tinpH 2>/dev/null | awk -v t="$t" '
			/^[^ \t]/ { pid = ""; if (match($0, /pid=[0-9]+,/)) pid = substr($0, RSTART + 4, RLENGTH - 5); next }
			pid != "" && match($0, /bytes_sent:[0-9]+/) { s[pid] += substr($0, RSTART + 11, RLENGTH - 11) }
			END { for (p in s) print t, p, s[p] }' >>"$dir/ss.txt" || true
		sleep "$poll"
	done
	if [ -n "$poller" ]; then
		kill "$poller" 2>/dev/null || true
		wait "$poller" 2>/dev/null || true
	fi
	fleet_reap "$dir/rc"
	echo "{\"system\":\"$name\",\"kind\":\"gossipd\",\"t0\":$t0,\"peers\":$polled,\"base\":$base,\"faulty\":[$(seq -s, $((npeers - nfaulty)) $((npeers - 1)))],\"epochs\":$epochs,\"options\":\"$* $extra$churn\"}" >"$dir/meta.json"
}

run_ddp() {
	name=$1
	dir=$out/raw/$name
	rm -rf "${dir:?}"
	mkdir -p "$dir"
	FLEET_LOGS=$dir
	fleet_port port
	echo "== $name: $npeers PyTorch DDP workers (gloo) on 127.0.0.1:$port, lr $ddp_lr ($epochs epochs)" >&2
	t0=$(now)
	r=0
	while [ $r -lt "$npeers" ]; do
		# stdout (the evaluations) to w$r.out, stderr to w$r.log
		# shellcheck disable=SC2016 # expanded by that sh
		fleet_start "w$r" sh -c 'exec "$@" >"$0"' "$dir/w$r.out" \
			env OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
			"$python" "$here/ddp_torch.py" --rank "$r" --world "$npeers" \
			--port "$port" --epochs "$epochs" --lr "$ddp_lr" --seed "$seed" \
			--eval-every "$eval_every" --eval-samples "$eval_samples"
		r=$((r + 1))
	done
	echo "{\"system\":\"$name\",\"kind\":\"ddp\",\"t0\":$t0,\"peers\":$npeers,\"epochs\":$epochs,\"options\":\"gloo lr $ddp_lr\"}" >"$dir/meta.json"
	while fleet_any_alive; do
		if [ "$(echo "$(now) - $t0 > $run_limit" | bc)" = 1 ]; then
			echo "gossip.sh: $name ran past ${run_limit}s; killing it" >&2
			echo "timeout" >"$dir/timeout"
			stop_all
			break
		fi
		sleep 0.5
	done
	fleet_reap "$dir/rc"
}

names=
for s in $systems; do
	case $s in
	delta) run_gossip delta --partition iid ;;
	noniid_delta) run_gossip noniid_delta --partition dirichlet:0.5 ;;
	saps) run_gossip saps --mode saps --values fp32 --density "$density" --partition iid ;;
	dense) run_gossip dense --mode dense --values fp32 --partition iid ;;
	noniid) run_gossip noniid --mode saps --values fp32 --density "$density" \
		--partition dirichlet:0.5 ;;
	ddp) run_ddp ddp ;;
	*:*:*)
		n=${s%%:*}
		rest=${s#*:}
		# a partition may hold a colon itself (dirichlet:0.5): the
		# options are what follows the last colon
		part=${rest%:*}
		# shellcheck disable=SC2046 # the options are single words
		run_gossip "$n" --partition "$part" $(echo "${rest##*:}" | tr , ' ')
		s=$n
		;;
	*) echo "gossip.sh: unknown system $s" >&2; exit 2 ;;
	esac
	names="$names $s"
done

# shellcheck disable=SC2086 # a list of words
"$python" "$here/gossip_report.py" --target "$target" --out "$out" $names
