#!/bin/sh
# Membership convergence on this machine: for N peers (default 8 16 32),
# each started with a list naming itself, 2 random others and an address
# nobody listens on, measure the time until every peer lists all N alive
# (from the moment the last one's control socket answers), until a joiner
# is in every view, and until a SIGKILLed peer is dead in every view.
# Peers train one step and linger, so 32 of them fit on 2 cores.
# Usage: contrib/bench/membership.sh [N...]   (from the build directory)
# Writes membership.csv in the current directory and prints a table.
set -e
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
top_builddir=${top_builddir:-$(pwd)}
export top_builddir
[ -x "$top_builddir/src/gossipd" ] || { echo "run from the build directory" >&2; exit 2; }
T=$(mktemp -d /tmp/gossipd-bench.XXXXXX)
chmod 700 "$T"
trap 'rm -rf "$T"' EXIT
[ $# -gt 0 ] || set -- 8 16 32
/usr/bin/python3 "$top_srcdir/tests/member_cluster.py" bench "$T" membership.csv "$@"
echo "CSV: $(pwd)/membership.csv"
