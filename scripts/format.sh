#!/usr/bin/env bash
# Formats every tracked C++/CUDA source with clang-format (.clang-format), or with --check reports the files
# that differ and fails (scripts/test.sh runs the check, so CI refuses unformatted code).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh' ':!tests/fixtures')
if [ "${1:-}" = "--check" ]; then
    if ! clang-format --dry-run --Werror "${files[@]}" 2> /tmp/surf_format.$$; then
        grep -o '^[^:]*:[0-9]*' /tmp/surf_format.$$ | sort -u -t: -k1,1 | sed 's/^/not formatted: /'
        rm -f /tmp/surf_format.$$
        echo "run scripts/format.sh to format them" >&2
        exit 1
    fi
    rm -f /tmp/surf_format.$$
else
    clang-format -i "${files[@]}"
fi
