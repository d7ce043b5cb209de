#!/bin/bash
# The C client (libgossipd) against real peers with --trainer external
# (gossipd-attach(7)), through tests/attach_client, a toy SGD trainer.
#
# A job of two peers, a and b, each with a process that trains: exchanges
# happen and are applied at step boundaries, values stay finite, status
# shows the process. A peer alone, c, whose vector nothing else touches, so
# that "unchanged" can be checked bit for bit: a wrong size is refused, a
# second process is refused naming the first one's pid, a SIGKILLed process
# leaves the peer detached with its values for the next one, the memory is
# sealed, a caller of another uid is refused. Back on a: a process that
# unmaps its memory early, and one that stops sending step while b goes on.
# Finally a process tells c to leave and gets stop.
. "$(dirname "$0")/fleet.sh"
CLIENT=$FLEET_BUILD/tests/attach_client
[ -x "$CLIENT" ] || fleet_skip "tests/attach_client not built (make check builds it)"
"$GOSSIPD" --help | grep -q -- '--trainer builtin|external' ||
	fleet_skip "this gossipd has no --trainer external"
fleet_keygen "$FLEET_DIR/key"
N=256

# run NAME ARGS...: attach_client ARGS in the foreground, its lines in
# $FLEET_DIR/NAME.out; returns its exit status.
run() {
	local name=$1
	shift
	timeout 120 "$CLIENT" "$@" >"$FLEET_DIR/$name.out" 2>&1
}
# ev NAME EVENT FILTER: FILTER (jq) of NAME's last EVENT line, in NAME.out
# (run) or NAME.log (fleet_start).
# Prints "none" if there is no such line (a fleet_fail in $(...) would end
# only the subshell), which no check accepts.
ev() {
	local name=$1 event=$2 filter=$3 f=$FLEET_DIR/$1.out line
	[ -f "$f" ] || f=$FLEET_LOGS/$name.log
	shift 3
	line=$(grep "^{\"event\":\"$event\"" "$f" | tail -n 1)
	if [ -z "$line" ]; then
		echo "none ($name has no $event line: $(tail -n 2 "$f" | tr '\n' ' '))"
		return 1
	fi
	echo "$line" | fleet_json "$filter" "$@"
}
# check NAME FILTER WHAT: FILTER (jq, over all of NAME's lines, slurped)
# must be true.
check() {
	local f=$FLEET_DIR/$1.out
	[ -f "$f" ] || f=$FLEET_LOGS/$1.log
	[ "$(grep '^{' "$f" | fleet_json "$2" -s)" = true ] ||
		fleet_fail "$1: $3: $(tail -n 4 "$f")"
}
gstat() { fleet_ctl "$1" --json stats | fleet_json "$2"; }
# clean NAME: its memory came with one close-on-exec descriptor, and none
# was left open at the end.
clean() {
	check "$1" '[.[] | select(.event == "attached")] | all(.new_fds == 1 and .cloexec)' \
		"the library held other descriptors than one close-on-exec socket"
	check "$1" '[.[] | select(.event == "detached")] | all(.fds_left == 0)' \
		"descriptors left open after detach"
}

# Each process brings its model (start own): what is checked here is
# training and mixing at boundaries; tests/attach_start.sh checks the start.
fleet_job "a b" --trainer external --interval 1 --density 0.25 --start own
fleet_job "c" --trainer external

# --- two processes train; exchanges are mixed in at step boundaries ---
fleet_start ta "$CLIENT" -s "$FLEET_DIR/a.sock" --params $N --steps 300 --sleep-ms 5 --seed 1
run tb -s "$FLEET_DIR/b.sock" --params $N --steps 300 --sleep-ms 5 --seed 2 --status ||
	fleet_fail "client on b: $(tail -n 3 "$FLEET_DIR/tb.out")"
fleet_wait_exit ta 120 || fleet_fail "client on a failed: $(fleet_tail ta 3)"
for t in ta tb; do
	check $t '[.[] | select(.event == "attached")][0] | .fresh and .step == 0' "not fresh at 0"
	check $t '[.[] | select(.event == "done")][0] | .finite and .step == 300 and
		.loss < .first_loss / 10' "did not train (loss must fall tenfold, values finite)"
	clean $t
done
mixed=$(( $(ev ta done .mixed) + $(ev tb done .mixed) ))
[ "$mixed" -gt 0 ] || fleet_fail "no mix applied at any boundary"
for p in a b; do
	[ "$(gstat $p .gossip.completed)" -gt 0 ] || fleet_fail "$p completed no exchange"
done
pid_b=$(ev tb attached .pid)
[ "$(ev tb status '.reply.attach | "\(.state) \(.pid) \(.params)"')" = "attached $pid_b $N" ] ||
	fleet_fail "b's status while attached: $(ev tb status .reply.attach -c)"
[ "$(ev tb status .reply.step)" = 300 ] || fleet_fail "b's status step: $(ev tb status .reply.step)"
[ "$(ev tb status .reply.trainer)" = external ] || fleet_fail "b's status does not say external"
fleet_wait_status b .attach.state detached "show its process detached" 10
fleet_ok "two processes trained 300 steps each ($mixed mixes applied; exchanges a $(gstat a \
.gossip.completed), b $(gstat b .gossip.completed)); loss $(ev ta done .first_loss) -> $(ev ta \
done .loss); status showed pid and step"

