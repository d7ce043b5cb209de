#!/bin/bash
# gossipd under systemd, without systemd. A real peer, started with the
# example job config and NOTIFY_SOCKET on a listener of our own
# (tests/notify_listen.py), says READY=1 exactly once, and at that moment
# its control socket answers status; STATUS= lines follow its training;
# SIGTERM brings STOPPING=1 and exit 0. A NOTIFY_SOCKET nobody listens on
# costs one warning, not the training. Then `systemd-analyze verify` has
# nothing at all to say about gossipd@.service as make installs it (only
# ExecStart's binary is the built one, for it must exist); without
# systemd-analyze that part is skipped (77).
. "$(dirname "$0")/fleet.sh"
fleet_need_data
[ -x "$PYTHON" ] || fleet_skip "$PYTHON not found"
unit=$FLEET_BUILD/contrib/systemd/gossipd@.service
[ -f "$unit" ] || fleet_fail "$unit not built (make)"

# --- readiness, status and stopping over sd_notify ---
fleet_keygen "$FLEET_DIR/job.key"
N=$FLEET_DIR/notify.sock
S=$FLEET_DIR/ctl/peer.sock
fleet_start listen "$PYTHON" "$FLEET_TOP/tests/notify_listen.py" "$N" "$S"
fleet_wait_up listen 20 '^listening'
peer() {
	fleet_port port
	fleet_start a env NOTIFY_SOCKET="$N" "$GOSSIPD" --foreground \
		--config "$FLEET_TOP/contrib/systemd/example.conf" --control "$S" \
		--checkpoint-dir "$FLEET_DIR/ck" --key-file "$FLEET_DIR/job.key" \
		--listen "127.0.0.1:$port" --peers "127.0.0.1:$port" --eval-every 100 \
		--eval-samples 500
	fleet_wait_up a
}
fleet_up peer
fleet_wait_log listen '"ready_status' "record the status at READY=1" 30
fleet_wait_log listen '"STATUS=training: step [0-9]+ of' "pass on training progress" 60
fleet_kill TERM a
rc=0
fleet_wait_exit a 60 || rc=$?
[ $rc -eq 0 ] || fleet_fail "SIGTERM: exit $rc, wanted 0: $(fleet_tail a)"
fleet_wait_log listen '"STOPPING=1"' "pass on STOPPING=1" 10
fleet_stop listen
# One verdict over the whole record, in the order it came.
verdict=$(grep '^{' "$FLEET_DIR/listen.log" | jq -rs '
	[.[] | .msg // empty | .[]] as $a
	| [.[] | .ready_status // empty] as $st
	| [.[] | .ready_status_error // empty] as $err
	| ($a | index("READY=1")) as $r
	| ($a | index("STOPPING=1")) as $s
	| if ($a | map(select(. == "READY=1")) | length) != 1 then "READY=1 \($a | map(select(. == "READY=1")) | length) times"
	elif ($err | length) > 0 then "status failed at READY=1: \($err[0])"
	elif $st[0].ok != true or $st[0].state != "training" then "status at READY=1: \($st[0])"
	elif $s == null or $s < $r then "STOPPING=1 missing or before READY=1"
	elif ($a[$s + 1] | startswith("STATUS=leaving: ")) | not then "no leaving STATUS with STOPPING=1: \($a[$s + 1])"
	elif ($a[:$r] | any(startswith("STATUS=training fmnist on cpu from step 0"))) | not then "no start STATUS before READY=1"
	else "ok" end') || fleet_fail "notifications not JSON: $(head -c 1000 "$FLEET_DIR/listen.log")"
[ "$verdict" = ok ] || fleet_fail "$verdict; record: $(tail -c 2000 "$FLEET_DIR/listen.log")"
fleet_ok "READY=1 once, status answered then ($(grep -c '"msg"' "$FLEET_DIR/listen.log") messages); STOPPING=1 on SIGTERM, exit 0"

# Nobody listening: one warning, and the peer trains on to its end.
fleet_start b env NOTIFY_SOCKET="$FLEET_DIR/nobody.sock" "$GOSSIPD" --foreground \
	--control "$FLEET_DIR/b.sock" --max-steps 20 --eval-samples 200
rc=0
fleet_wait_exit b 60 || rc=$?
[ $rc -eq 0 ] || fleet_fail "unreachable NOTIFY_SOCKET: exit $rc: $(fleet_tail b)"
n=$(grep -c 'cannot notify the service manager' "$FLEET_LOGS/b.log")
[ "$n" = 1 ] || fleet_fail "unreachable NOTIFY_SOCKET: $n warnings, wanted 1: $(fleet_tail b)"
fleet_ok "unreachable NOTIFY_SOCKET: one warning, training done, exit 0"

# --- the unit ---
command -v systemd-analyze >/dev/null || fleet_skip "systemd-analyze not installed (Debian package systemd): unit not verified"
mkdir -p "$FLEET_DIR/unit" "$FLEET_DIR/man/man1" "$FLEET_DIR/man/man5" "$FLEET_DIR/man/man8"
sed "s|^ExecStart=[^ ]*/gossipd |ExecStart=$GOSSIPD |" "$unit" >"$FLEET_DIR/unit/gossipd@.service"
grep -q "^ExecStart=$GOSSIPD " "$FLEET_DIR/unit/gossipd@.service" || fleet_fail "no ExecStart in $unit"
# Documentation= is checked too: the man pages, where man finds them.
for m in gossipd.8 gossipd.conf.5 gossipctl.1; do
	ln -s "$FLEET_TOP/man/$m" "$FLEET_DIR/man/man${m##*.}/$m"
done
rc=0
MANPATH=$FLEET_DIR/man systemd-analyze verify "$FLEET_DIR/unit/gossipd@job1.service" \
	>"$FLEET_DIR/verify" 2>&1 || rc=$?
[ $rc -eq 0 ] && [ ! -s "$FLEET_DIR/verify" ] ||
	fleet_fail "systemd-analyze verify: exit $rc: $(cat "$FLEET_DIR/verify")"
fleet_ok "systemd-analyze verify gossipd@job1.service: exit 0, no output"
