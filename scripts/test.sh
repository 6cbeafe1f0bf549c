#!/usr/bin/env bash
# Runs the test suite: every CTest label except gpu (unit, parity, browser). Assumes scripts/setup.sh ran.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build build -j "$(nproc)"
ctest --test-dir build -LE gpu --output-on-failure -j "$(nproc)"
