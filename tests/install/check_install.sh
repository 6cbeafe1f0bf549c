#!/usr/bin/env bash
# The installed surf, as a user and a product get it: installs this build into a temporary prefix, moves the
# prefix (a built surf must not depend on where it was built or installed), then checks that
#   - the moved surf finds its prompts and its default model inside the moved prefix;
#   - the moved surf bench finds the benchmark programs there;
#   - a product's CMake project builds against find_package(surf), links surf::agent and runs, and links no
#     CUDA library (the GPU backend is surf::cuda, linked only by programs that want it);
#   - the same program builds with pkg-config's surf.
# Usage: check_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
mv "$tmp/prefix" "$tmp/moved"
prefix="$tmp/moved"

fail() { echo "FAIL: $*" >&2; exit 1; }
paths=$(env -u SURF_PROMPTS_DIR -u SURF_MODEL "$prefix/bin/surf" version --paths)
echo "$paths"
grep -qx "prompts: $prefix/share/surf/prompts" <<< "$paths" || fail "the moved surf does not use its own prompts"
grep -qx "default model: $prefix/share/surf/models/surf-tiny" <<< "$paths" || fail "nor its own model"
[ -f "$prefix/share/surf/prompts/profile_holotron.json" ] || fail "prompts not installed"
[ -f "$prefix/include/surf/agent/agent.h" ] || fail "headers not installed"
benches=$("$prefix/bin/surf" bench 2>&1 || true)  # the listing exits 2 (no NAME given)
grep -q "^  tokenizer " <<< "$benches" || fail "surf bench does not list the installed benchmarks"

cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log"; fail "configure"; }
cmake --build "$tmp/consumer" > "$tmp/consumer_build.log" 2>&1 || { cat "$tmp/consumer_build.log"; fail "build"; }
SURF_PROMPTS_DIR="$prefix/share/surf/prompts" SURF_MODEL="$prefix/share/surf/models/surf-tiny" \
    "$tmp/consumer/product" || fail "the product program"
# A product that does not link surf::cuda links no CUDA library, whether or not this build has the backend.
if readelf -d "$tmp/consumer/product" | grep -E "NEEDED.*(cudart|cublas)"; then
    fail "the product links CUDA libraries without the GPU backend"
fi
# The same program by pkg-config (the .pc finds its prefix from its own place).
pc_dir=$(dirname "$(find "$prefix" -name surf.pc | head -1)")
pkg_flags=$(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs surf) || fail "pkg-config surf"
c++ -O0 -o "$tmp/product_pc" "$src/tests/install/consumer/product.cpp" $pkg_flags || fail "build with pkg-config"
SURF_PROMPTS_DIR="$prefix/share/surf/prompts" SURF_MODEL="$prefix/share/surf/models/surf-tiny" \
    "$tmp/product_pc" || fail "the pkg-config product program"
echo "install check passed"
