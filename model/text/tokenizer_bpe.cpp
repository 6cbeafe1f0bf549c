// The BPE model of HF `tokenizers` (models/bpe): initial symbols (with unk / byte fallback), then merges
// applied lowest rank first, leftmost first on ties, exactly as Word::merge_all orders them.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <queue>

#include "base/error.h"
#include "model/text/tokenizer_internal.h"

namespace surf::model::tokenizer_detail {

namespace {

constexpr uint64_t kEmptyKey = ~uint64_t{0};
constexpr size_t kCacheCapacity = 1 << 16;  // distinct words kept
constexpr size_t kCacheMaxWord = 256;       // longer pieces are not cached (HF: MAX_LENGTH)
// Below this many symbols a rescan of the pair ranks beats a heap.
constexpr size_t kHeapThreshold = 48;

uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

size_t hash_key(uint64_t key) {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 17);
}

std::string byte_fallback_token(uint8_t byte) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", byte);
    return buf;
}

}  // namespace

void Bpe::MergeTable::insert(uint64_t key, std::pair<uint32_t, int32_t> value) {
    for (size_t i = hash_key(key) & mask;; i = (i + 1) & mask) {
        if (keys[i] == kEmptyKey || keys[i] == key) {
            keys[i] = key;
            values[i] = value;  // a repeated pair keeps the later rank, as HF's HashMap collect does
            return;
        }
    }
}

const std::pair<uint32_t, int32_t>* Bpe::MergeTable::find(uint64_t key) const {
    for (size_t i = hash_key(key) & mask;; i = (i + 1) & mask) {
        if (keys[i] == key) return &values[i];
        if (keys[i] == kEmptyKey) return nullptr;
    }
}

void Bpe::build(const std::unordered_map<std::string, int32_t>& vocab,
                const std::vector<std::pair<std::string, std::string>>& merges, Options options,
                const std::string& where) {
    options_ = std::move(options);
    vocab_ = &vocab;
    if (options_.unk_token) {
        auto it = vocab.find(*options_.unk_token);
        if (it == vocab.end()) {
            throw Error(ErrorKind::kFormat,
                        where + ": model.unk_token '" + *options_.unk_token + "' is not in model.vocab");
        }
        unk_id_ = it->second;
    }
    if (options_.byte_level &&
        (!options_.continuing_subword_prefix.empty() || !options_.end_of_word_suffix.empty())) {
        throw Error(ErrorKind::kUnsupported, where +
                                                 ": model.continuing_subword_prefix / end_of_word_suffix "
                                                 "together with a ByteLevel pre-tokenizer");
    }

    size_t capacity = 16;
    while (capacity < merges.size() * 2 + 16) capacity *= 2;
    merges_.keys.assign(capacity, kEmptyKey);
    merges_.values.assign(capacity, {0, 0});
    merges_.mask = capacity - 1;
    const size_t prefix_len = options_.continuing_subword_prefix.size();
    for (size_t rank = 0; rank < merges.size(); ++rank) {
        const auto& [a, b] = merges[rank];
        auto a_it = vocab.find(a);
        auto b_it = vocab.find(b);
        if (a_it == vocab.end() || b_it == vocab.end()) {
            throw Error(ErrorKind::kFormat, where + ": model.merges[" + std::to_string(rank) + "] '" + a +
                                                " " + b + "' uses a token missing from model.vocab");
        }
        std::string merged = a + (b.size() >= prefix_len ? b.substr(prefix_len) : std::string());
        auto m_it = vocab.find(merged);
        if (m_it == vocab.end()) {
            throw Error(ErrorKind::kFormat, where + ": model.merges[" + std::to_string(rank) + "] makes '" +
                                                merged + "', which is missing from model.vocab");
        }
        merges_.insert(pair_key(a_it->second, b_it->second), {static_cast<uint32_t>(rank), m_it->second});
    }

    if (options_.byte_level) {
        for (const auto& [token, id] : vocab) {
            if (auto raw = byte_level_decode(token)) raw_vocab_.emplace(std::move(*raw), id);
        }
        const auto& table = byte_level_table();
        for (int b = 0; b < 256; ++b) {
            const std::string& ch = table.byte_to_utf8[b];
            if (auto it = vocab.find(ch); it != vocab.end()) {
                byte_symbols_[b] = {it->second};
                continue;
            }
            if (options_.byte_fallback) {  // HF falls back on the bytes of the stand-in character
                std::vector<int32_t> ids;
                for (char c : ch) {
                    auto it = vocab.find(byte_fallback_token(static_cast<uint8_t>(c)));
                    if (it == vocab.end()) break;
                    ids.push_back(it->second);
                }
                if (ids.size() == ch.size()) {
                    byte_symbols_[b] = std::move(ids);
                    continue;
                }
            }
            byte_is_unk_[b] = true;
        }
    }
}

