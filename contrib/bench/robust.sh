#!/bin/bash
# Faulty members against robust mixing (issue 32), side by side in one run
# on this machine: for each seed, the job of PEERS built-in peers (iid
# shards, the daemon's defaults) honest, the same honest job with trust off
# (--clip-factor 0: what gossipd did before robust mixing, for time and
# bytes), and the job with its last FAULTY peers faulty, one kind at a
# time (tests/gossipd_faulty --fault KIND, src/fault.h), each kind also
# with trust off where OFF_KINDS names it. The runs go one after the other
# through contrib/bench/gossip.sh (its header defines the figures); every
# figure of a faulty job is its honest peers' alone, and the report adds
# the F1 with which the honest peers' suspicion picks out the faulty
# members (suspicion >= 0.5: the suspects each honest peer's log names at
# exit, else its latest look in `peers`).
#
# Run from the build directory (or set BUILD), after
# `make src/gossipd src/gossipctl tests/gossipd_faulty`:
#     contrib/bench/robust.sh [OUTDIR]      (default OUTDIR: ./bench-robust)
# Environment (defaults in brackets):
#   PEERS [16]  FAULTY [4]  EPOCHS [3]  SEEDS ["1 2 3"]
#   KINDS ["scale:0 stale signflip alie bitflip scale:1000 sybil"]
#         sybil: zeroed members (scale:0) that, once peer 0 suspects half
#         of them (SYBIL_AT [suspected], or seconds after launch), are
#         killed and rejoin on their addresses under new ids (gossip.sh's
#         REJOIN_AT)
#   OFF_KINDS ["scale:0"]  kinds also run with trust off (may be empty)
#   EVAL_SAMPLES [1000]  TARGET [0.80]  RUN_LIMIT [600]  POLL [1]
#   and gossip.sh's other variables (GOSSIPD_OPTS is taken for --fault)
# Output: OUTDIR/sSEED/RUN/ (gossip.sh's files for each run), OUTDIR/table.md
# (also printed: contrib/bench/robust_report.py, medians over the seeds).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-./bench-robust}
build=${BUILD:-.}
peers=${PEERS:-16}
faulty=${FAULTY:-4}
seeds=${SEEDS:-1 2 3}
kinds=${KINDS:-scale:0 stale signflip alie bitflip scale:1000 sybil}
off_kinds=${OFF_KINDS-scale:0}
python=${PYTHON:-/usr/bin/python3}

if [ ! -x "$build/tests/gossipd_faulty" ]; then
	echo "robust.sh: $build/tests/gossipd_faulty not found: run 'make tests/gossipd_faulty' in the build directory, or set BUILD" >&2
	exit 2
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
export BUILD=$build PEERS=$peers EPOCHS=${EPOCHS:-3} EVAL_SAMPLES=${EVAL_SAMPLES:-1000}
export TARGET=${TARGET:-0.80} RUN_LIMIT=${RUN_LIMIT:-600} POLL=${POLL:-1} FAULTY=$faulty

# run SEED NAME FAULT OPTIONS: one gossip.sh run, its report quiet
run() {
	local seed=$1 name=$2 fault=$3 opts=$4 rejoin=
	[ "$fault" != sybil ] || { fault=scale:0; rejoin=${SYBIL_AT:-suspected}; }
	echo "== seed $seed: $name" >&2
	SEED=$seed SYSTEMS="$name:iid:$opts" GOSSIPD_OPTS=${fault:+--fault $fault} REJOIN_AT=$rejoin \
		"$here/gossip.sh" "$out/s$seed/$name" >"$out/s$seed/$name.out" 2>&1 ||
		echo "robust.sh: seed $seed $name failed: see $out/s$seed/$name.out" >&2
}

names="honest off"
for seed in $seeds; do
	mkdir -p "$out/s$seed"
	run "$seed" honest "" ""
	run "$seed" off "" --clip-factor,0
	for k in $kinds; do
		run "$seed" "${k//[:.]/_}" "$k" ""
		case " $off_kinds " in *" $k "*) run "$seed" "${k//[:.]/_}_off" "$k" --clip-factor,0 ;; esac
	done
done
for k in $kinds; do
	names="$names ${k//[:.]/_}"
	case " $off_kinds " in *" $k "*) names="$names ${k//[:.]/_}_off" ;; esac
done
# shellcheck disable=SC2086 # lists of words
"$python" "$here/robust_report.py" --out "$out" --seeds "$seeds" $names