# --- c: a wrong size is refused and changes nothing ---
run c1 -s "$FLEET_DIR/c.sock" --params $N --steps 20 || fleet_fail "c1: $(tail -n 2 "$FLEET_DIR/c1.out")"
h1=$(ev c1 done .hash)
run c2 -s "$FLEET_DIR/c.sock" --params $((N + 1)) && fleet_fail "a second size was accepted"
[ "$(ev c2 error .errno)" = EINVAL ] || fleet_fail "wrong size: $(ev c2 error .errno), want EINVAL"
ev c2 error .message | grep -q "$((N + 1)) announced.*has $N" ||
	fleet_fail "wrong size: unclear error: $(ev c2 error .message)"
clean c2
fleet_status c .state >/dev/null || fleet_fail "c does not answer after a wrong size"
run c3 -s "$FLEET_DIR/c.sock" --params $N --steps 0 || fleet_fail "c3: $(tail -n 2 "$FLEET_DIR/c3.out")"
[ "$(ev c3 attached '"\(.fresh) \(.step) \(.hash)"')" = "false 20 $h1" ] ||
	fleet_fail "after a wrong size the vector changed: $(ev c3 attached . -c), want step 20 hash $h1"
fleet_ok "a wrong size is refused ($(ev c2 error .message)); the vector is unchanged"

# --- c: a second process while one is attached; then the first is killed ---
fleet_start hold "$CLIENT" -s "$FLEET_DIR/c.sock" --params $N --steps 7 --hold 600
fleet_wait_log hold '"event":"holding"' "reach its hold" 60
pid_hold=$(ev hold attached .pid)
run second -s "$FLEET_DIR/c.sock" --params $N && fleet_fail "a second process attached"
[ "$(ev second error .errno)" = EBUSY ] || fleet_fail "second process: $(ev second error .errno)"
ev second error .message | grep -q "pid $pid_hold" ||
	fleet_fail "the refusal does not name pid $pid_hold: $(ev second error .message)"
h2=$(ev hold done .hash)
fleet_kill KILL hold
fleet_wait_exit hold 10 && fleet_fail "the killed process exited 0"
fleet_wait_status c .attach.state detached "show the killed process detached" 20
grep -q "trainer pid $pid_hold went away" "$FLEET_DIR/c.log" || fleet_fail "c did not log the death"
run again -s "$FLEET_DIR/c.sock" --params $N --steps 3 || fleet_fail "re-attach after a kill failed"
[ "$(ev again attached '"\(.fresh) \(.step) \(.hash)"')" = "false 27 $h2" ] ||
	fleet_fail "after the kill: $(ev again attached . -c), want fresh false, step 27, hash $h2"
clean again
fleet_ok "a second process was refused ($(ev second error .message)); after SIGKILL c was \
detached and the next process found the values the killed one left"

# --- c: the memory is sealed ---
run seal -s "$FLEET_DIR/c.sock" --params $N --write-past ||
	fleet_fail "write-past: $(tail -n 2 "$FLEET_DIR/seal.out")"
[ "$(ev seal sealed '[.seals.shrink, .seals.grow, .seals.seal, .grow, .shrink, .pwrite_past,
	.touch_past]' -c)" = '[true,true,true,"EPERM","EPERM","EPERM","SIGBUS"]' ] ||
	fleet_fail "the memory is not sealed: $(ev seal sealed . -c)"
fleet_ok "the memory is sealed: shrink, grow, seal; ftruncate and writing past the end fail, a \
mapping past the end faults"

# --- c: a caller of another uid ---
if [ "$(id -u)" != 0 ]; then
	echo "skipped the other-uid check: it needs root to run a client as another uid"
elif ! command -v setpriv >/dev/null; then
	echo "skipped the other-uid check: setpriv (util-linux) not installed"
elif ! setpriv --reuid=65534 --regid=65534 --clear-groups "$CLIENT" --help >/dev/null 2>&1; then
	echo "skipped the other-uid check: uid 65534 cannot run $CLIENT (build tree not readable)"
else
	nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$CLIENT" "$@"; }
	nobody -s "$FLEET_DIR/c.sock" --params $N >"$FLEET_DIR/u1.out" 2>&1 &&
		fleet_fail "uid 65534 attached through a 0700 directory"
	[ "$(ev u1 error .errno)" = EACCES ] || fleet_fail "other uid: $(ev u1 error . -c)"
	# Past the file modes the daemon itself must refuse.
	chmod 711 "$FLEET_DIR"
	chmod 666 "$FLEET_DIR/c.sock"
	nobody -s "$FLEET_DIR/c.sock" --params $N >"$FLEET_DIR/u2.out" 2>&1
	rc=$?
	chmod 700 "$FLEET_DIR"
	chmod 600 "$FLEET_DIR/c.sock"
	[ $rc -ne 0 ] || fleet_fail "gossipd let uid 65534 attach"
	[ "$(ev u2 error .errno)" = EACCES ] || fleet_fail "other uid: $(ev u2 error . -c)"
	ev u2 error .message | grep -q uid || fleet_fail "other uid: $(ev u2 error .message)"
	clean u2
	fleet_status c .state >/dev/null || fleet_fail "c does not answer after the other uid"
	fleet_ok "another uid is refused: by the socket's modes, then by gossipd ($(ev u2 error \
.message))"
fi