std::optional<int32_t> Bpe::whole_word(std::string_view piece) const {
    if (options_.byte_level) {
        if (auto it = raw_vocab_.find(std::string(piece)); it != raw_vocab_.end()) return it->second;
    } else if (auto it = vocab_->find(std::string(piece)); it != vocab_->end()) {
        return it->second;
    }
    return std::nullopt;
}

void Bpe::initial_symbols(std::string_view piece, std::vector<int32_t>& symbols) const {
    symbols.clear();
    // A run of unknown characters becomes one <unk> with fuse_unk, one each without; none without unk_token.
    bool pending_unk = false;
    auto known = [&](const std::vector<int32_t>& ids) {
        if (pending_unk) symbols.push_back(unk_id_);
        pending_unk = false;
        symbols.insert(symbols.end(), ids.begin(), ids.end());
    };
    auto unknown = [&] {
        if (unk_id_ < 0) return;
        if (pending_unk && !options_.fuse_unk) symbols.push_back(unk_id_);
        pending_unk = true;
    };
    if (options_.byte_level) {
        for (char c : piece) {
            auto b = static_cast<uint8_t>(c);
            if (byte_is_unk_[b]) {
                unknown();
            } else if (byte_symbols_[b].size() == 1 && !pending_unk) {
                symbols.push_back(byte_symbols_[b][0]);
            } else {
                known(byte_symbols_[b]);
            }
        }
    } else {
        std::vector<int32_t> ids;
        std::string s;
        for (size_t pos = 0, len; pos < piece.size(); pos += len) {
            decode_utf8(piece, pos, &len);
            s.clear();
            if (pos > 0) s += options_.continuing_subword_prefix;
            s.append(piece.data() + pos, len);
            if (pos + len == piece.size()) s += options_.end_of_word_suffix;
            if (auto it = vocab_->find(s); it != vocab_->end()) {
                known({it->second});
                continue;
            }
            if (options_.byte_fallback) {
                ids.clear();
                for (char c : s) {
                    auto it = vocab_->find(byte_fallback_token(static_cast<uint8_t>(c)));
                    if (it == vocab_->end()) break;
                    ids.push_back(it->second);
                }
                if (ids.size() == s.size()) {
                    known(ids);
                    continue;
                }
            }
            unknown();
        }
    }
    if (pending_unk) symbols.push_back(unk_id_);
}

void Bpe::merge(std::vector<int32_t>& symbols) const {
    if (symbols.size() < 2) return;
    if (symbols.size() > kHeapThreshold) {
        merge_with_heap(symbols);
        return;
    }
    // ranks[i]: rank of the pair (symbols[i], symbols[i+1]); UINT32_MAX when it does not merge.
    uint32_t ranks[kHeapThreshold];
    int32_t merged_ids[kHeapThreshold];
    auto lookup = [&](size_t i) {
        const auto* m = merges_.find(pair_key(symbols[i], symbols[i + 1]));
        ranks[i] = m ? m->first : UINT32_MAX;
        merged_ids[i] = m ? m->second : -1;
    };
    size_t n = symbols.size();
    for (size_t i = 0; i + 1 < n; ++i) lookup(i);
    while (n > 1) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < n; ++i) {
            if (ranks[i] < ranks[best]) best = i;  // strict: the leftmost wins ties
        }
        if (ranks[best] == UINT32_MAX) break;
        symbols[best] = merged_ids[best];
        symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
        if (best + 3 <= n) {  // pairs right of the merge shift left by one
            std::copy(ranks + best + 2, ranks + n - 1, ranks + best + 1);
            std::copy(merged_ids + best + 2, merged_ids + n - 1, merged_ids + best + 1);
        }
        --n;
        if (best > 0) lookup(best - 1);
        if (best + 1 < n) lookup(best);
    }
}

