#!/bin/bash
# Docs move with the code: every key gossipd knows (from its --help) is in
# gossipd(8) and gossipd.conf(5), and every gossipctl command (from its
# --help, which lists the protocol's command table) is in gossipctl(1).
. "$(dirname "$0")/fleet.sh"
man="$FLEET_TOP/man"
keys=$("$GOSSIPD" --help | sed -n 's/^ *\(-., \)\{0,1\}--\([a-z-]*\).*/\2/p' | grep -v '^help$\|^version$')
[ -n "$keys" ] || fleet_fail "no options parsed from gossipd --help"
n=0
for k in $keys; do
	key=$(echo "$k" | tr - _)
	opt=$(echo "$k" | sed 's/-/\\\\-/g')
	grep -q -- "$opt" "$man/gossipd.8" || fleet_fail "option --$k missing from gossipd.8"
	[ "$key" = config ] || grep -q "^\.B $key\$" "$man/gossipd.conf.5" ||
		fleet_fail "key $key missing from gossipd.conf.5"
	n=$((n + 1))
done
# An option with a fixed set of values (a metavar of names, as --mode's,
# which comes from the table of modes) lists exactly those in gossipd.8.
choices=$("$GOSSIPD" --help |
	sed -n 's/^ *\(-., \)\{0,1\}--\([a-z-]*\) \([a-z0-9]*\(|[a-z0-9]*\)\{1,\}\) .*/\2 \3/p')
echo "$choices" | grep -q '^mode ' || fleet_fail "no list of modes parsed from gossipd --help"
while read -r k names; do
	line=".BR $(echo "--$k" | sed 's/-/\\-/g') \" $names\""
	grep -qxF -- "$line" "$man/gossipd.8" || fleet_fail "gossipd.8 does not list --$k $names"
done <<<"$choices"
cmds=$("$GOSSIPCTL" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z]*\).*/\1/p')
[ -n "$cmds" ] || fleet_fail "no commands parsed from gossipctl --help"
for c in $cmds; do
	grep -q "^\.B $c\$\|^\.BI $c " "$man/gossipctl.1" || fleet_fail "command $c missing from gossipctl.1"
done
fleet_ok "$n options documented in gossipd.8 and gossipd.conf.5, their lists of values in gossipd.8; gossipctl commands documented"
