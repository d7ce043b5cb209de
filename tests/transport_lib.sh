# Needs bash (/dev/tcp); the tests re-exec themselves under bash.
# Helpers for the transport tests (sourced). Peers are tests/netpeer
# processes on 127.0.0.1, on ports drawn from 20000-29999 (outside the
# ephemeral range); a port found busy is replaced by another.

NETPEER="${top_builddir:-.}/tests/netpeer"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gd-transport.XXXXXX")
PIDS=""

cleanup() {
	for p in $PIDS; do
		kill -9 "$p" 2>/dev/null
	done
	wait 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT

die() {
	echo "FAIL: $*"
	for f in "$WORK"/*.log; do
		[ -f "$f" ] || continue
		echo "--- $f"
		cut -c1-2000 "$f" | tail -n 40
	done
	exit 1
}

# A port nobody listens on (a later bind may still lose a race: see
# start_peer).
free_port() {
	while :; do
		p=$((20000 + ($(od -An -N2 -tu2 /dev/urandom) % 10000)))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null &&
		    ! (exec 3<>"/dev/tcp/127.0.0.1/$((p + 1))") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
}

mkkey() {
	"$NETPEER" keygen "$1" || die "keygen $1"
}

# start_peer NAME PORT ARGS...: run netpeer listening on 127.0.0.1:PORT in
# the background, logging to $WORK/NAME.log; wait for "ready". On success
# sets PID_NAME; returns 3 if the port was taken, 1 on other failures.
start_peer() {
	name=$1
	port=$2
	shift 2
	"$NETPEER" --listen "127.0.0.1:$port" "$@" >"$WORK/$name.log" 2>&1 &
	pid=$!
	i=0
	while [ $i -lt 200 ]; do
		if grep -qs '^ready' "$WORK/$name.log"; then
			eval "PID_$name=$pid"
			PIDS="$PIDS $pid"
			return 0
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid"
			return $?
		fi
		sleep 0.05
		i=$((i + 1))
	done
	kill -9 "$pid"
	return 1
}

# start_any NAME ARGS...: start_peer on free ports until one binds; sets
# PORT_NAME and PID_NAME.
start_any() {
	name=$1
	shift
	for try in 1 2 3 4 5; do
		port=$(free_port)
		start_peer "$name" "$port" "$@"
		rc=$?
		if [ $rc -eq 0 ]; then
			eval "PORT_$name=$port"
			return 0
		fi
		[ $rc -eq 3 ] || die "$name did not start (rc $rc)"
	done
	die "no free port for $name"
}

# wait_line FILE REGEX SECONDS
wait_line() {
	i=0
	while [ $i -lt $(($3 * 20)) ]; do
		grep -Eqs "$2" "$1" && return 0
		sleep 0.05
		i=$((i + 1))
	done
	return 1
}

# wait_pid PID SECONDS: its exit status, or 124 after SECONDS.
wait_pid() {
	i=0
	while kill -0 "$1" 2>/dev/null; do
		if [ $i -ge $(($2 * 20)) ]; then
			kill -9 "$1"
			wait "$1" 2>/dev/null
			return 124
		fi
		sleep 0.05
		i=$((i + 1))
	done
	wait "$1"
}

# stat_of NAME PATH: a number from NAME's final stats JSON (jq path).
stat_of() {
	sed -n 's/^stats //p' "$WORK/$1.log" | tail -n 1 | jq -r "$2"
}