// HF's Word::merge_all for long words: a min-heap on (rank, position) over a linked list of symbols,
// skipping entries whose pair has changed since they were pushed.
void Bpe::merge_with_heap(std::vector<int32_t>& symbols) const {
    const size_t n = symbols.size();
    std::vector<int64_t> prev(n), next(n);
    std::vector<uint8_t> removed(n, 0);
    for (size_t i = 0; i < n; ++i) {
        prev[i] = static_cast<int64_t>(i) - 1;
        next[i] = i + 1 < n ? static_cast<int64_t>(i + 1) : -1;
    }
    struct Entry {
        uint32_t rank;
        size_t pos;
        int32_t new_id;
        bool operator>(const Entry& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
    for (size_t i = 0; i + 1 < n; ++i) {
        if (const auto* m = merges_.find(pair_key(symbols[i], symbols[i + 1])))
            queue.push({m->first, i, m->second});
    }
    while (!queue.empty()) {
        Entry top = queue.top();
        queue.pop();
        if (removed[top.pos] || next[top.pos] < 0) continue;
        auto right = static_cast<size_t>(next[top.pos]);
        const auto* m = merges_.find(pair_key(symbols[top.pos], symbols[right]));
        if (m == nullptr || m->second != top.new_id) continue;
        symbols[top.pos] = top.new_id;
        removed[right] = 1;
        next[top.pos] = next[right];
        if (next[right] >= 0) prev[static_cast<size_t>(next[right])] = static_cast<int64_t>(top.pos);
        if (prev[top.pos] >= 0) {
            auto p = static_cast<size_t>(prev[top.pos]);
            if (const auto* pm = merges_.find(pair_key(symbols[p], symbols[top.pos]))) {
                queue.push({pm->first, p, pm->second});
            }
        }
        if (next[top.pos] >= 0) {
            auto q = static_cast<size_t>(next[top.pos]);
            if (const auto* nm = merges_.find(pair_key(symbols[top.pos], symbols[q]))) {
                queue.push({nm->first, top.pos, nm->second});
            }
        }
    }
    size_t out = 0;
    for (size_t i = 0; i < n; ++i) {
        if (!removed[i]) symbols[out++] = symbols[i];
    }
    symbols.resize(out);
}

void Bpe::tokenize(std::string_view piece, std::vector<int32_t>& out) const {
    if (piece.empty()) return;
    if (options_.ignore_merges) {
        if (auto id = whole_word(piece)) {
            out.push_back(*id);
            return;
        }
    }
    const bool cacheable = piece.size() < kCacheMaxWord;
    const uint64_t hash = std::hash<std::string_view>{}(piece);
    const size_t mask = kCacheCapacity * 2 - 1;
    if (cacheable) {
        std::lock_guard<std::mutex> lock(cache_mutex_);
        if (!cache_slots_.empty()) {
            for (size_t i = hash & mask;; i = (i + 1) & mask) {
                const CacheSlot& slot = cache_slots_[i];
                if (slot.key_len == 0) break;
                if (slot.hash == hash && slot.key_len == piece.size() &&
                    std::memcmp(cache_keys_.data() + slot.key_offset, piece.data(), piece.size()) == 0) {
                    out.insert(out.end(), cache_ids_.begin() + slot.ids_offset,
                               cache_ids_.begin() + slot.ids_offset + slot.ids_len);
                    return;
                }
            }
        }
    }
    thread_local std::vector<int32_t> symbols;
    initial_symbols(piece, symbols);
    merge(symbols);
    out.insert(out.end(), symbols.begin(), symbols.end());
    if (cacheable && symbols.size() < 65536) {
        std::lock_guard<std::mutex> lock(cache_mutex_);
        if (cache_used_ >= kCacheCapacity) return;
        if (cache_slots_.empty()) cache_slots_.resize(kCacheCapacity * 2);
        for (size_t i = hash & mask;; i = (i + 1) & mask) {
            CacheSlot& slot = cache_slots_[i];
            if (slot.key_len == 0) {
                slot = {hash, static_cast<uint32_t>(cache_keys_.size()),
                        static_cast<uint32_t>(cache_ids_.size()), static_cast<uint16_t>(piece.size()),
                        static_cast<uint16_t>(symbols.size())};
                cache_keys_.append(piece);
                cache_ids_.insert(cache_ids_.end(), symbols.begin(), symbols.end());
                ++cache_used_;
                return;
            }
            if (slot.hash == hash && slot.key_len == piece.size() &&
                std::memcmp(cache_keys_.data() + slot.key_offset, piece.data(), piece.size()) == 0) {
                return;  // another thread cached it meanwhile
            }
        }
    }
}

}  // namespace surf::model::tokenizer_detail
