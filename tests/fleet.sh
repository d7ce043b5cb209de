# The one fleet harness of gossipd, for bash. Sourced by the shell tests and
# by contrib/demo.sh, contrib/bench/gossip.sh, contrib/bench/membership.sh,
# contrib/testbed/testbed.sh and contrib/soak/soak.sh, through a path
# relative to the sourcing script.
#
# It owns every process a script starts and everything those need: a private
# directory ($FLEET_DIR, 0700: control sockets, logs, keys), job keys, TCP
# ports, start-up, the waits, JSON reads and the teardown. A script only says
# what its fleet is and what must hold.
#
# Why it is shaped so:
# - Scripts run side by side (two `make check`, a benchmark beside them), so
#   no port is fixed: fleet_port hands out random ports that nothing holds,
#   and fleet_up starts a job again on new ports when another process took
#   one of them between the check and the daemon's bind.
# - A failed check must not leave peers behind: every process is started
#   through fleet_start, and the EXIT trap stops them all, TERM first (a
#   gossipd leaves its job cleanly), KILL for what is left after
#   FLEET_GRACE seconds.
# - A wait that runs out says what it waited for and shows the log's tail:
#   a CI log is read from its end.
# - jq is the only reader of JSON (contrib/setup.sh installs it), so every
#   script reads `gossipctl --json` output the same way.
#
# Before sourcing, set FLEET_BUILD (the build directory holding src/gossipd;
# default: $top_builddir, else the tree this file is in) and, to keep the
# directory after the end, FLEET_KEEP=1 (also KEEP_TEST_DIR=1, for tests).
# Tests exit 0 pass, 77 skip, else fail (the automake protocol).

FLEET_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FLEET_BUILD=${FLEET_BUILD:-${top_builddir:-$FLEET_TOP}}
GOSSIPD=$FLEET_BUILD/src/gossipd
GOSSIPCTL=$FLEET_BUILD/src/gossipctl
NETPEER=$FLEET_BUILD/tests/netpeer
# The Python of the scripts' own checks and reports, never of a fleet's.
PYTHON=${PYTHON:-/usr/bin/python3}
FLEET_DATA=/usr/share/datasets/fashion-mnist
FLEET_GRACE=${FLEET_GRACE:-3}
declare -A FLEET_PID=()
declare -A FLEET_PORT_GIVEN=()
declare -A FLEET_PORT=()
declare -A FLEET_ARGS=()

