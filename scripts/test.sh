#!/usr/bin/env bash
# Runs the test suite: the format check, then every CTest label except gpu (unit, parity, browser). Assumes
# scripts/setup.sh ran.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/format.sh --check
cmake --build build -j "$(nproc)"
ctest --test-dir build -LE gpu --output-on-failure -j "$(nproc)"
