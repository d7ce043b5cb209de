#!/bin/bash
# The /metrics listener (--metrics-listen, issue 16). A peer of a running
# two-peer job is scraped over real HTTP: its exposition passes `promtool
# check metrics`, has the partner's per-peer series and no field left
# undocumented. Then garbage, wrong methods and paths, a huge head, and
# more slow clients than the listener holds get their error replies or
# are closed (tests/http_probe.py), while the peer goes on training and
# answering its control socket; it leaves cleanly. A host name and a port
# in use are refused at start, naming metrics_listen.
. "$(dirname "$0")/fleet.sh"
fleet_need_data
command -v promtool >/dev/null || fleet_skip "promtool not installed (apt-get install prometheus)"

fleet_keygen "$FLEET_DIR/key"
start() {
	fleet_port mport
	FLEET_ARGS[a]="--metrics-listen 127.0.0.1:$mport"
	fleet_job_on "a b" --epochs 100000 --eval-every 500 --eval-samples 500 --job http
}
fleet_up start
step0=$(fleet_status a .step) || fleet_fail "status of a"

$PYTHON "$top_srcdir/tests/http_probe.py" "$mport" "$FLEET_DIR/scrape" ||
	fleet_fail "the listener misbehaved (above); peer log: $(fleet_tail a 10)"
promtool check metrics <"$FLEET_DIR/scrape" >"$FLEET_DIR/promtool" 2>&1 ||
	fleet_fail "promtool check metrics: $(cat "$FLEET_DIR/promtool")"
[ -s "$FLEET_DIR/promtool" ] && fleet_fail "promtool complains: $(cat "$FLEET_DIR/promtool")"
grep -q 'undocumented' "$FLEET_DIR/scrape" &&
	fleet_fail "fields without a HELP text: $(grep 'undocumented' "$FLEET_DIR/scrape")"
grep -q "^gossipd_peer_exchanges_total{peer=\"[0-9a-f]*\",addr=\"127.0.0.1:${FLEET_PORT[b]}\"} " \
	"$FLEET_DIR/scrape" || fleet_fail "no per-peer series for b"
fleet_ok "a scrape passes promtool: $(grep -vc '^#' "$FLEET_DIR/scrape") samples, b's series among them"

fleet_alive "$(fleet_pid a)" || fleet_fail "a died: $(fleet_tail a)"
step1=$(fleet_status a .step) || fleet_fail "a's control socket does not answer"
[ "$step1" -gt "$step0" ] || fleet_fail "a stopped training: step $step0 then $step1"
fleet_ok "a trains on (step $step0 -> $step1) and answers its control socket"

# A second peer may not take a's metrics port; a name is not an address.
fleet_port p
"$GOSSIPD" --foreground --control "$FLEET_DIR/c.sock" --max-steps 1 --metrics-listen "127.0.0.1:$mport" \
	>"$FLEET_DIR/inuse.log" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "metrics_listen: .*address in use" "$FLEET_DIR/inuse.log" ||
	fleet_fail "a port in use: exit $rc, $(cat "$FLEET_DIR/inuse.log")"
"$GOSSIPD" --foreground --control "$FLEET_DIR/c.sock" --metrics-listen "localhost:$p" \
	>"$FLEET_DIR/name.log" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "metrics_listen: .*numeric" "$FLEET_DIR/name.log" ||
	fleet_fail "a host name: exit $rc, $(cat "$FLEET_DIR/name.log")"
fleet_ok "refused at start: $(tail -n 1 "$FLEET_DIR/inuse.log" | cut -c 20-); $(tail -n 1 "$FLEET_DIR/name.log")"

fleet_ctl a leave >/dev/null && fleet_ctl b leave >/dev/null || fleet_fail "leave"
fleet_wait_exit a 30 || fleet_fail "a exited $?"
fleet_wait_exit b 30 || fleet_fail "b exited $?"
fleet_ok "both left cleanly"