# With FLEET_DUMP_LOGS=N, a failure first shows the last N lines of every
# log, and its reason last, where a reader of the tail finds it.
fleet_fail() {
	local f
	if [ -n "${FLEET_DUMP_LOGS:-}" ]; then
		for f in "$FLEET_LOGS"/*.log; do
			[ -f "$f" ] || continue
			echo "== $f"
			cut -c1-2000 "$f" | tail -n "$FLEET_DUMP_LOGS"
		done >&2
	fi
	echo "FAIL: $*" >&2
	exit 1
}
fleet_skip() { echo "SKIP: $*" >&2; exit 77; }
fleet_ok() { echo "ok: $*"; }

command -v jq >/dev/null || fleet_skip "jq not installed (contrib/setup.sh installs it)"

FLEET_DIR=$(mktemp -d "${TMPDIR:-/tmp}/gossipd-fleet.XXXXXX") || fleet_fail "mktemp"
chmod 700 "$FLEET_DIR"
# Where fleet_start writes NAME.log; a script that keeps its logs elsewhere
# (a benchmark's output directory) sets it.
FLEET_LOGS=$FLEET_DIR

fleet_need_data() {
	[ -f "$FLEET_DATA/train-images-idx3-ubyte.gz" ] ||
		fleet_skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"
}

# fleet_keygen PATH: a new job key.
fleet_keygen() {
	"$GOSSIPCTL" keygen "$1" >/dev/null || fleet_fail "keygen $1"
}

# fleet_port VAR [N]: sets VAR to a port P such that P .. P+N-1 (N = 1) are
# held by no TCP socket of this machine and were not handed out before by this
# script. Drawn from 20000-29999, below the ephemeral range, so that no
# outgoing connection takes one meanwhile; with SRANDOM, not RANDOM: two
# scripts seeded alike (a soak and its baseline, started together) drew the
# same ports, the second lost each to the first and started its job again
# twice, 50 s late, its start-up stalling the first's training; and a
# seeded script's draws after it depended on how many ports were taken.
fleet_port() {
	# Odd names: VAR is set through them, and must not be one of them.
	local _fp _fk _fok
	for _ in $(seq 1000); do
		_fp=$((20000 + SRANDOM % 10000))
		_fok=1
		for ((_fk = _fp; _fk < _fp + ${2:-1}; _fk++)); do
			if [ -n "${FLEET_PORT_GIVEN[$_fk]:-}" ] ||
			    [ -n "$(ss -Htan "( sport = :$_fk )" 2>/dev/null)" ]; then
				_fok=0
				break
			fi
		done
		if [ $_fok -eq 1 ]; then
			for ((_fk = _fp; _fk < _fp + ${2:-1}; _fk++)); do FLEET_PORT_GIVEN[$_fk]=1; done
			printf -v "$1" %s "$_fp"
			return 0
		fi
	done
	fleet_fail "no free port in 20000-29999"
}

# fleet_start NAME CMD...: runs CMD in the background, stdout and stderr to
# $FLEET_LOGS/NAME.log; fleet_pid NAME gives its pid until it is reaped.
fleet_start() {
	local name=$1
	shift
	"$@" >"$FLEET_LOGS/$name.log" 2>&1 &
	FLEET_PID[$name]=$!
}

# fleet_gossipd NAME ARGS...: a gossipd in the foreground of its process,
# with its control socket at $FLEET_DIR/NAME.sock unless ARGS name one.
fleet_gossipd() {
	local name=$1 a ctl=1
	shift
	for a in "$@"; do [ "$a" = --control ] && ctl=; done
	fleet_start "$name" "$GOSSIPD" --foreground ${ctl:+--control "$FLEET_DIR/$name.sock"} "$@"
}

fleet_pid() {
	[ -n "${FLEET_PID[$1]:-}" ] || fleet_fail "no process $1"
	echo "${FLEET_PID[$1]}"
}


# fleet_kill SIGNAL NAME...
fleet_kill() {
	local sig=$1 n
	shift
	for n in "$@"; do kill "-$sig" "$(fleet_pid "$n")" || fleet_fail "kill -$sig $n"; done
}

# fleet_alive PID: it runs (a zombie, still to be reaped, does not).
# Without a fork: the soak calls it for each of its 32 peers every second.
fleet_alive() {
	local st
	kill -0 "$1" 2>/dev/null && read -r st 2>/dev/null <"/proc/$1/stat" || return 1
	st=${st##*) }
	[ "${st%% *}" != Z ]
}

fleet_tail() { tail -n "${2:-5}" "$FLEET_LOGS/$1.log" 2>/dev/null; }

# fleet_wait_up NAME [SECONDS [REGEX]]: until NAME's log has a line matching
# REGEX (default: gossipd's last start-up line, written once its endpoint and
# control socket are open, whatever its trainer). Returns 3 if the process ended because its port
# was taken (see fleet_up); fails if it ended otherwise or took too long.
fleet_wait_up() {
	local name=$1 secs=${2:-60} re=${3:-', control socket |joining through |waits for its training process'} pid n=0
	pid=${FLEET_PID[$name]:?no process $name}
	until grep -Eqs -- "$re" "$FLEET_LOGS/$name.log"; do
		if ! fleet_alive "$pid"; then
			wait "$pid" 2>/dev/null || true
			unset "FLEET_PID[$name]"
			grep -qs 'address in use' "$FLEET_LOGS/$name.log" && return 3
			fleet_fail "$name exited before it was up: $(fleet_tail "$name" 10)"
		fi
		n=$((n + 1))
		[ $n -gt $((secs * 20)) ] && fleet_fail "$name not up within $secs s: $(fleet_tail "$name")"
		sleep 0.05
	done
}

# fleet_up FN ARGS...: runs FN, which starts processes on ports from
# fleet_port and returns what `fleet_wait_up` of each returned. When that is
# 3 (a port taken), the processes FN started are stopped and FN runs again,
# on new ports: 5 tries.
fleet_up() {
	local try rc before n
	for try in 1 2 3 4 5; do
		before=" ${FLEET_PID[*]} "
		rc=0
		"$@" || rc=$?
		[ $rc -eq 3 ] || return $rc
		echo "fleet: a port was taken (try $try); starting again on other ports" >&2
		for n in "${!FLEET_PID[@]}"; do
			case $before in *" ${FLEET_PID[$n]} "*) ;; *) fleet_stop "$n" ;; esac
		done
	done
	fleet_fail "$1: ports taken on 5 tries"
}

# fleet_job "NAME..." ARGS...: a job of one gossipd per NAME, each on a port
# of its own (FLEET_PORT[NAME]) with --shard I/N, the key $FLEET_DIR/key and
# every one of them in --peers, then FLEET_ARGS[NAME] and ARGS; up once all
# are, on other ports while one is taken.
fleet_job() {
	fleet_up fleet_job_on "$@"
}
fleet_job_on() {
	local names n i=0 peers=
	read -ra names <<<"$1"
	shift
	for n in "${names[@]}"; do
		fleet_port "FLEET_PORT[$n]"
		peers+=${peers:+,}127.0.0.1:${FLEET_PORT[$n]}
	done
	for n in "${names[@]}"; do
		# shellcheck disable=SC2086 # FLEET_ARGS[NAME] is a list of words
		fleet_gossipd "$n" --listen "127.0.0.1:${FLEET_PORT[$n]}" --key-file "$FLEET_DIR/key" \
			--shard "$i/${#names[@]}" --peers "$peers" ${FLEET_ARGS[$n]:-} "$@"
		i=$((i + 1))
	done
	for n in "${names[@]}"; do fleet_wait_up "$n" || return; done
}

# Membership: lingering members (one step, a tiny evaluation: dozens fit on
# 2 cores) whose views are all read at once, many times a second, so that a
# wrong state cannot slip by between two looks. FLEET_ID[ADDR] is the id of
# the process that answered there last; FLEET_STOPPED[NAME] marks one that
# is SIGSTOPped, whose view is not asked for and who is not expected alive.
declare -A FLEET_ID=()
declare -A FLEET_STOPPED=()

# fleet_member NAME ARGS...: a member on FLEET_PORT[NAME], key $FLEET_DIR/key.
fleet_member() {
	local name=$1
	shift
	fleet_gossipd "$name" --listen "127.0.0.1:${FLEET_PORT[$name]}" --key-file "$FLEET_DIR/key" \
		--max-steps 1 --eval-samples 200 --linger yes "$@"
}

# fleet_member_up NAME: fleet_wait_up, then notes NAME's id.
fleet_member_up() {
	fleet_wait_up "$1" || return
	FLEET_ID[127.0.0.1:${FLEET_PORT[$1]}]=$(fleet_status "$1" .id) || fleet_fail "$1: no status"
}

# fleet_member_job N K SEED [FILES [UNREACHABLE]]: members p0 .. pN-1, each
# told of itself, K others and, if UNREACHABLE (default 1), an address
# nobody listens on; if FILES is 1, the even-numbered ones read their list
# from a file. The others come from SEED, not from the run: whether the
# lists join into one job is then decided once, not by chance.
fleet_member_job() {
	fleet_up fleet_member_job_on "$@"
}
fleet_member_job_on() {
	local n=$1 i j u list others
	mapfile -t others < <(awk -v n="$n" -v k="$2" -v seed="$3" 'BEGIN {
		srand(seed)
		for (i = 0; i < n; i++) {
			split("", took)
			for (c = 0; c < k; ) {
				j = int(rand() * n)
				if (j != i && !(j in took)) { took[j]; printf " %d", j; c++ }
			}
			print ""
		}
	}')
	for ((i = 0; i < n; i++)); do fleet_port "FLEET_PORT[p$i]"; done
	for ((i = 0; i < n; i++)); do
		list=127.0.0.1:${FLEET_PORT[p$i]}
		for j in ${others[i]}; do list+=,127.0.0.1:${FLEET_PORT[p$j]}; done
		if [ "${5:-1}" = 1 ]; then
			fleet_port u
			list+=,127.0.0.1:$u
		fi
		if [ "${4:-0}" = 1 ] && [ $((i % 2)) = 0 ]; then
			{ echo "# peers of p$i"; sed 's/,/   # a member\n/g; s/$/   # a member/' <<<"$list"; } \
				>"$FLEET_DIR/p$i.peers"
			list=@$FLEET_DIR/p$i.peers
		fi
		fleet_member "p$i" --peers "$list"
	done
	for ((i = 0; i < n; i++)); do fleet_member_up "p$i" || return; done
}

# fleet_member_join NAME VIA: a member that joins through member VIA.
fleet_member_join() {
	fleet_up fleet_member_join_on "$@"
}
fleet_member_join_on() {
	fleet_port "FLEET_PORT[$1]"
	fleet_member "$1" --join "127.0.0.1:${FLEET_PORT[$2]}"
	fleet_member_up "$1"
}

# The checks on one look at all views ($views: NAME -> `peers` entries).
# $names are the running, unstopped members, $alive their addresses,
# $healthy those of them not expected to go, $addr NAME -> address.
# Prints the first live member that a view holds dead or left, else the
# value of the predicate: agree (every view lists every one of $alive
# alive) and see(NAME; STATE) (every view but NAME's own lists NAME so).
FLEET_MEMBER_JQ='
([inputs | {key: (input_filename | sub(".*/"; "") | rtrimstr(".json")), value: .peers}]
	| from_entries) as $views