# --- a: a process that unmaps its memory right after attaching ---
run early -s "$FLEET_DIR/a.sock" --params $N --steps 30 --close-early ||
	fleet_fail "close-early: $(tail -n 2 "$FLEET_DIR/early.out")"
check early '[.[] | select(.event == "done")][0].step == 330' "did not step on"
fleet_wait_status a .attach.state detached "show the close-early process detached" 10
run after -s "$FLEET_DIR/a.sock" --params $N --steps 5 || fleet_fail "attach after close-early"
check after '[.[] | select(.event == "attached")][0] | .fresh == false and .finite and .step == 330' \
	"the next process did not get a's finite model at step 330"
fleet_ok "a process that unmapped its memory early stepped on; the next found a intact"

# --- a: a process that stops sending step while b's goes on ---
fleet_start stall "$CLIENT" -s "$FLEET_DIR/a.sock" --params $N --steps 3 --hold 600
fleet_wait_log stall '"event":"holding"' "reach its hold" 60
pid_stall=$(ev stall attached .pid)
done0=$(gstat b .gossip.completed)
busy0=$(gstat b .gossip.busy_received)
failed0=$(gstat b .gossip.failed)
fleet_start tb2 "$CLIENT" -s "$FLEET_DIR/b.sock" --params $N --steps 200 --sleep-ms 10 --seed 3
n=0
while fleet_alive "$(fleet_pid tb2)"; do
	s=$(fleet_status a '"\(.attach.state) \(.attach.pid)"') ||
		fleet_fail "a stopped answering status while its process holds the vector"
	[ "$s" = "attached $pid_stall" ] || fleet_fail "a's attach while held: $s"
	n=$((n + 1))
	[ $n -gt 1200 ] && fleet_fail "b's process did not finish in 120 s: $(fleet_tail tb2 2)"
	sleep 0.1
done
fleet_wait_exit tb2 5 || fleet_fail "b's process failed: $(fleet_tail tb2 3)"
check tb2 '[.[] | select(.event == "done")][0].finite' "b's values not finite"
idle=$(fleet_status a .attach.idle_s)
done1=$(gstat b .gossip.completed)
busy1=$(gstat b .gossip.busy_received)
failed1=$(gstat b .gossip.failed)
# At density 0.25, four models' worth of mixes queue within 16 exchanges;
# past that a must answer busy (gossipd-attach(7)), never refuse.
[ $((busy1 - busy0)) -gt 0 ] ||
	fleet_fail "b's exchanges were never answered busy while a was held ($((done1 - done0)) \
completed, $((failed1 - failed0)) failed)"
[ $((failed1 - failed0)) -eq 0 ] ||
	fleet_fail "$((failed1 - failed0)) of b's exchanges failed while a was held"
fleet_kill KILL stall
fleet_wait_status a .attach.state detached "show the held process detached after SIGKILL" 20
fleet_ok "a process that stopped stepping ($(printf %.1f "$idle") s idle) held nothing up: a \
answered status throughout; of b's exchanges $((done1 - done0)) completed, $((busy1 - busy0)) \
were answered busy, $((failed1 - failed0)) failed"

# --- c: leave through the library: the next step says stop ---
run leave -s "$FLEET_DIR/c.sock" --params $N --steps 5 --leave || fleet_fail "leave: $(tail -n 3 \
"$FLEET_DIR/leave.out")"
check leave '[.[] | select(.event == "stopped")][0].stop' "no stop after leave"
fleet_wait_exit c 30 || fleet_fail "c did not exit 0 after leave: $(fleet_tail c 3)"
fleet_ok "a process told c to leave; its next step said stop and c exited 0"

# --- an evaluation of the job's model (mode share, a peer alone: no mix
# lands in between) and the own model back ---
fleet_job "e" --trainer external --mode share --interval 4
run ev -s "$FLEET_DIR/e.sock" --params $N --steps 6 --evaluate ||
	fleet_fail "evaluate: $(tail -n 3 "$FLEET_DIR/ev.out")"
check ev '[.[] | select(.event == "evaluate")][0] | .job_model == 1 and .restored == 1 and
	.seen != .own and .back == .own' "gd_client_evaluate did not show the job's model, or gd_client_train not the own back"
clean ev
fleet_ok "gd_client_evaluate shows the job's model, gd_client_train puts the own back"

# --- no peer at all ---
run none -s "$FLEET_DIR/none.sock" --params $N && fleet_fail "attached to nothing"
ev none error .message | grep -q "is gossipd running" || fleet_fail "no peer: $(ev none error .message)"
clean none
fleet_ok "no peer: $(ev none error .message)"
