#!/bin/sh
# The README's first command: installs what is missing, builds ogsh and
# starts it on the built-in demo model.
set -eu
cd "$(dirname "$0")/.."
sh scripts/deps.sh test
[ -f build/build.ninja ] || meson setup build -Dtest_python="$PWD/.venv/bin/python" >/dev/null
ninja -C build
exec ./build/shell/ogsh "$@"
