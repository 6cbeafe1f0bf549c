#!/usr/bin/env bash
# Extracts the header-only / small dependencies the GPU-only build needs into .deps/ (run on the dev
# machine; the GPU machine has no Debian -dev packages and no network). Carry .deps/usr and
# .deps/cutlass-include.tar.xz with the device call.
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
# CUTLASS's headers (cute/, cutlass/) for the FP8 GEMM with its scales in the epilogue (kernels/cuda/fp8_cutlass*):
# not packaged by Debian; NVIDIA's nvidia-cutlass wheel carries them, pinned by version and hash.
CUTLASS_WHEEL=nvidia_cutlass-4.2.0.0-py3-none-any.whl
CUTLASS_SHA256=f9599ada45c7bcb6bf53f7d3f0a7d154183e53451c01bfa59eecd37dd4a693f6
if [ ! -f "$DEPS/cutlass/include/cutlass/cutlass.h" ]; then
    python3 -m pip download --quiet --no-deps --dest /tmp/surf_debs "nvidia-cutlass==4.2.0.0"
    echo "$CUTLASS_SHA256  /tmp/surf_debs/$CUTLASS_WHEEL" | sha256sum --check --quiet
    rm -rf /tmp/surf_debs/cutlass_wheel && mkdir -p /tmp/surf_debs/cutlass_wheel "$DEPS/cutlass"
    python3 -m zipfile -e "/tmp/surf_debs/$CUTLASS_WHEEL" /tmp/surf_debs/cutlass_wheel
    rm -rf "$DEPS/cutlass/include"
    mv /tmp/surf_debs/cutlass_wheel/cutlass_library/source/include "$DEPS/cutlass/include"
fi
# Packed for the device call, which carries at most 64 MiB (carry .deps/usr and this; build_gpu.sh unpacks it).
[ -f "$DEPS/cutlass-include.tar.xz" ] || tar cJf "$DEPS/cutlass-include.tar.xz" -C "$DEPS/cutlass" include
echo "extracted into $DEPS:"; du -sh "$DEPS"
