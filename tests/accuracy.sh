#!/bin/bash
# One peer with default settings reaches >= 0.88 test accuracy on
# Fashion-MNIST (the published MLP 256-128-100 figure is 0.883).
. "$(dirname "$0")/fleet.sh"
fleet_need_data
fleet_gossipd p
fleet_wait_exit p 300 || fleet_fail "training failed: $(fleet_tail p)"
line=$(grep 'done:' "$FLEET_DIR/p.log") || fleet_fail "no final line: $(fleet_tail p)"
acc=$(echo "$line" | sed 's/.*test accuracy \([0-9.]*\).*/\1/')
echo "$line"
$PYTHON -c "import sys; sys.exit(0 if float('$acc') >= 0.88 else 1)" ||
	fleet_fail "accuracy $acc < 0.88"
fleet_ok "default settings: accuracy $acc"
