#!/bin/sh
# Docs move with the code: every key gossipd knows (from its --help) is in
# gossipd(8) and gossipd.conf(5), and every gossipctl command is in
# gossipctl(1) and its --help.
. "$(dirname "$0")/lib.sh"
man="$top_srcdir/man"
keys=$("$GOSSIPD" --help | sed -n 's/^ *\(-., \)\{0,1\}--\([a-z-]*\).*/\2/p' | grep -v '^help$\|^version$')
[ -n "$keys" ] || fail "no options parsed from gossipd --help"
n=0
for k in $keys; do
	key=$(echo "$k" | tr - _)
	opt=$(echo "$k" | sed 's/-/\\\\-/g')
	grep -q -- "$opt" "$man/gossipd.8" || fail "option --$k missing from gossipd.8"
	[ "$key" = config ] || grep -q "^\.B $key\$" "$man/gossipd.conf.5" ||
		fail "key $key missing from gossipd.conf.5"
	n=$((n + 1))
done
for c in status peers stats metrics watch checkpoint leave set keygen; do
	grep -q "^\.B $c\$\|^\.BI $c " "$man/gossipctl.1" || fail "command $c missing from gossipctl.1"
	"$GOSSIPCTL" --help | grep -q "^  $c" || fail "command $c missing from gossipctl --help"
done
ok "$n options documented in gossipd.8 and gossipd.conf.5; gossipctl commands documented"
