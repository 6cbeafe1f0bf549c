#include "model/image_arena.h"

#include <algorithm>

namespace surf::model {

ImageArena::ImageArena(int64_t rows) : rows_(std::max<int64_t>(rows, 0)) {
    if (rows > 0) free_[0] = rows;
}

void ImageArena::grow(int64_t rows) {
    if (rows <= 0) return;
    give(rows_, rows);
    rows_ += rows;
}

std::optional<int64_t> ImageArena::allocate(int64_t rows, uint64_t now) {
    for (;;) {
        for (const auto& [start, len] : free_) {
            if (len >= rows) {
                const int64_t first = start;
                take(first, rows);
                Region& r = regions_[first];
                r.rows = rows, r.pins = 1, r.last_used = now;
                return first;
            }
        }
        if (!evict_one()) return std::nullopt;
    }
}

void ImageArena::unpin(int64_t region, uint64_t now) {
    auto it = regions_.find(region);
    if (it != regions_.end() && it->second.pins > 0) {
        --it->second.pins;
        it->second.last_used = now;
    }
}

std::optional<int64_t> ImageArena::find(uint64_t hash) const {
    auto it = cache_.find(hash);
    if (it == cache_.end()) return std::nullopt;
    return it->second;
}

void ImageArena::place(int64_t region, uint64_t hash, int64_t row, bool cached) {
    regions_.at(region).images.emplace_back(hash, row);
    if (cached) cache_[hash] = row;
}

int64_t ImageArena::free_rows() const {
    int64_t n = 0;
    for (const auto& [start, len] : free_) n += len;
    return n;
}

bool ImageArena::evict_one() {
    auto victim = regions_.end();
    for (auto it = regions_.begin(); it != regions_.end(); ++it) {
        if (it->second.pins == 0 &&
            (victim == regions_.end() || it->second.last_used < victim->second.last_used))
            victim = it;
    }
    if (victim == regions_.end()) return false;
    for (const auto& [hash, row] : victim->second.images) {
        auto hit = cache_.find(hash);
        if (hit != cache_.end() && hit->second == row) cache_.erase(hit);
    }
    give(victim->first, victim->second.rows);
    regions_.erase(victim);
    return true;
}

void ImageArena::take(int64_t first, int64_t rows) {
    auto it = free_.find(first);
    const int64_t len = it->second;
    free_.erase(it);
    if (len > rows) free_[first + rows] = len - rows;
}

void ImageArena::give(int64_t first, int64_t rows) {
    auto [it, ok] = free_.emplace(first, rows);
    auto next = std::next(it);
    if (next != free_.end() && it->first + it->second == next->first) {
        it->second += next->second;
        free_.erase(next);
    }
    if (it != free_.begin()) {
        auto prev = std::prev(it);
        if (prev->first + prev->second == it->first) {
            prev->second += it->second;
            free_.erase(it);
        }
    }
}

}  // namespace surf::model
