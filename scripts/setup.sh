#!/usr/bin/env bash
# Installs every build and test dependency from Debian's packages, then configures and builds surf
# into build/. Idempotent: run it again at any time. Needs root (or sudo) for apt-get.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
    build-essential cmake ninja-build pkg-config git clang-format
    doctest-dev nlohmann-json3-dev libpcre2-dev libstb-dev libcurl4-openssl-dev libyaml-cpp-dev libfmt-dev
    libopencv-imgcodecs-dev libopencv-videoio-dev
    chromium fonts-dejavu-core python3
)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)"
