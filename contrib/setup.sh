#!/bin/sh
# Everything gossipd needs on a fresh Debian 12 machine: the packages
# (installed only when missing), then an in-tree build. Safe to run again.
set -e
cd "$(dirname "$0")/.."

PKGS="build-essential autoconf automake pkg-config libuv1-dev libfabric-dev
libfabric-bin libsodium-dev libssl-dev libopenblas-dev zlib1g-dev libjansson-dev libinih-dev
dataset-fashion-mnist fortunes python3 python3-torch procps iproute2 jq clang libtool
libsystemd-dev systemd prometheus gnuplot-nox"

missing=
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
	SUDO=
	[ "$(id -u)" -eq 0 ] || SUDO=sudo
	echo "setup: installing$missing"
	$SUDO apt-get update -qq
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
fi

[ -x configure ] || ./autogen.sh
[ -f Makefile ] || ./configure
make -j"$(nproc)"
