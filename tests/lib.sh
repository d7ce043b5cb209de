# Shared helpers of the shell tests. Source it; it sets GOSSIPD, GOSSIPCTL,
# a private temporary directory T (removed on exit, with every daemon the
# test started) and fail/skip helpers that speak the automake protocol.

: "${top_builddir:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${top_srcdir:=$top_builddir}"
GOSSIPD="$top_builddir/src/gossipd"
GOSSIPCTL="$top_builddir/src/gossipctl"
PYTHON=/usr/bin/python3
DATA=/usr/share/datasets/fashion-mnist
T=$(mktemp -d /tmp/gossipd-test.XXXXXX)
chmod 700 "$T"
PIDS=

# KEEP_TEST_DIR=1 keeps $T (logs, sockets, checkpoints) for a post-mortem.
cleanup() {
	for p in $PIDS; do kill -9 "$p" 2>/dev/null; done
	if [ -n "${KEEP_TEST_DIR:-}" ]; then echo "kept $T" >&2; else rm -rf "$T"; fi
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*" >&2; exit 77; }
ok() { echo "ok: $*"; }

need_data() {
	[ -f "$DATA/train-images-idx3-ubyte.gz" ] ||
		skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"
}

# start NAME ARGS...: gossipd in the background, log in $T/NAME.log,
# pid in the variable pid_NAME.
start() {
	name=$1; shift
	"$GOSSIPD" --foreground "$@" >"$T/$name.log" 2>&1 &
	eval "pid_$name=$!"
	PIDS="$PIDS $!"
}

# wait_socket PATH [SECONDS]
wait_socket() {
	i=0
	while [ ! -S "$1" ]; do
		i=$((i + 1))
		[ $i -gt $((${2:-20} * 10)) ] && fail "socket $1 did not appear"
		sleep 0.1
	done
}

# wait_log NAME PATTERN WHAT [SECONDS]: until $T/NAME.log has a line
# matching PATTERN; else fail "NAME did not WHAT" with the log's tail.
wait_log() {
	i=0
	until grep -q -- "$2" "$T/$1.log"; do
		i=$((i + 1))
		[ $i -gt $((${4:-30} * 10)) ] && fail "$1 did not $3: $(tail -5 "$T/$1.log")"
		sleep 0.1
	done
}

# wait_exit PID SECONDS: exit status of PID, or fail after SECONDS.
wait_exit() {
	i=0
	while kill -0 "$1" 2>/dev/null; do
		if [ -r "/proc/$1/stat" ] && [ "$(cut -d' ' -f3 "/proc/$1/stat")" = Z ]; then
			break
		fi
		i=$((i + 1))
		[ $i -gt $(($2 * 10)) ] && fail "pid $1 still running after $2 s"
		sleep 0.1
	done
	wait "$1"
}

# json_get FIELD: read a JSON object on stdin, print one field.
json_get() {
	$PYTHON -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}
