#!/bin/sh
# One peer with default settings reaches >= 0.88 test accuracy on
# Fashion-MNIST (the published MLP 256-128-100 figure is 0.883).
. "$(dirname "$0")/lib.sh"
need_data
start p --control "$T/p.sock"
wait_exit "$pid_p" 300 || fail "training failed: $(tail -5 "$T/p.log")"
line=$(grep 'done:' "$T/p.log") || fail "no final line: $(tail -5 "$T/p.log")"
acc=$(echo "$line" | sed 's/.*test accuracy \([0-9.]*\).*/\1/')
echo "$line"
$PYTHON -c "import sys; sys.exit(0 if float('$acc') >= 0.88 else 1)" ||
	fail "accuracy $acc < 0.88"
ok "default settings: accuracy $acc"
