#!/bin/sh
# The main job: one peer trains the default MLP on Fashion-MNIST with live
# progress from `gossipctl watch`, then prints its final test accuracy and
# the time it took. Extra arguments go to gossipd (e.g. --epochs 5).
set -e
cd "$(dirname "$0")/.."
dir=$(mktemp -d /tmp/gossipd-demo.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$dir"' EXIT
# Ctrl-C reaches gossipd (which installs its own handler and leaves
# cleanly); the script and gossipctl ride it out and report.
trap '' INT
sock="$dir/ctl/demo.sock"

./src/gossipd --foreground --control "$sock" --checkpoint-dir "$dir/ckpt" \
	--log-file "$dir/gossipd.log" "$@" &
pid=$!
while [ ! -S "$sock" ]; do
	kill -0 $pid 2>/dev/null || { cat "$dir/gossipd.log"; exit 1; }
	sleep 0.1
done
echo "peer started (pid $pid); live progress, Ctrl-C leaves cleanly:"
./src/gossipctl -s "$sock" watch || true
rc=0
wait $pid || rc=$?
pid=
grep -E 'test loss|done:' "$dir/gossipd.log" | sed 's/^[0-9:.]* info  //'
exit $rc
