// The scheduler's image-row arena (host bookkeeping only): regions, LRU eviction of unpinned regions with
// their cache entries, coalescing of free spans, growth.
#include <doctest/doctest.h>

#include "model/image_arena.h"

using surf::model::ImageArena;

TEST_CASE("image arena: regions, cache entries, LRU eviction of unpinned regions, coalesced free space") {
    ImageArena arena(1000);
    const auto a = arena.allocate(300, 1);
    const auto b = arena.allocate(300, 2);
    REQUIRE(a.has_value());
    REQUIRE(b.has_value());
    CHECK(*a == 0);
    CHECK(*b == 300);
    arena.place(*a, 0xA1, 0, true);
    arena.place(*a, 0xA2, 150, false);  // queued for encoding: not a cache entry yet
    arena.place(*b, 0xB1, 300, true);
    CHECK(arena.find(0xA1) == std::optional<int64_t>(0));
    CHECK_FALSE(arena.find(0xA2).has_value());
    arena.cache(0xA2, 150);  // its encode is enqueued
    CHECK(arena.find(0xA2) == std::optional<int64_t>(150));
    CHECK(arena.free_rows() == 400);

    // Everything pinned: no room for 500 rows.
    CHECK_FALSE(arena.allocate(500, 3).has_value());
    // Unpin both; a is older, so a 500-row region evicts a (300 rows + 400 free are not contiguous with
    // b in the middle, so b goes too) and drops their cache entries.
    arena.unpin(*a, 4);
    arena.unpin(*b, 5);
    const auto c = arena.allocate(350, 6);
    REQUIRE(c.has_value());
    CHECK(*c == 600);  // fits after b without evicting
    CHECK(arena.find(0xA1).has_value());
    const auto d = arena.allocate(500, 7);  // needs a and b's space: both evicted, spans merged
    REQUIRE(d.has_value());
    CHECK(*d == 0);
    CHECK_FALSE(arena.find(0xA1).has_value());
    CHECK_FALSE(arena.find(0xA2).has_value());
    CHECK_FALSE(arena.find(0xB1).has_value());
    CHECK(arena.free_rows() == 1000 - 350 - 500);
}

TEST_CASE("image arena: evicting an older copy of an image keeps the cache entry of the newer one") {
    ImageArena arena(400);
    const auto a = arena.allocate(100, 1);
    REQUIRE(a.has_value());
    arena.place(*a, 0xCC, 0, true);
    const auto b = arena.allocate(100, 2);
    REQUIRE(b.has_value());
    arena.place(*b, 0xCC, 100, true);  // a cache hit copied into b: the cache now points at b's rows
    arena.unpin(*a, 3);                // b stays pinned (its request is still prefilling)
    // 250 contiguous rows: evicting a frees [0,100), still not contiguous with [200,400); b is pinned.
    CHECK_FALSE(arena.allocate(250, 4).has_value());
    CHECK(arena.find(0xCC) == std::optional<int64_t>(100));
    CHECK(arena.free_rows() == 300);
}

TEST_CASE("image arena: growing adds free rows at the end, merged with a free span there") {
    ImageArena arena(100);
    const auto a = arena.allocate(60, 1);
    REQUIRE(a.has_value());
    CHECK_FALSE(arena.allocate(80, 2).has_value());  // 40 free rows
    arena.grow(50);
    CHECK(arena.rows() == 150);
    CHECK(arena.free_rows() == 90);
    const auto b = arena.allocate(80, 3);  // [60, 150): the old tail and the new rows as one span
    REQUIRE(b.has_value());
    CHECK(*b == 60);
}
