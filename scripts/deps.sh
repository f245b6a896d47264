#!/bin/sh
# Installs what building and testing ogsh needs on Debian 12, and nothing
# that is already there: Debian packages (with sudo when not root) and the
# test venv .venv with the pinned packages of tests/requirements.txt.
#
#   sh scripts/deps.sh build    # build dependencies only
#   sh scripts/deps.sh test     # build + test dependencies + the venv
set -eu
cd "$(dirname "$0")/.."
what=${1:-test}

pkgs="gcc pkg-config meson ninja-build protobuf-c-compiler libprotobuf-c-dev libedit-dev libgraphviz-dev libcairo2-dev zlib1g-dev libpng-dev libjpeg62-turbo-dev python3 python3-venv"
if [ "$what" = test ]; then
	pkgs="$pkgs clang libclang-rt-14-dev"
fi
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "installing Debian packages:$missing"
	sudo=""
	[ "$(id -u)" -ne 0 ] && sudo=sudo
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

# the venv, remade when tests/requirements.txt changes
stamp=.venv/.requirements
if [ ! -x .venv/bin/python ] || ! cmp -s tests/requirements.txt "$stamp"; then
	echo "making the test venv .venv (tests/requirements.txt)"
	rm -rf .venv
	python3 -m venv .venv
	.venv/bin/python -m pip install -q --disable-pip-version-check -r tests/requirements.txt
	cp tests/requirements.txt "$stamp"
fi
