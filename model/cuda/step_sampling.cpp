#include "model/cuda/step_sampling.h"

#include <algorithm>

#include "base/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"

namespace surf::model::cuda::engine_detail {

StepSampling::StepSampling(GpuModel& model, std::vector<uint32_t> output_mask)
    : model_(model), output_mask_(std::move(output_mask)) {
    mask_words_ = output_mask_.size();
    cap_ = static_cast<size_t>(model_.limits().max_logit_rows);
    output_mask_dev_ = DeviceBuffer(mask_words_ * 4);
    SURF_CUDA_CHECK(
        cudaMemcpy(output_mask_dev_.get(), output_mask_.data(), mask_words_ * 4, cudaMemcpyHostToDevice));
    const size_t bytes = SampleArrays::param_bytes(cap_) + cap_ * mask_words_ * 4;
    params_dev_ = DeviceBuffer(bytes);
    for (Set& s : sets_) {
        s.params_host = PinnedBuffer(bytes);
        s.tokens_host = PinnedBuffer(cap_ * 4);
        SURF_CUDA_CHECK(cudaEventCreate(&s.begin));
        SURF_CUDA_CHECK(cudaEventCreate(&s.end));
    }
}

StepSampling::~StepSampling() {
    for (Set& s : sets_) {
        cudaEventDestroy(s.begin);
        cudaEventDestroy(s.end);
    }
}

std::vector<int32_t> StepSampling::stage(int set, const std::vector<Request*>& owners,
                                         const std::vector<uint64_t>& positions,
                                         const std::vector<int64_t>& rows) {
    Set& S = sets_[set];
    const size_t n = rows.size();
    SURF_CHECK(n <= cap_, "sampling: ", n, " rows over the limit of ", cap_);
    const SampleArrays host = SampleArrays::at(S.params_host.get(), cap_);
    S.any_mask = false;
    std::vector<int32_t> forced(n, -1);
    for (size_t i = 0; i < n; ++i) {
        const Request& r = *owners[static_cast<size_t>(rows[i])];
        const SamplingParams& sp = r.options.sampling;
        host.temperature[i] = sp.temperature, host.top_k[i] = sp.top_k, host.top_p[i] = sp.top_p,
        host.seed[i] = sp.seed;
        host.step[i] = positions[static_cast<size_t>(rows[i])];
        S.any_mask |= r.rules->constrained();
    }
    if (!S.any_mask) {
        stage_reports(S, owners, rows, forced);
        return forced;
    }
    for (size_t i = 0; i < n; ++i) {
        const DecodeRules& rules = *owners[static_cast<size_t>(rows[i])]->rules;
        uint32_t* m = host.masks + i * mask_words_;
        if (!rules.constrained()) {
            std::copy(output_mask_.begin(), output_mask_.end(), m);
            continue;
        }
        if (const int32_t token = rules.forced(); token != DecodeRules::kSample) {
            std::fill(m, m + mask_words_, 0u);
            forced[i] = token;
            continue;
        }
        rules.fill_mask(m, output_mask_.data(), mask_words_);
    }
    stage_reports(S, owners, rows, forced);
    return forced;
}

void StepSampling::stage_reports(Set& S, const std::vector<Request*>& owners,
                                 const std::vector<int64_t>& rows, const std::vector<int32_t>& forced) {
    S.report_rows.clear();
    S.report_to.clear();
    for (size_t i = 0; i < rows.size(); ++i) {
        const Request& r = *owners[static_cast<size_t>(rows[i])];
        if (!r.options.on_logits || forced[i] >= 0 || r.options.max_tokens == 0) continue;
        S.report_rows.push_back(i);
        S.report_to.push_back(&r.options.on_logits);
    }
}

void StepSampling::enqueue(int set, const std::vector<int64_t>& rows) {
    Set& S = sets_[set];
    const size_t n = rows.size();
    cudaStream_t stream = model_.stream();
    SURF_CUDA_CHECK(cudaEventRecord(S.begin, stream));
    const size_t param_bytes = SampleArrays::param_bytes(cap_);
    SURF_CUDA_CHECK(cudaMemcpyAsync(params_dev_.get(), S.params_host.get(),
                                    param_bytes + (S.any_mask ? n * mask_words_ * 4 : 0),
                                    cudaMemcpyHostToDevice, stream));
    const SampleArrays dev = SampleArrays::at(params_dev_.get(), cap_);
    int32_t* tokens = model_.sampled_tokens();
    if (!S.report_rows.empty()) {  // the raw logits, before the sampler reads them
        const size_t V = static_cast<size_t>(model_.config().llm.vocab_size);
        const size_t bytes = S.report_rows.size() * V * 4;
        if (S.logits_host.bytes() < bytes) S.logits_host = PinnedBuffer(bytes);
        for (size_t j = 0; j < S.report_rows.size(); ++j) {
            const float* row = model_.logits() + rows[S.report_rows[j]] * model_.logits_stride();
            SURF_CUDA_CHECK(cudaMemcpyAsync(S.logits_host.as<float>() + j * V, row, V * 4,
                                            cudaMemcpyDeviceToHost, stream));
        }
    }
    // Logits row i belongs to sequence i; sampled rows come in runs of consecutive sequences.
    size_t i = 0;
    while (i < n) {
        size_t j = i + 1;
        while (j < n && rows[j] == rows[j - 1] + 1) ++j;
        surf::kernels::cuda::SamplingParams p;
        p.logits = model_.logits() + rows[i] * model_.logits_stride();
        p.temperature = dev.temperature + i, p.top_k = dev.top_k + i, p.top_p = dev.top_p + i,
        p.seed = dev.seed + i, p.step = dev.step + i;
        // Without schemas every row shares the output mask (no image placeholders): stride 0.
        p.allowed = S.any_mask ? dev.masks + i * mask_words_ : output_mask_dev_.as<uint32_t>();
        p.tokens = tokens + i;
        p.rows = static_cast<int64_t>(j - i), p.vocab = model_.config().llm.vocab_size,
        p.logits_stride = model_.logits_stride();
        p.allowed_stride = S.any_mask ? static_cast<int64_t>(mask_words_) : 0;
        p.radix_only = !model_.limits().sampler_binned;
        surf::kernels::cuda::sample_tokens(p, stream);
        i = j;
    }
    SURF_CUDA_CHECK(cudaMemcpyAsync(S.tokens_host.get(), tokens, n * 4, cudaMemcpyDeviceToHost, stream));
    SURF_CUDA_CHECK(cudaEventRecord(S.end, stream));
}

std::vector<int32_t> StepSampling::wait(int set, const std::vector<int32_t>& forced) {
    Set& S = sets_[set];
    SURF_CUDA_CHECK(cudaEventSynchronize(S.end));
    const int64_t V = model_.config().llm.vocab_size;
    for (size_t j = 0; j < S.report_rows.size(); ++j) (*S.report_to[j])(S.logits_host.as<float>() + j * V, V);
    std::vector<int32_t> out(forced.size());
    const int32_t* got = S.tokens_host.as<int32_t>();
    for (size_t k = 0; k < out.size(); ++k) out[k] = forced[k] >= 0 ? forced[k] : got[k];
    return out;
}

float StepSampling::sampling_ms(int set) const {
    float ms = 0;
    SURF_CUDA_CHECK(cudaEventElapsedTime(&ms, sets_[set].begin, sets_[set].end));
    return ms;
}

}  // namespace surf::model::cuda::engine_detail
