#include "apps/serve/prefix_cache.h"

#include <algorithm>

#include "model/engine_input.h"
#include "model/text/tokenizer.h"
#include "model/vision/image.h"

namespace surf::serve {

std::vector<model::InputPart> PromptUnits::parts(size_t begin, size_t end) const {
    std::vector<model::InputPart> out;
    std::vector<int32_t> run;
    for (size_t i = begin; i < end; ++i) {
        if (images[i]) {
            if (!run.empty()) out.push_back(model::InputPart::of_tokens(std::move(run))), run.clear();
            out.push_back(model::InputPart::of_image(images[i]));
        } else {
            run.push_back(static_cast<int32_t>(keys[i]));
        }
    }
    if (!run.empty()) out.push_back(model::InputPart::of_tokens(std::move(run)));
    return out;
}

PromptUnits prompt_units(const std::vector<model::InputPart>& parts, const model::Tokenizer& tokenizer) {
    PromptUnits units;
    for (const model::InputPart& part : parts) {
        if (part.image) {
            const model::Image& img = *part.image;
            const uint64_t dims = (static_cast<uint64_t>(img.width) << 32) ^
                                  (static_cast<uint64_t>(img.height) << 8) ^ img.channels;
            const uint64_t h = model::content_hash(img.pixels.data(), img.pixels.size(), dims);
            units.keys.push_back(-1 - static_cast<int64_t>(h >> 1));  // < 0: never a token id
            units.images.push_back(part.image);
            continue;
        }
        const std::vector<int32_t> ids =
            part.token_ids.empty() ? tokenizer.encode(part.text, /*parse_special=*/true) : part.token_ids;
        for (int32_t id : ids) {
            units.keys.push_back(id);
            units.images.push_back(nullptr);
        }
    }
    return units;
}

PrefixCache::~PrefixCache() {
    for (const Entry& e : entries_) {
        try {
            engine_.close_session(e.session);
        } catch (...) {
        }
    }
}

std::optional<PrefixCache::Hit> PrefixCache::fork_longest_prefix(const PromptUnits& prompt,
                                                                 size_t max_units) {
    std::lock_guard<std::mutex> lock(mu_);
    Entry* best = nullptr;
    for (Entry& e : entries_) {
        if (e.keys.size() > max_units || (best && e.keys.size() <= best->keys.size())) continue;
        if (std::equal(e.keys.begin(), e.keys.end(), prompt.keys.begin())) best = &e;
    }
    if (!best) return std::nullopt;
    best->last_used = ++clock_;
    Hit hit{engine_.fork_session(best->session), best->keys.size(), best->engine_tokens};
    ++hits_;
    hit_tokens_ += hit.engine_tokens;
    return hit;
}

void PrefixCache::insert(const PromptUnits& prompt, size_t units, int64_t engine_tokens,
                         model::SessionId session) {
    if (capacity_ == 0) return;
    const model::SessionId snapshot = engine_.fork_session(session);
    std::vector<model::SessionId> closing;
    {
        std::lock_guard<std::mutex> lock(mu_);
        Entry entry{std::vector<int64_t>(prompt.keys.begin(), prompt.keys.begin() + static_cast<long>(units)),
                    snapshot, engine_tokens, ++clock_};
        auto same = std::find_if(entries_.begin(), entries_.end(),
                                 [&](const Entry& e) { return e.keys == entry.keys; });
        if (same != entries_.end()) {
            closing.push_back(same->session);
            *same = std::move(entry);
        } else {
            entries_.push_back(std::move(entry));
        }
        while (entries_.size() > capacity_) {
            auto oldest =
                std::min_element(entries_.begin(), entries_.end(),
                                 [](const Entry& a, const Entry& b) { return a.last_used < b.last_used; });
            closing.push_back(oldest->session);
            entries_.erase(oldest);
        }
        // Closed under the lock: no fork of these can be in flight (forks hold it too).
        for (model::SessionId id : closing) {
            try {
                engine_.close_session(id);
            } catch (...) {
            }
        }
    }
}

size_t PrefixCache::size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_.size();
}

}  // namespace surf::serve