| def entry($n; $a): [($views[$n] // [])[] | select(.addr == $a)] | last;
def agree: all($names[]; . as $n | all($alive[]; entry($n; .) as $e |
	$e.state == "alive" and $e.id == $ids[.]));
def see($t; $state): all($names[] | select(. != $t); entry(.; $addr[$t]) as $e |
	$e.state == $state and $e.id == $ids[$addr[$t]]);
first($views | to_entries[] | .key as $n | .value[]
	| select(.addr as $a | any($healthy[]; . == $a))
	| select(.id == $ids[.addr] and (.state == "dead" or .state == "left"))
	| "\($n) sees live peer \(.addr) as \(.state)") // '

# fleet_member_look PRED [ADDR...]: one look at the views of all running,
# unstopped members; fails if one holds another of them dead or left (but
# the ADDRs, expected to go), else returns whether PRED holds. The views
# are left in $FLEET_DIR/views.
fleet_member_look() {
	local pred=$1 n i names=() pids=() healthy= alive= addrs= ids= a out
	shift
	rm -rf "$FLEET_DIR/views"
	mkdir "$FLEET_DIR/views"
	for n in "${!FLEET_PID[@]}"; do
		[ -z "${FLEET_STOPPED[$n]:-}" ] && fleet_alive "${FLEET_PID[$n]}" || continue
		names+=("$n")
		fleet_ctl "$n" --json peers >"$FLEET_DIR/views/$n.json" 2>&1 &
		pids+=($!)
	done
	for i in "${!names[@]}"; do
		n=${names[i]}
		a=127.0.0.1:${FLEET_PORT[$n]}
		alive+=${alive:+,}"\"$a\""
		case " $* " in *" $a "*) ;; *) healthy+=${healthy:+,}"\"$a\"" ;; esac
		wait "${pids[i]}" && continue
		# A leaving peer closes its control socket a moment before its
		# process ends: refused, reset or cut short.
		case " $* " in *" $a "*) rm -f "$FLEET_DIR/views/$n.json" ;;
		*) fleet_fail "$n: peers failed: $(cat "$FLEET_DIR/views/$n.json")" ;; esac
	done
	for a in "${!FLEET_ID[@]}"; do ids+=${ids:+,}"\"$a\":\"${FLEET_ID[$a]}\""; done
	for n in "${!FLEET_PORT[@]}"; do addrs+=${addrs:+,}"\"$n\":\"127.0.0.1:${FLEET_PORT[$n]}\""; done
	a=$(printf '"%s",' "${names[@]}")
	out=$(jq -n -r --argjson names "[${a%,}]" --argjson alive "[$alive]" \
		--argjson healthy "[$healthy]" --argjson addr "{$addrs}" --argjson ids "{$ids}" \
		"$FLEET_MEMBER_JQ($pred)" "$FLEET_DIR"/views/*.json) ||
		fleet_fail "views are not JSON: $(head -c 500 "$FLEET_DIR"/views/*.json)"
	case $out in
	true) return 0 ;;
	false) return 1 ;;
	*) fleet_fail "$out" ;;
	esac
}

# fleet_now: microseconds since the epoch. fleet_since T: seconds since T.
fleet_now() { echo "${EPOCHREALTIME/./}"; }
fleet_since() {
	local us=$(($(fleet_now) - $1))
	printf '%d.%06d\n' $((us / 1000000)) $((us % 1000000))
}

# fleet_member_until PRED SECONDS WHAT [ADDR...]: fleet_member_look, 20 times
# a second, until PRED holds; sets FLEET_TOOK to the seconds that took.
fleet_member_until() {
	local pred=$1 secs=$2 what=$3 t0
	shift 3
	t0=$(fleet_now)
	until fleet_member_look "$pred" "$@"; do
		[ $(($(fleet_now) - t0)) -gt $((secs * 1000000)) ] &&
			fleet_fail "$what: not within $secs s; views: $(cat "$FLEET_DIR"/views/*.json | head -c 3000)"
		sleep 0.05
	done
	FLEET_TOOK=$(fleet_since "$t0")
}

# fleet_netpeer NAME ARGS...: tests/netpeer listening on a port of its own,
# FLEET_PORT[NAME], up once it says "ready"; on another port while one is
# taken.
fleet_netpeer() {
	fleet_up fleet_netpeer_on "$@"
}
fleet_netpeer_on() {
	local name=$1
	shift
	fleet_port "FLEET_PORT[$name]"
	fleet_start "$name" "$NETPEER" --listen "127.0.0.1:${FLEET_PORT[$name]}" "$@"
	fleet_wait_up "$name" 10 '^ready'
}

# fleet_netpeer_stat NAME FILTER: FILTER (jq) of the last stats line of
# tests/netpeer NAME.
fleet_netpeer_stat() {
	sed -n 's/^stats //p' "$FLEET_LOGS/$1.log" | tail -n 1 | fleet_json "$2"
}

# fleet_wait_socket PATH [SECONDS]
fleet_wait_socket() {
	local n=0
	until [ -S "$1" ]; do
		n=$((n + 1))
		[ $n -gt $((${2:-20} * 20)) ] && fleet_fail "socket $1 did not appear in ${2:-20} s"
		sleep 0.05
	done
}

# fleet_wait_log NAME REGEX WHAT [SECONDS]: until NAME's log has a line
# matching REGEX (grep -E); else fails "NAME did not WHAT" with the log's tail.
fleet_wait_log() {
	local n=0
	until grep -Eqs -- "$2" "$FLEET_LOGS/$1.log"; do
		n=$((n + 1))
		[ $n -gt $((${4:-30} * 20)) ] && fleet_fail "$1 did not $3 in ${4:-30} s: $(fleet_tail "$1")"
		sleep 0.05
	done
}

# fleet_json FILTER [JQ OPTION...]: jq -r FILTER of the JSON on stdin (a
# missing field is "null"; has("f") tells); fails on input that is not JSON.
fleet_json() {
	local filter=$1
	shift
	jq -r "$@" "$filter"
}

# fleet_ctl NAME ARGS...: gossipctl ARGS on NAME's control socket.
fleet_ctl() {
	local name=$1
	shift
	"$GOSSIPCTL" -s "$FLEET_DIR/$name.sock" "$@"
}

# fleet_sum FILTER NAME...: FILTER (jq, a number) of each NAME's `stats`,
# summed; one that does not answer counts 0.
fleet_sum() {
	local filter=$1 t=0 n r
	shift
	for n in "$@"; do
		r=$(fleet_ctl "$n" --json stats 2>/dev/null | fleet_json "$filter") || r=0
		t=$((t + r))
	done
	echo $t
}

# fleet_status NAME FILTER: FILTER (jq) of NAME's `status`; fails (status
# 1) quietly when the peer does not answer.
fleet_status() {
	local s
	s=$(fleet_ctl "$1" --json status 2>/dev/null) || return 1
	echo "$s" | fleet_json "$2"
}

# fleet_wait_status NAME FILTER VALUE WHAT [SECONDS]: until FILTER of NAME's
# status is VALUE; fails early if NAME's process ends.
fleet_wait_status() {
	local n=0 v=
	until v=$(fleet_status "$1" "$2") && [ "$v" = "$3" ]; do
		fleet_alive "${FLEET_PID[$1]:-}" ||
			fleet_fail "$1 ended before it did $4: $(fleet_tail "$1")"
		n=$((n + 1))
		[ $n -gt $((${5:-30} * 10)) ] &&
			fleet_fail "$1 did not $4 in ${5:-30} s ($2 is ${v:-no answer}): $(fleet_tail "$1" 3)"
		sleep 0.1
	done
}

# fleet_wait_exit NAME SECONDS: NAME's exit status, or fails after SECONDS.
fleet_wait_exit() {
	local pid n=0 rc=0
	pid=${FLEET_PID[$1]:?no process $1}
	while fleet_alive "$pid"; do
		n=$((n + 1))
		[ $n -gt $(($2 * 20)) ] && fleet_fail "$1 still running after $2 s: $(fleet_tail "$1")"
		sleep 0.05
	done
	wait "$pid" 2>/dev/null || rc=$?
	unset "FLEET_PID[$1]"
	return $rc
}

# fleet_stop NAME...: TERM (CONT first, for a stopped one), then KILL after
# FLEET_GRACE seconds; reaps them. Their exit statuses are not looked at.
fleet_stop() {
	local n pids=() p left k=0
	for n in "$@"; do
		[ -n "${FLEET_PID[$n]:-}" ] || continue
		pids+=("${FLEET_PID[$n]}")
		unset "FLEET_PID[$n]"
	done
	[ ${#pids[@]} -gt 0 ] || return 0
	kill -CONT "${pids[@]}" 2>/dev/null || true
	kill -TERM "${pids[@]}" 2>/dev/null || true
	while [ $k -lt $((FLEET_GRACE * 20)) ]; do
		left=0
		for p in "${pids[@]}"; do fleet_alive "$p" && left=1; done
		[ $left -eq 0 ] && break
		sleep 0.05
		k=$((k + 1))
	done
	kill -KILL "${pids[@]}" 2>/dev/null || true
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	return 0
}

# fleet_names: the names of the processes not yet reaped.
fleet_names() { echo "${!FLEET_PID[@]}"; }

# fleet_any_alive: whether any of them still runs.
fleet_any_alive() {
	local n
	for n in "${!FLEET_PID[@]}"; do fleet_alive "${FLEET_PID[$n]}" && return 0; done
	return 1
}

# fleet_reap FILE: waits for every process (SECONDS each, default 10) and
# writes a line "PID EXIT-STATUS" for each to FILE.
fleet_reap() {
	local n pid rc
	: >"$1"
	for n in "${!FLEET_PID[@]}"; do
		pid=${FLEET_PID[$n]}
		rc=0
		fleet_wait_exit "$n" "${2:-10}" || rc=$?
		echo "$pid $rc" >>"$1"
	done
}

# fleet_sanitized: the files under $FLEET_DIR and $FLEET_LOGS that hold a
# sanitizer's report, each shown from the report on. A process of a
# sanitizer build reports into its log, and fleet_stop looks at no exit
# status (a leak is only reported at the exit TERM asks for), so its log is
# where a report is found.
fleet_sanitized() {
	local f found
	found=$(grep -rlsIE 'SUMMARY: [A-Za-z]+Sanitizer' "$FLEET_DIR" "$FLEET_LOGS" | sort -u)
	for f in $found; do
		echo "== $f"
		sed -n '/^==[0-9]*==\|^WARNING: ThreadSanitizer\|runtime error:/,$p' "$f" | head -n 80
	done >&2
	echo "$found"
}

# fleet_teardown: stops everything still running, fails the script if a log
# holds a sanitizer's report, and removes $FLEET_DIR (unless FLEET_KEEP or
# KEEP_TEST_DIR). The EXIT trap; a script with more to undo calls it from a
# trap of its own.
fleet_teardown() {
	local sanitized
	# shellcheck disable=SC2046 # names are single words
	fleet_stop $(fleet_names)
	sanitized=$(fleet_sanitized)
	if [ -n "${FLEET_KEEP:-}${KEEP_TEST_DIR:-}" ]; then
		[ -z "${KEEP_TEST_DIR:-}" ] || echo "kept $FLEET_DIR" >&2
	else
		rm -rf "$FLEET_DIR"
	fi
	if [ -n "$sanitized" ]; then
		echo "FAIL: a sanitizer reported in ${sanitized//$'\n'/ }" >&2
		exit 1
	fi
}
trap fleet_teardown EXIT
# Without these an interrupted script would die without its EXIT trap.
trap 'exit 130' INT TERM HUP
