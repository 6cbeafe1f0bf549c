#include "model/cpu_executor.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "model/decode_rules.h"
#include "model/sampler.h"
#include "model/scheduler.h"

namespace surf::model {

namespace {

// A SequenceState as host bytes: n_tokens, then per layer its conv state, SSM state, K and V, each as a
// float count and the floats.
void put_floats(std::vector<uint8_t>& out, const float* data, size_t n) {
    const uint64_t count = n;
    const size_t at = out.size();
    out.resize(at + sizeof(count) + n * sizeof(float));
    std::memcpy(out.data() + at, &count, sizeof(count));
    if (n > 0) std::memcpy(out.data() + at + sizeof(count), data, n * sizeof(float));
}

class ByteReader {
public:
    explicit ByteReader(const std::vector<uint8_t>& bytes) : bytes_(bytes) {}
    void read(void* to, size_t n) {
        SURF_CHECK(at_ + n <= bytes_.size(), "CPU state bytes end early: ", at_ + n, " > ", bytes_.size());
        if (n > 0) std::memcpy(to, bytes_.data() + at_, n);
        at_ += n;
    }
    void floats(std::vector<float>& to) {
        uint64_t count = 0;
        read(&count, sizeof(count));
        to.resize(count);
        read(to.data(), count * sizeof(float));
    }
    bool done() const { return at_ == bytes_.size(); }

private:
    const std::vector<uint8_t>& bytes_;
    size_t at_ = 0;
};

}  // namespace

CpuExecutor::CpuExecutor(const cpu::CpuModel& model, Dumper* dumper, int32_t image_token_id,
                         std::vector<uint32_t> output_mask)
    : model_(model), dumper_(dumper), image_token_id_(image_token_id), output_mask_(std::move(output_mask)) {}

cpu::SequenceState& CpuExecutor::state(int32_t slot) {
    std::lock_guard<std::mutex> lock(states_mu_);
    auto it = states_.find(slot);
    if (it == states_.end()) it = states_.emplace(slot, model_.new_state()).first;
    return it->second;
}

float* CpuExecutor::image_rows(int64_t first, int64_t n) {
    const auto d = static_cast<size_t>(model_.config().llm.hidden_size);
    const size_t end = static_cast<size_t>(first + n) * d;
    if (image_rows_.size() < end) image_rows_.resize(end);
    return image_rows_.data() + static_cast<size_t>(first) * d;
}

// Each row continues its slot's state by its tokens (image-context tokens take the rows at image_row on); a
// row that samples keeps its logits for tokens(). Rows are independent, so a row's result does not depend on
// the others in its step.
void CpuExecutor::forward(const PlannedStep& step) {
    const int64_t d = model_.config().llm.hidden_size;
    logits_.assign(step.sample_rows.size(), Tensor());
    counters_.assign(step.sample_rows.size(), 0);
    size_t k = 0;
    for (size_t i = 0; i < step.rows.size(); ++i) {
        const SeqStep& row = step.rows[i];
        cpu::SequenceState& s = state(row.slot);
        SURF_CHECK(s.n_tokens == row.past, "slot ", row.slot, " holds ", s.n_tokens,
                   " tokens, the step says ", row.past);
        const auto images = std::count(row.tokens.begin(), row.tokens.end(), image_token_id_);
        Tensor rows;
        if (images > 0) {
            SURF_CHECK(row.image_row >= 0, "a row with image tokens and no image rows");
            const float* first = image_rows(row.image_row, images);
            rows.shape = {images, d};
            rows.data.assign(first, first + images * d);
        }
        cpu::ForwardInput in;
        in.tokens = &row.tokens;
        in.image_embeds = images > 0 ? &rows : nullptr;
        in.image_token_id = image_token_id_;
        in.dumper =
            step.prefill[i] ? dumper_ : nullptr;  // named intermediates of prompts, not of decode steps
        Tensor logits = model_.forward(s, in);
        if (k < step.sample_rows.size() && step.sample_rows[k] == static_cast<int64_t>(i)) {
            logits_[k] = std::move(logits);
            counters_[k] = static_cast<uint64_t>(s.n_tokens);
            ++k;
        }
    }
}

// Per sampled row: the token its constraint forces, else a draw under its mask; nothing (−1) for a cancelled
// row or a request that generates nothing.
std::vector<int32_t> CpuExecutor::tokens(const PlannedStep& step) {
    const int64_t V = model_.config().llm.vocab_size;
    std::vector<int32_t> out(step.sample_rows.size(), -1);
    std::vector<uint32_t> mask;
    for (size_t k = 0; k < out.size(); ++k) {
        const Request& r = *step.owners[static_cast<size_t>(step.sample_rows[k])];
        if (step.cancelled[k] || r.options.max_tokens == 0) continue;
        const DecodeRules& rules = *r.rules;
        int32_t token = rules.forced();
        if (token == DecodeRules::kSample) {
            const uint32_t* allowed = output_mask_.data();
            if (rules.constrained()) {
                mask.resize(output_mask_.size());
                rules.fill_mask(mask.data(), output_mask_.data(), mask.size());
                allowed = mask.data();
            }
            if (r.options.on_logits) r.options.on_logits(logits_[k].ptr(), V);
            token = sample_token(logits_[k].ptr(), V, r.options.sampling, counters_[k], allowed);
        }
        out[k] = token;
    }
    return out;
}

uint64_t CpuExecutor::encode_images(const std::vector<ImageJob>& jobs) {
    const int64_t S = model_.config().image.tile_size;
    for (const ImageJob& job : jobs) {
        Tensor pixels;
        pixels.shape = {job.n_tiles, 3, S, S};
        pixels.data.assign(job.pixels, job.pixels + pixels.numel());
        const Tensor embeds = model_.encode_images(pixels, dumper_);
        const int64_t n = embeds.shape.at(0);
        std::copy(embeds.data.begin(), embeds.data.end(), image_rows(job.first_row, n));
    }
    return ++vision_ticket_;
}

uint64_t CpuExecutor::copy_image_rows(int64_t from_row, int64_t n_rows, int64_t to_row) {
    const auto d = static_cast<size_t>(model_.config().llm.hidden_size);
    image_rows(std::max(from_row, to_row), n_rows);  // grown first: the pointers below stay valid
    std::memmove(image_rows(to_row, n_rows), image_rows(from_row, n_rows),
                 static_cast<size_t>(n_rows) * d * 4);
    return vision_ticket_;
}

void CpuExecutor::save(int32_t slot, const std::vector<int32_t>& /*pages*/, HostCopy& host) {
    const cpu::SequenceState& s = state(slot);
    std::vector<uint8_t>& out = host.state;
    out.clear();
    const auto n = static_cast<uint64_t>(s.n_tokens);
    out.resize(sizeof(n));
    std::memcpy(out.data(), &n, sizeof(n));
    for (size_t i = 0; i < s.mamba.size(); ++i) {
        put_floats(out, s.mamba[i].conv.data.data(), s.mamba[i].conv.data.size());
        put_floats(out, s.mamba[i].ssm.data.data(), s.mamba[i].ssm.data.size());
        put_floats(out, s.kv[i].k.data(), s.kv[i].k.size());
        put_floats(out, s.kv[i].v.data(), s.kv[i].v.size());
    }
    host.kv.clear();  // the KV is part of the state bytes
}

void CpuExecutor::load(int32_t slot, const std::vector<int32_t>& /*pages*/, const HostCopy& host) {
    cpu::SequenceState& s = state(slot);
    s = model_.new_state();
    ByteReader in(host.state);
    uint64_t n = 0;
    in.read(&n, sizeof(n));
    s.n_tokens = static_cast<int64_t>(n);
    for (size_t i = 0; i < s.mamba.size(); ++i) {
        const size_t conv = s.mamba[i].conv.data.size(), ssm = s.mamba[i].ssm.data.size();
        in.floats(s.mamba[i].conv.data);
        in.floats(s.mamba[i].ssm.data);
        SURF_CHECK(s.mamba[i].conv.data.size() == conv && s.mamba[i].ssm.data.size() == ssm,
                   "CPU state bytes of another model (layer ", i, ")");
        in.floats(s.kv[i].k);
        in.floats(s.kv[i].v);
    }
    SURF_CHECK(in.done(), "CPU state bytes longer than the model's state");
}

void CpuExecutor::release(int32_t slot) {
    std::lock_guard<std::mutex> lock(states_mu_);
    states_.erase(slot);
}

}  // namespace surf::model
