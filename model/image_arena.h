// The image-row arena of an engine's Scheduler: the executor's buffer of projected image rows, handed out in
// contiguous regions (one per request: its images' rows in order) and kept after use as the image-embedding
// cache, keyed by image content hash, until the space is needed (LRU over unpinned regions). Bookkeeping
// only; the executor moves the rows. Not thread-safe (the engine's lock guards it).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace surf::model {

class ImageArena {
public:
    explicit ImageArena(int64_t rows);

    // A pinned region of `rows` contiguous rows, evicting the least recently used unpinned regions (and
    // their cache entries) as needed; nullopt when pinned regions leave no room. `now` orders use.
    std::optional<int64_t> allocate(int64_t rows, uint64_t now);
    // Unpins a region (its rows stay cached until evicted).
    void unpin(int64_t region, uint64_t now);

    // The cached rows of an image, if any.
    std::optional<int64_t> find(uint64_t hash) const;
    // Records that the image `hash` occupies `row` in `region` (a region's images, in order); `cached`
    // makes it the cache's copy of that image now (a copy already enqueued), otherwise cache() does later
    // (once its encode is enqueued: a cache hit must never copy rows before they are written).
    void place(int64_t region, uint64_t hash, int64_t row, bool cached);
    void cache(uint64_t hash, int64_t row) { cache_[hash] = row; }

    int64_t free_rows() const;
    int64_t rows() const { return rows_; }
    // Adds `rows` free rows at the end (a backend whose image rows live in host memory it can extend).
    void grow(int64_t rows);

private:
    struct Region {
        int64_t rows = 0;
        int pins = 0;
        uint64_t last_used = 0;
        std::vector<std::pair<uint64_t, int64_t>> images;  // (hash, row) of each image
    };
    bool evict_one();
    void take(int64_t first, int64_t rows);
    void give(int64_t first, int64_t rows);

    std::map<int64_t, int64_t> free_;              // first row → length of each free span
    std::map<int64_t, Region> regions_;            // first row → region
    std::unordered_map<uint64_t, int64_t> cache_;  // content hash → first row of the image
    int64_t rows_ = 0;
};

}  // namespace surf::model
