#!/bin/bash
# One victim endpoint is fed: raw garbage on its TCP port (random bytes,
# a connection left half-open), an evil peer with the right key sending
# every kind of bad message (tampered, truncated, replayed, oversized,
# wrong version, wrong job, unknown sender, bad handshake, bad bodies, more
# announced bodies than its budget), an
# endpoint with another job key and one with another job name. Each kind
# must be refused and counted, nothing of theirs may reach the application,
# and a good peer must still exchange messages afterwards.
FLEET_DUMP_LOGS=40
. "$(dirname "$0")/fleet.sh"

fleet_keygen "$FLEET_DIR/key"
fleet_keygen "$FLEET_DIR/otherkey"
common="--job reject --timeout 1500 --deadline 60"

# 16 MiB messages at most: the evil peer's flood of announced bodies is then
# held to 2 x 16 MiB (the per-peer budget) rather than 2 x 256 MiB.
fleet_netpeer V --key "$FLEET_DIR/key" $common --max-size 16777216 --id 1 --expect-done 2
V="127.0.0.1:${FLEET_PORT[V]}"

# Garbage straight to the listening socket, then a half-open connection
# that stays open while the others talk.
for i in 1 2 3; do
	head -c 65536 /dev/urandom >"/dev/tcp/127.0.0.1/${FLEET_PORT[V]}" 2>/dev/null
done
printf 'GET / HTTP/1.0\r\n\r\n' >"/dev/tcp/127.0.0.1/${FLEET_PORT[V]}" 2>/dev/null
exec 5<>"/dev/tcp/127.0.0.1/${FLEET_PORT[V]}" || fleet_fail "cannot connect to the victim"
head -c 20 /dev/urandom >&5

# The evil peer (listens on its port and the next one).
fleet_port p 2
"$NETPEER" --listen "127.0.0.1:$p" --key "$FLEET_DIR/key" $common --id 2 \
    --max-size 16777216 --evil "$V" >"$FLEET_DIR/evil.log" 2>&1 || fleet_fail "evil peer: the victim misbehaved"

# Another job key, then the right key with another job name: every send
# must fail (handshake refused), none may be delivered.
fleet_port port
"$NETPEER" --listen "127.0.0.1:$port" --key "$FLEET_DIR/otherkey" $common \
    --id 3 --peers "$V" --sizes 0,100,100000 --expect-fail \
    >"$FLEET_DIR/badkey.log" 2>&1 || fleet_fail "an endpoint with another key got through"
fleet_port port
"$NETPEER" --listen "127.0.0.1:$port" --key "$FLEET_DIR/key" \
    --job otherjob --timeout 1500 --deadline 60 --id 4 --peers "$V" \
    --sizes 10 --expect-fail >"$FLEET_DIR/badjob.log" 2>&1 ||
    fleet_fail "an endpoint of another job got through"

# The victim still works: a good exchange while the half-open socket lives.
fleet_port port
"$NETPEER" --listen "127.0.0.1:$port" --key "$FLEET_DIR/key" $common \
    --id 5 --peers "$V" --sizes 0,1000,100000,4194304 >"$FLEET_DIR/good.log" 2>&1 ||
    fleet_fail "good exchange after the attacks failed"
exec 5>&-

fleet_wait_exit V 20 || fleet_fail "victim did not finish cleanly"
[ "$(fleet_netpeer_stat V .bad_content)" = 0 ] || fleet_fail "bad content reached the application"
for id in 0000000000000003 0000000000000004; do
	[ "$(fleet_netpeer_stat V ".from[\"$id\"] // 0")" = 0 ] ||
	    fleet_fail "messages from $id reached the application"
done
# Exactly what the evil peer and the good peer sent got through.
[ "$(fleet_netpeer_stat V '.from["00000000000003ea"]')" = 3 ] || fleet_fail "evil's good messages"
[ "$(fleet_netpeer_stat V '.from["0000000000000005"]')" = 5 ] || fleet_fail "good peer's messages"
check() {
	n=$(fleet_netpeer_stat V ".rejected.$1")
	[ "$n" -ge "$2" ] || fleet_fail "rejected.$1 = $n, want >= $2"
	echo "rejected.$1 = $n"
}
check bad_mac 2			# tampered frame, tampered body
check replay 1			# replayed frame
check malformed 3		# truncated frame, truncated body, garbage
check oversize 3		# header over max_message_size, frame over buffer,
			# the third of 3 announced max-size bodies
check wrong_version 1
check wrong_job 2		# evil's frame, the other job's hellos
check unknown_sender 1
check handshake_failure 2	# evil's broken hello, the other key's hellos
exit 0
