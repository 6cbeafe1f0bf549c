#!/usr/bin/env bash
# Extracts the header-only / small dependencies the GPU-only build needs into .deps/ (run on the dev
# machine; the GPU machine has no Debian -dev packages and no network). Carry .deps with the device call.
set -euo pipefail
cd "$(dirname "$0")/.."
DEPS="$PWD/.deps"
mkdir -p "$DEPS" /tmp/surf_debs
cd /tmp/surf_debs
pkgs=(nlohmann-json3-dev doctest-dev libpcre2-dev libpcre2-8-0 libstb-dev libstb0 pkgconf pkgconf-bin libpkgconf3
      libfmt-dev libfmt9)
apt-get download "${pkgs[@]}"
for deb in ./*.deb; do dpkg -x "$deb" "$DEPS"; done
# pkg-config files point at /usr: re-root them at .deps/usr.
find "$DEPS" -name '*.pc' -exec sed -i "s|^prefix=/usr|prefix=$DEPS/usr|" {} +
echo "extracted into $DEPS:"; du -sh "$DEPS"
