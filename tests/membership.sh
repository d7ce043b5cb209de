#!/bin/sh
# Membership with real daemons on 127.0.0.1, real keys and libfabric: a
# job of 8 started from partial peer lists, a joiner, a graceful leave, a
# SIGKILL, a SIGSTOP past the suspicion time, every control command on a
# member, and SIGTERM for all. The driver (member_cluster.py) reads every
# peer's view several times a second and fails the moment any live peer
# is dead or left in anyone's view.
. "$(dirname "$0")/lib.sh"
need_data
[ -x "$PYTHON" ] || skip "no $PYTHON"
export top_builddir
# The driver's reason goes last, after the peers' logs, so that a reader
# of only the tail (CI) sees it.
$PYTHON "$top_srcdir/tests/member_cluster.py" test "$T" 2>"$T/driver.err" || {
	for f in "$T"/*.log; do echo "== $f"; tail -15 "$f"; done >&2
	cat "$T/driver.err" >&2
	fail "membership"
}
