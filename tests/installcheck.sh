#!/bin/bash
# make installcheck: what `make install` put in place works from there,
# found the way users and Debian's tools find it. The installed gossipd
# (--trainer external: no data needed) serves a C program compiled against
# the installed <gossipd/client.h> and linked with the installed libgossipd
# through the installed gossipd.pc; the installed gossipctl reads its
# status and its /metrics listener answers; the Python module imports from
# where it was installed; the man pages are there. Runs the tree at its
# configured prefix (not under DESTDIR).
#
# Environment (from Makefile.am): bindir libdir includedir mandir gdpythondir.
set -u
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }

GOSSIPD=$bindir/gossipd
GOSSIPCTL=$bindir/gossipctl
[ -x "$GOSSIPD" ] && [ -x "$GOSSIPCTL" ] || fail "no gossipd or gossipctl in $bindir"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gossipd-installcheck.XXXXXX") || fail "mktemp"
chmod 700 "$tmp"
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT

"$GOSSIPD" --version >"$tmp/version" || fail "gossipd --version"
"$GOSSIPD" --help | grep -q -- '--metrics-listen' || fail "gossipd --help lacks --metrics-listen"
ok "$(cat "$tmp/version")"

for m in man8/gossipd.8 man5/gossipd.conf.5 man1/gossipctl.1 man7/gossipd-attach.7; do
	[ -f "$mandir/$m" ] || fail "man page $mandir/$m not installed"
done
ok "man pages in $mandir"

[ -f "$includedir/gossipd/client.h" ] && [ -f "$includedir/gossipd/control.h" ] ||
	fail "headers not in $includedir/gossipd/"
cat >"$tmp/client.c" <<'EOF'
#include <stdio.h>
#include <gossipd/client.h>

/* Attach, write the initial values, take 20 steps, ask the peer to leave,
 * step until told to stop. */
int
main(int argc, char **argv)
{
	struct gd_client_report r = GD_CLIENT_REPORT_INIT;
	struct gd_client *c;
	char err[256];
	int stop = 0;

	if (argc != 2 || gd_client_attach(argv[1], 1000, &c, err, sizeof(err)) < 0) {
		fprintf(stderr, "attach: %s\n", argc == 2 ? err : "usage: client SOCKET");
		return 1;
	}
	for (size_t i = 0; i < gd_client_nparams(c); i++)
		gd_client_params(c)[i] = 0.25f;
	for (uint64_t step = 1; step <= 20; step++) {
		r.loss = 1.0 / (double)step;
		if (gd_client_step(c, step, &r, &stop, err, sizeof(err)) < 0)
			goto fail;
	}
	if (gd_client_leave(c, err, sizeof(err)) < 0)
		goto fail;
	for (uint64_t step = 21; !stop && step < 1000; step++)
		if (gd_client_step(c, step, &r, &stop, err, sizeof(err)) < 0)
			goto fail;
	gd_client_detach(c);
	printf("stopped\n");
	return stop ? 0 : 1;
fail:
	fprintf(stderr, "step: %s\n", err);
	gd_client_detach(c);
	return 1;
}
EOF
export PKG_CONFIG_PATH=$libdir/pkgconfig
flags=$(pkg-config --cflags --libs gossipd) || fail "pkg-config does not find gossipd.pc in $libdir/pkgconfig"
# shellcheck disable=SC2086 # flags is a list of words
${CC:-cc} -o "$tmp/client" "$tmp/client.c" $flags -Wl,-rpath,"$libdir" ||
	fail "cannot build against the installed header and library ($flags)"
ok "a C program builds with pkg-config gossipd: $flags"

port=$((20000 + RANDOM % 10000))
for _ in $(seq 50); do
	[ -z "$(ss -Htan "( sport = :$port )" 2>/dev/null)" ] && break
	port=$((20000 + RANDOM % 10000))
done
mkdir -m 700 "$tmp/ctl"
"$GOSSIPD" --foreground --trainer external --control "$tmp/ctl/p.sock" \
	--metrics-listen "127.0.0.1:$port" >"$tmp/gossipd.log" 2>&1 &
pid=$!
for _ in $(seq 200); do
	grep -q 'waits for its training process' "$tmp/gossipd.log" && break
	kill -0 "$pid" 2>/dev/null || fail "gossipd ended: $(tail -n 5 "$tmp/gossipd.log")"
	sleep 0.05
done
"$GOSSIPCTL" -s "$tmp/ctl/p.sock" status >/dev/null || fail "gossipctl status"
/usr/bin/python3 - "$port" <<'EOF' || fail "no /metrics from the installed gossipd"
import sys, urllib.request
body = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=10).read()
sys.exit(0 if b'gossipd_info{' in body else 1)
EOF
timeout 60 "$tmp/client" "$tmp/ctl/p.sock" >"$tmp/client.out" 2>&1 ||
	fail "the client: $(cat "$tmp/client.out")"
wait "$pid"
rc=$?
pid=
[ $rc -eq 0 ] || fail "gossipd exited $rc: $(tail -n 5 "$tmp/gossipd.log")"
ok "installed gossipd served the client, gossipctl and /metrics, and left with exit 0"

if [ -n "${gdpythondir:-}" ]; then
	where=$(cd "$tmp" && PYTHONPATH=$gdpythondir /usr/bin/python3 -c \
		'import gossipd; print(gossipd.__file__)') || fail "import gossipd from $gdpythondir"
	case $where in "$gdpythondir"/*) ;; *) fail "gossipd imported from $where, not $gdpythondir" ;; esac
	ok "python3 imports gossipd from $where"
fi
