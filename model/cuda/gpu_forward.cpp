// GpuModel's language-model step: metadata packing, the layer loop and the logits; decode-only steps
// are padded to a graph bucket and replayed from a CUDA graph.
#include <algorithm>
#include <chrono>
#include <utility>

#include "base/error.h"
#include "kernels/cuda/cuda_check.h"
#include "model/cuda/gpu_model.h"

namespace surf::model::cuda {

int64_t GpuModel::forward(const std::vector<SeqStep>& seqs, uint64_t vision_ticket) {
    const GpuLimits& L = limits_;
    const int64_t n_seq = static_cast<int64_t>(seqs.size());
    if (n_seq == 0) return 0;
    if (n_seq > L.max_seqs)
        throw Error(
            ErrorKind::kResourceExhausted,
            "forward: " + std::to_string(n_seq) + " sequences (limit " + std::to_string(L.max_seqs) + ")");
    Step& st = step_;
    st = Step{};
    int64_t logit_rows = 0, n_fed = 0;
    plan_step(seqs, logit_rows, n_fed);
    const bool needs_vision =
        std::any_of(seqs.begin(), seqs.end(), [](const SeqStep& s) { return s.image_row >= 0; });

    // Decode-only steps run as a graph over a padded batch: the padding rows decode token 0 on the scratch
    // slot and page; the block-table width and the attention split grid come from the padded shape.
    const bool graph = graphs_ && st.n_pre == 0 && !keep_layers_ && !timer_.enabled() &&
                       graphs_->batch_bucket(n_seq) <= L.max_logit_rows;
    int64_t rows = n_seq;
    if (graph) {
        const int64_t max_pages_per_seq = (L.max_context + L.page_size - 1) / L.page_size;
        rows = graphs_->batch_bucket(n_seq);
        st.max_pages = DecodeGraphs::pages_bucket(st.max_pages, max_pages_per_seq);
        st.max_len = std::min(st.max_pages * L.page_size, L.max_context);
        st.n_dec = st.n_tok = rows;
        logit_rows = rows;
    }
    // Decode graphs always carry the fed-token indices (a graph serves steps with and without them).
    upload_metadata(seqs, rows, n_fed > 0 || graph);

    if (needs_vision) wait_vision(vision_ticket);

    const std::vector<LogitRun> runs = logit_runs(seqs, rows);
    if (graph) {
        graphs_->launch(rows, st.max_pages, stream_, [&] { enqueue_step(runs, logit_rows); });
        return n_seq;
    }
    enqueue_step(runs, logit_rows);
    return logit_rows;
}

void GpuModel::plan_step(const std::vector<SeqStep>& seqs, int64_t& logit_rows, int64_t& n_fed) {
    const GpuLimits& L = limits_;
    Step& st = step_;
    bool in_decode = true;
    for (const SeqStep& s : seqs) {
        check_row(s);
        const int64_t n = static_cast<int64_t>(s.tokens.size());
        if (s.token_from >= 0) ++n_fed;
        if (s.is_decode()) {
            if (!in_decode)
                throw Error(ErrorKind::kInvalidArgument,
                            "forward: decode rows must come before prefill rows");
            ++st.n_dec;
            st.dec_keys += static_cast<double>(s.past + 1);
            st.max_len_dec = std::max(st.max_len_dec, s.past + 1);
        } else {
            in_decode = false;
            ++st.n_pre;
            st.pre_pairs += static_cast<double>(n) * (static_cast<double>(s.past) + (n + 1) / 2.0);
            st.n_pre_tok += n;
            st.max_q = std::max(st.max_q, n);
        }
        st.n_tok += n;
        st.max_pages = std::max<int64_t>(st.max_pages, static_cast<int64_t>(s.pages.size()));
        st.max_len = std::max(st.max_len, s.past + n);
        logit_rows += s.all_logits ? n : 1;
    }
    if (st.n_tok > L.max_tokens)
        throw Error(
            ErrorKind::kResourceExhausted,
            "forward: " + std::to_string(st.n_tok) + " tokens (limit " + std::to_string(L.max_tokens) + ")");
    if (logit_rows > L.max_logit_rows)
        throw Error(ErrorKind::kResourceExhausted, "forward: " + std::to_string(logit_rows) +
                                                       " logits rows (limit " +
                                                       std::to_string(L.max_logit_rows) + ")");
}

void GpuModel::check_row(const SeqStep& s) const {
    const GpuLimits& L = limits_;
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    if (n == 0) throw Error(ErrorKind::kInvalidArgument, "forward: a sequence with no tokens");
    if (s.slot < 0 || (s.slot >= L.max_slots && !(warming_up_ && s.slot == scratch_slot_)))
        throw Error(ErrorKind::kInvalidArgument,
                    "forward: state slot " + std::to_string(s.slot) + " out of range");
    if (s.past + n > L.max_context)
        throw Error(ErrorKind::kResourceExhausted, "forward: context " + std::to_string(s.past + n) +
                                                       " exceeds " + std::to_string(L.max_context));
    if (static_cast<int64_t>(s.pages.size()) * L.page_size < s.past + n)
        throw Error(ErrorKind::kInvalidArgument, "forward: KV pages do not cover the sequence");
    if (s.token_from >= 0 && (!s.is_decode() || s.token_from >= L.max_logit_rows)) {
        throw Error(ErrorKind::kInvalidArgument, "forward: token_from " + std::to_string(s.token_from) +
                                                     " on a row that is not a decode row or past " +
                                                     std::to_string(L.max_logit_rows) + " sampled tokens");
    }
}

SeqStep GpuModel::padding_row() const {
    SeqStep padding;
    padding.slot = scratch_slot_, padding.past = 0, padding.tokens = {0}, padding.pages = {scratch_page_};
    return padding;
}

GpuModel::MetaLayout GpuModel::meta_layout(int64_t rows, int64_t K, bool with_fed) const {
    const Step& st = step_;
    MetaLayout m;
    int64_t at = 0;
    auto region = [&](int64_t words) {
        const int64_t start = at;
        at += words;
        return start;
    };
    m.ids = region(st.n_tok), m.cu_all = region(rows + 1), m.img = region(rows);
    m.slots_dec = region(st.n_dec), m.lens_dec = region(st.n_dec), m.bt_dec = region(st.n_dec * st.max_pages);
    m.slots_pre = region(st.n_pre), m.cu_pre = region(st.n_pre + 1), m.lens_pre = region(st.n_pre);
    m.bt_pre = region(st.n_pre * st.max_pages), m.slot_map = region(st.n_tok);
    m.init = region((st.n_pre + 3) / 4);  // uint8 flags
    m.replay = region(K > 0 ? st.n_dec : 0), m.fold_slots = region(st.n_fold),
    m.fold_counts = region(st.n_fold);
    m.fed = region(with_fed ? st.n_dec : 0);
    m.words = at;
    return m;
}

void GpuModel::upload_metadata(const std::vector<SeqStep>& seqs, int64_t rows, bool with_fed) {
    const GpuLimits& L = limits_;
    Step& st = step_;
    // Per-step metadata, packed into one pinned buffer and uploaded with one copy (once the previous
    // step's copy out of the buffer has run).
    SURF_CUDA_CHECK(cudaEventSynchronize(meta_uploaded_));
    int32_t* host = meta_host_.as<int32_t>();
    // Replay (GpuLimits::ssm_replay_window): the decode rows' pending counts, and the prefill rows that
    // continue a slot with pending tokens (folded into the state before their scan reads it).
    const int64_t K = replay_count_.empty() ? 0 : L.ssm_replay_window;
    std::vector<int32_t> fold_slots, fold_counts;
    if (K > 0) collect_folds(seqs, fold_slots, fold_counts);
    st.n_fold = static_cast<int64_t>(fold_slots.size());
    const MetaLayout m = meta_layout(rows, K, with_fed);
    SURF_CHECK(static_cast<size_t>(m.words) * 4 <= meta_host_.bytes(), "metadata overflow");
    fill_metadata(seqs, rows, K, with_fed, m, host);
    std::copy(fold_slots.begin(), fold_slots.end(), host + m.fold_slots);
    std::copy(fold_counts.begin(), fold_counts.end(), host + m.fold_counts);
    if (K > 0) advance_replay_counts(seqs, K);
    int32_t* dev = meta_dev_.as<int32_t>();
    SURF_CUDA_CHECK(
        cudaMemcpyAsync(dev, host, static_cast<size_t>(m.words) * 4, cudaMemcpyHostToDevice, stream_));
    SURF_CUDA_CHECK(cudaEventRecord(meta_uploaded_, stream_));
    st.slots_dec = dev + m.slots_dec, st.lens_dec = dev + m.lens_dec, st.bt_dec = dev + m.bt_dec;
    st.slots_pre = dev + m.slots_pre, st.cu_pre = dev + m.cu_pre, st.lens_pre = dev + m.lens_pre,
    st.bt_pre = dev + m.bt_pre;
    st.slot_mapping = dev + m.slot_map, st.has_init_pre = reinterpret_cast<const uint8_t*>(dev + m.init);
    st.ids = dev + m.ids, st.cu_all = dev + m.cu_all, st.image_offsets = dev + m.img;
    st.fed_from = with_fed ? dev + m.fed : nullptr;
    st.replay_dec = K > 0 ? dev + m.replay : nullptr, st.fold_slots = dev + m.fold_slots,
    st.fold_counts = dev + m.fold_counts;
}

void GpuModel::collect_folds(const std::vector<SeqStep>& seqs, std::vector<int32_t>& fold_slots,
                             std::vector<int32_t>& fold_counts) const {
    for (size_t i = static_cast<size_t>(step_.n_dec); i < seqs.size(); ++i) {
        const SeqStep& s = seqs[i];
        if (s.past > 0 && s.slot != scratch_slot_ && replay_count_[s.slot] > 0) {
            fold_slots.push_back(s.slot);
            fold_counts.push_back(replay_count_[s.slot]);
        }
    }
}

void GpuModel::fill_metadata(const std::vector<SeqStep>& seqs, int64_t rows, int64_t K, bool with_fed,
                             const MetaLayout& m, int32_t* host) const {
    const GpuLimits& L = limits_;
    const Step& st = step_;
    const int64_t n_seq = static_cast<int64_t>(seqs.size());
    uint8_t* has_init = reinterpret_cast<uint8_t*>(host + m.init);
    int64_t tok = 0, pre_tok = 0;
    host[m.cu_all] = 0;
    host[m.cu_pre] = 0;
    const SeqStep padding = padding_row();
    for (int64_t i = 0; i < rows; ++i) {
        const SeqStep& s = i < n_seq ? seqs[i] : padding;
        const int64_t n = static_cast<int64_t>(s.tokens.size());
        for (int64_t j = 0; j < n; ++j) {
            host[m.ids + tok + j] = s.tokens[j];
            const int64_t pos = s.past + j;
            host[m.slot_map + tok + j] =
                static_cast<int32_t>(s.pages[pos / L.page_size] * L.page_size + pos % L.page_size);
        }
        tok += n;
        host[m.cu_all + i + 1] = static_cast<int32_t>(tok);
        host[m.img + i] = static_cast<int32_t>(std::max<int64_t>(s.image_row, 0));
        int32_t* bt;
        if (i < st.n_dec) {
            host[m.slots_dec + i] = s.slot;
            if (with_fed) host[m.fed + i] = s.token_from;
            if (K > 0) host[m.replay + i] = s.slot == scratch_slot_ ? 0 : replay_count_[s.slot];
            host[m.lens_dec + i] = static_cast<int32_t>(s.past + 1);
            bt = host + m.bt_dec + i * st.max_pages;
        } else {
            const int64_t k = i - st.n_dec;
            host[m.slots_pre + k] = s.slot;
            pre_tok += n;
            host[m.cu_pre + k + 1] = static_cast<int32_t>(pre_tok);
            host[m.lens_pre + k] = static_cast<int32_t>(s.past + n);
            has_init[k] = s.past > 0 ? 1 : 0;
            bt = host + m.bt_pre + k * st.max_pages;
        }
        for (int64_t p = 0; p < st.max_pages; ++p)
            bt[p] = p < static_cast<int64_t>(s.pages.size()) ? s.pages[p] : 0;
    }
}

void GpuModel::advance_replay_counts(const std::vector<SeqStep>& seqs, int64_t K) {
    // The counts after this step: a decode row adds its token (the K-th folds all of them); a prefill row
    // leaves its slot with none pending (folded above, or a new sequence).
    for (size_t i = 0; i < seqs.size(); ++i) {
        const int32_t slot = seqs[i].slot;
        if (slot == scratch_slot_) continue;
        replay_count_[slot] =
            static_cast<int64_t>(i) < step_.n_dec ? static_cast<int32_t>((replay_count_[slot] + 1) % K) : 0;
    }
}

std::vector<GpuModel::LogitRun> GpuModel::logit_runs(const std::vector<SeqStep>& seqs, int64_t rows) const {
    // Logits rows: per sequence its last token or all of them, as runs of consecutive tokens.
    const int64_t n_seq = static_cast<int64_t>(seqs.size());
    const SeqStep padding = padding_row();
    std::vector<LogitRun> runs;
    int64_t t0 = 0;
    for (int64_t i = 0; i < rows; ++i) {
        const SeqStep& s = i < n_seq ? seqs[i] : padding;
        const int64_t n = static_cast<int64_t>(s.tokens.size()), first = s.all_logits ? t0 : t0 + n - 1,
                      count = s.all_logits ? n : 1;
        if (!runs.empty() && runs.back().first + runs.back().count == first)
            runs.back().count += count;
        else
            runs.push_back({first, count});
        t0 += n;
    }
    return runs;
}

double GpuModel::warm_up(int64_t prefill_tokens, bool row_buckets) {
    const auto t0 = std::chrono::steady_clock::now();
    const GpuLimits& L = limits_;
    warming_up_ = true;
    struct Reset {
        bool& flag;
        kc::Fp8GemmContext* fp8;
        ~Reset() {
            flag = false;
            if (fp8) fp8->set_tune_on_first_use(false);
        }
    } reset{warming_up_, fp8_gemm_.get()};
    const kc::TuneOnFirstUse tuning(*gemm_);  // each throw-away step below runs once
    if (fp8_gemm_) fp8_gemm_->set_tune_on_first_use(true);
    SeqStep row;
    row.slot = scratch_slot_, row.past = 1, row.tokens = {0};
    row.pages.assign(static_cast<size_t>((2 + L.page_size - 1) / L.page_size),
                     scratch_page_);  // covers its 2 tokens
    // Decode steps at each batch bucket (GEMMs of ≤ 128 rows are tuned on first use). Their rows share the
    // scratch slot and page, whose contents are never read by a real sequence.
    if (graphs_) {
        for (int64_t b : graphs_->batch_buckets()) {
            if (b > L.max_seqs || b > L.max_logit_rows) break;
            forward(std::vector<SeqStep>(static_cast<size_t>(b), row), 0);
        }
    }
    // A prefill step of prefill_tokens rows (its shapes tuned on this first use,
    // GemmContext::set_tune_on_first_use). With row_buckets also one step at the top of every 64-row bucket
    // below it: a mixed step's row count is whatever the queue holds, and a new bucket's first steps would
    // each stop to tune; later row counts of a tuned bucket take its algorithms.
    const int64_t n = std::min({prefill_tokens, L.max_tokens, L.max_context});
    auto prefill_rows = [&](int64_t rows) {
        SeqStep pre;
        pre.slot = scratch_slot_, pre.past = 0, pre.tokens.assign(static_cast<size_t>(rows), 0);
        pre.pages.assign(static_cast<size_t>((rows + L.page_size - 1) / L.page_size), scratch_page_);
        forward({pre}, 0);
    };
    if (n > 1) prefill_rows(n);
    if (row_buckets) {
        for (int64_t rows = 192; rows < n; rows += 64) prefill_rows(rows);
    }
    // The trailing layers' GEMMs over the logits rows (GpuLimits::trailing_layers_on_logit_rows), one step at
    // each gemm_rows multiple of 8 up to 128 (those are tuned on first use): b − 1 decode rows and a
    // two-token prompt give b logits rows out of b + 1. Serving's mixed steps have one logits row per decode
    // row and per prompt that ends, so without these their first steps would each stop to tune (more of them
    // with last_mamba_gate_on_logit_rows).
    if (row_buckets && L.trailing_layers_on_logit_rows) {
        SeqStep prompt;
        prompt.slot = scratch_slot_, prompt.past = 0, prompt.tokens = {0, 0};
        prompt.pages.assign(static_cast<size_t>((2 + L.page_size - 1) / L.page_size), scratch_page_);
        for (int64_t b = 8; b <= std::min<int64_t>({128, L.max_logit_rows, L.max_seqs, L.max_tokens - 1});
             b += 8) {
            std::vector<SeqStep> step(static_cast<size_t>(b - 1), row);
            step.push_back(prompt);
            forward(step, 0);
        }
    }
    calibrate_attention_split(n);
    SURF_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void GpuModel::enqueue_step(const std::vector<LogitRun>& runs, int64_t logit_rows) {
    const LlmConfig& c = cfg_.llm;
    const GpuLimits& L = limits_;
    const Step& st = step_;
    const int64_t d = c.hidden_size, n_seq = st.n_dec + st.n_pre;
    // Embeddings (image rows merged) into the fp32 residual stream.
    kc::EmbedParams ep;
    ep.ids = st.ids, ep.table = w_.embeddings.ptr(), ep.image_rows = image_rows_.as<bf16>(),
    ep.cu_seqlens = st.cu_all;
    ep.image_row_offset = st.image_offsets, ep.out = residual_.get(), ep.out_dtype = kc::DType::kF32;
    ep.n_tok = st.n_tok, ep.n_seq = n_seq, ep.dim = d, ep.vocab = w_.embeddings.rows,
    ep.n_image_rows = L.max_image_rows;
    ep.image_token_id = image_token_id_;
    if (st.fed_from)
        ep.fed_from = st.fed_from, ep.fed_ids = sampled_tokens_.as<int32_t>(), ep.n_fed = st.n_dec;
    {
        auto timed = timer_.scope("embed", stream_);
        kc::embed_tokens(ep, embed_ws_.get(), stream_);
    }

    if (keep_layers_ && layer_out_.size() != static_cast<size_t>(c.n_layers())) {
        layer_out_.clear();
        for (int64_t i = 0; i < c.n_layers(); ++i)
            layer_out_.emplace_back(static_cast<size_t>(L.max_tokens * d) * 4);
    }
    // GpuLimits::trailing_layers_on_logit_rows: from the last mixer's output projection on, only the logits
    // rows (in logit_in_). Not while every layer's output is kept (parity dumps want every row).
    size_t last_mixer = w_.layers.size();
    for (size_t li = 0; li < w_.layers.size(); ++li) {
        if (w_.layers[li].kind != LayerKind::kMlp) last_mixer = li;
    }
    const bool tail = L.trailing_layers_on_logit_rows && !keep_layers_ && logit_rows < st.n_tok &&
                      last_mixer < w_.layers.size();
    const LogitRows logit_set{runs, logit_rows, logit_gemm_rows(logit_rows)};
    for (size_t li = 0; li < w_.layers.size(); ++li) {
        const GpuLayer& layer = w_.layers[li];
        const bool on_logit_rows = tail && li > last_mixer;
        float* residual = on_logit_rows ? logit_in_.as<float>() : residual_.as<float>();
        const int64_t rows =
            on_logit_rows ? logit_rows : st.n_tok;  // the norm's; the MLP's GEMMs take gemm_rows
        const LogitRows* mixer_tail = tail && li == last_mixer ? &logit_set : nullptr;
        // h ← h + mixer(RMSNorm(h)); the mixer's last GEMM adds into the fp32 residual (beta = 1).
        kc::RmsNormParams rn;
        rn.x = residual, rn.x_dtype = kc::DType::kF32, rn.weight = layer.norm.ptr(),
        rn.y = normed_.as<bf16>();
        rn.rows = rows, rn.dim = d, rn.eps = c.norm_eps;
        // The norm's output is the first GEMM's input: its FP8 codes from the norm (not on the logits rows,
        // where the MLP's GEMMs take more rows than the norm).
        if (!on_logit_rows) rn.fp8_out = fp8_out_for(first_linear(layer), rows, d);
        {
            auto timed = timer_.scope("norm", stream_);
            kc::rmsnorm(rn, stream_);
        }
        set_fp8_ready(rn.fp8_out, rn.y, rows, d);
        switch (layer.kind) {
            case LayerKind::kMamba2: mamba_layer(li, layer, mixer_tail); break;
            case LayerKind::kAttention: attention_layer(li, layer, mixer_tail); break;
            case LayerKind::kMlp:
                mlp_layer(layer, residual, on_logit_rows ? logit_set.gemm_rows : rows);
                break;
        }
        if (keep_layers_) {
            SURF_CUDA_CHECK(cudaMemcpyAsync(layer_out_[li].get(), residual_.get(),
                                            static_cast<size_t>(st.n_tok * d) * 4, cudaMemcpyDeviceToDevice,
                                            stream_));
        }
    }

    // Logits rows: gather the rows that need logits (unless the trailing layers already ran on them), final
    // norm, lm_head.
    auto timed = timer_.scope("logits", stream_);
    if (!tail) gather_rows(logit_in_.get(), residual_.get(), static_cast<size_t>(d) * 4, runs);
    kc::RmsNormParams fn;
    fn.x = logit_in_.get(), fn.x_dtype = kc::DType::kF32, fn.weight = w_.norm_f.ptr(),
    fn.y = normed_.as<bf16>();
    fn.rows = logit_rows, fn.dim = d, fn.eps = c.norm_eps;
    kc::rmsnorm(fn, stream_);
    // lm_head over the rows rounded up to a multiple of 8 (the extra rows' logits are never read): a step's
    // logits row count varies with how many prompts end in it, and every row count would be a GEMM shape
    // of its own to tune; the weights are read once either way.
    kc::GemmParams head{normed_.as<bf16>(), w_.lm_head.ptr(),    nullptr,         logits_.get(),
                        kc::DType::kF32,    logit_set.gemm_rows, w_.lm_head.rows, d};
    head.ldy = logits_stride();
    kc::gemm(*gemm_, head, stream_);
}

void GpuModel::gather_rows(void* dst, const void* src, size_t row_bytes, const std::vector<LogitRun>& runs) {
    size_t at = 0;
    for (const LogitRun& r : runs) {
        const size_t bytes = static_cast<size_t>(r.count) * row_bytes;
        SURF_CUDA_CHECK(
            cudaMemcpyAsync(static_cast<uint8_t*>(dst) + at,
                            static_cast<const uint8_t*>(src) + static_cast<size_t>(r.first) * row_bytes,
                            bytes, cudaMemcpyDeviceToDevice, stream_));
        at += bytes;
    }
}

int64_t GpuModel::logit_gemm_rows(int64_t count) const {
    return std::max(count, std::min({(count + 7) / 8 * 8, limits_.max_logit_rows, limits_.max_tokens}));
}

void GpuModel::mixer_output(const bf16* x, int64_t k, const GpuMatrix& w, const char* op,
                            const LogitRows* tail, bool x_gathered) {
    const int64_t d = cfg_.llm.hidden_size;
    int64_t rows = step_.n_tok;
    float* residual = residual_.as<float>();
    if (tail) {
        auto timed = timer_.scope("logits", stream_);
        gather_rows(logit_in_.get(), residual_.get(), static_cast<size_t>(d) * 4, tail->runs);
        if (!x_gathered) {
            gather_rows(big_.get(), x, static_cast<size_t>(k) * 2, tail->runs);
            x = big_.as<bf16>();
        }
        rows = tail->gemm_rows;
        residual = logit_in_.as<float>();
    }
    kc::GemmParams out{x, nullptr, nullptr, residual, kc::DType::kF32, rows, d, k};
    out.beta = 1.0f;
    auto timed = timer_.scope(op, stream_);
    linear(out, w);
}

const GpuMatrix& GpuModel::first_linear(const GpuLayer& layer) {
    switch (layer.kind) {
        case LayerKind::kMamba2: return layer.in_proj;
        case LayerKind::kAttention: return layer.qkv;
        case LayerKind::kMlp: break;
    }
    return layer.up;
}

kc::Fp8RowOut GpuModel::fp8_out_for(const GpuMatrix& w, int64_t rows, int64_t cols, bool keep_y) const {
    if (!limits_.fp8_fused_quantize || !w.fp8 || w.parts.empty() || cols != w.cols || cols > fp8_cols_ ||
        rows > limits_.max_tokens)
        return {};
    for (const GpuMatrix::Part& part : w.parts) {
        if (part.input_scale != w.parts.front().input_scale) return {};
    }
    kc::Fp8RowOut out;
    out.q = fp8_x_.as<uint8_t>(), out.scale = fp8_x_scale_.as<float>();
    out.static_scale = w.parts.front().input_scale, out.keep_y = keep_y;
    return out;
}

void GpuModel::set_fp8_ready(const kc::Fp8RowOut& out, const void* x, int64_t rows, int64_t cols) {
    if (out.q) fp8_ready_ = {x, rows, cols, out.static_scale};
}

void GpuModel::linear(kc::GemmParams p, const GpuMatrix& w, int64_t row0, const kc::Fp8RowOut& y_fp8) {
    Fp8Ready ready = std::exchange(fp8_ready_, Fp8Ready{});
    SURF_CHECK(!y_fp8.q || (p.y_dtype == kc::DType::kBF16 && (p.ldy == 0 || p.ldy == p.n)),
               "linear: an FP8 output needs a contiguous bf16 y");
    bool y_fp8_done = false;
    if (!w.fp8) {
        p.w = w.ptr() + row0 * w.cols;
        kc::gemm(*gemm_, p, stream_);
    } else {
        SURF_CHECK(
            !p.bias && p.alpha == 1.0f && p.m <= limits_.max_tokens && p.k == w.cols && p.k <= fp8_cols_,
            "FP8 linear: m ", p.m, " k ", p.k, " (weights ", w.cols, ", buffer ", fp8_cols_, ")");
        // Each part of w (q, k, v of ModelOpt's qkv) quantizes x with its own static scale; parts that
        // share the activation scheme run as one GEMM, which also gives y's codes where it is the only one.
        const int64_t end = row0 + p.n;
        int64_t at = 0;
        for (size_t i = 0; i < w.parts.size();) {
            const float input_scale = w.parts[i].input_scale;
            int64_t lo = at, hi = at;
            for (; i < w.parts.size() && w.parts[i].input_scale == input_scale; ++i) hi += w.parts[i].rows;
            at = hi;
            lo = std::max(lo, row0), hi = std::min(hi, end);
            if (lo >= hi) continue;
            const bool whole = lo == row0 && hi == end;
            fp8_linear_rows(p, w, input_scale, lo, hi - lo, lo - row0, ready,
                            whole ? y_fp8 : kc::Fp8RowOut{});
            y_fp8_done = y_fp8_done || whole;
        }
    }
    if (!y_fp8.q) return;
    if (!y_fp8_done) kc::quantize_e4m3(y_fp8, static_cast<const bf16*>(p.y), p.m, p.n, 0, stream_);
    set_fp8_ready(y_fp8, p.y, p.m, p.n);
}

void GpuModel::fp8_linear_rows(const kc::GemmParams& p, const GpuMatrix& w, float input_scale, int64_t row,
                               int64_t n, int64_t y_col, Fp8Ready& ready, const kc::Fp8RowOut& y_fp8) {
    const int64_t ldx = p.ldx ? p.ldx : p.k;
    if (!(ready.x == p.x && ready.rows == p.m && ready.cols == p.k && ldx == p.k &&
          ready.static_scale == input_scale)) {
        kc::Fp8QuantParams q;
        q.x = p.x, q.x_dtype = kc::DType::kBF16, q.q = fp8_x_.as<uint8_t>(),
        q.scale = fp8_x_scale_.as<float>();
        q.static_scale = input_scale, q.rows = p.m, q.cols = p.k, q.ldx = p.ldx;
        kc::quantize_e4m3(q, stream_);
        ready = {p.x, p.m, p.k, input_scale};
    }
    kc::Fp8GemmParams g;
    g.x = fp8_x_.as<uint8_t>(), g.x_scale = fp8_x_scale_.as<float>(), g.w = w.codes() + row * w.cols,
    g.w_scale = w.scales() + row;
    g.y = static_cast<uint8_t*>(p.y) + static_cast<size_t>(y_col) * kc::dtype_size(p.y_dtype);
    g.y_dtype = p.y_dtype, g.m = p.m, g.n = n, g.k = p.k, g.ldy = p.ldy ? p.ldy : p.n, g.beta = p.beta;
    g.activation = p.activation;
    g.fp8_out = y_fp8;
    kc::fp8_gemm(*fp8_gemm_, g, stream_);
    if (y_fp8.q) ready = {};  // fp8_x_ now holds y's codes
}

kc::DType GpuModel::mamba_y_dtype() const {
    return limits_.mamba_y_bf16 ? kc::DType::kBF16 : kc::DType::kF32;
}

void* GpuModel::mamba_y(int64_t row) const {
    const LlmConfig& c = cfg_.llm;
    const size_t y_elem = kc::dtype_size(mamba_y_dtype());
    return static_cast<void*>(y_.as<uint8_t>() +
                              static_cast<size_t>(row * c.mamba_n_heads * c.mamba_head_dim) * y_elem);
}

void GpuModel::mamba_layer(size_t li, const GpuLayer& W, const LogitRows* tail) {
    const LlmConfig& c = cfg_.llm;
    const Step& st = step_;
    const int64_t d_inner = c.d_inner(), H = c.mamba_n_heads, P = c.mamba_head_dim, d = c.hidden_size;
    const size_t y_elem = kc::dtype_size(mamba_y_dtype());
    // GpuLimits::last_mamba_gate_on_logit_rows: the gate z only for the logits rows (mamba_gate_on_tail), so
    // in_proj's z columns are left out here.
    const int64_t tail_rows = tail ? tail->gemm_rows : 0;
    const bool gate_on_tail = tail && limits_.last_mamba_gate_on_logit_rows &&
                              static_cast<size_t>(tail_rows * (d + d_inner)) * 2 +
                                      static_cast<size_t>(tail_rows * H * P) * y_elem <=
                                  big_.bytes();
    mamba_in_proj(W, gate_on_tail);
    // Prefill rows first (their own stream when overlapping): conv, then the SSD scan. The decode rows'
    // state update is released only once the prefill conv is done, so that the scan (high priority, one
    // wave of blocks) is placed on the SMs first and the bandwidth-bound update fills the room left.
    const bool overlap = overlap_branches(limits_.overlap_mamba_branches);
    cudaStream_t pre_stream = overlap ? branch_stream_ : stream_;
    if (overlap) fork_branch();
    if (st.n_pre > 0) mamba_prefill_rows(li, W, pre_stream, overlap);
    if (st.n_dec > 0) mamba_decode_rows(li, W, overlap);
    if (overlap) join_branch();
    kc::GatedRmsNormParams gn;
    gn.y = mamba_y(0), gn.y_dtype = mamba_y_dtype(), gn.z = big_.as<bf16>(), gn.z_stride = c.in_proj_dim(),
    gn.weight = W.gated_norm.ptr(), gn.out = normed_.as<bf16>();
    gn.rows = st.n_tok, gn.dim = d_inner, gn.group_size = d_inner / c.n_groups, gn.eps = c.norm_eps;
    if (gate_on_tail) mamba_gate_on_tail(W, *tail, gn);
    // out_proj's FP8 input from the norm (with `tail`, out_proj takes gathered rows instead).
    if (!tail) gn.fp8_out = fp8_out_for(W.out_proj, gn.rows, d_inner);
    {
        auto timed = timer_.scope("mamba.gated_norm", stream_);
        kc::gated_rmsnorm(gn, stream_);
    }
    set_fp8_ready(gn.fp8_out, gn.out, gn.rows, d_inner);
    mixer_output(normed_.as<bf16>(), d_inner, W.out_proj, "mamba.out_proj", tail, gate_on_tail);
}

void GpuModel::mamba_in_proj(const GpuLayer& W, bool gate_on_tail) {
    const LlmConfig& c = cfg_.llm;
    const int64_t proj = c.in_proj_dim(), d_inner = c.d_inner(), d = c.hidden_size, n_tok = step_.n_tok;
    bf16* zx = big_.as<bf16>();  // [n_tok, z | xBC | dt]
    auto timed = timer_.scope("mamba.in_proj", stream_);
    if (gate_on_tail) {
        kc::GemmParams xbc_dt{normed_.as<bf16>(), nullptr, nullptr,        zx + d_inner,
                              kc::DType::kBF16,   n_tok,   proj - d_inner, d};
        xbc_dt.ldy = proj;
        linear(xbc_dt, W.in_proj, d_inner);
    } else {
        linear({normed_.as<bf16>(), nullptr, nullptr, zx, kc::DType::kBF16, n_tok, proj, d}, W.in_proj);
    }
}

void GpuModel::mamba_prefill_rows(size_t li, const GpuLayer& W, cudaStream_t pre_stream, bool overlap) {
    const LlmConfig& c = cfg_.llm;
    const Step& st = step_;
    const int64_t proj = c.in_proj_dim(), d_inner = c.d_inner(), conv_dim = c.conv_dim();
    const int64_t G = c.n_groups, N = c.d_state, t0 = st.n_dec;
    bf16* zx = big_.as<bf16>();   // [n_tok, z | xBC | dt]
    bf16* xbc = xbc_.as<bf16>();  // [n_tok, conv_dim] after conv + SiLU
    kc::ConvVarlenParams cv;
    cv.x = zx + t0 * proj + d_inner, cv.x_stride = proj, cv.weight = W.conv_w.ptr(), cv.bias = W.conv_b.ptr();
    cv.state = conv_state_[li].get(), cv.state_dtype = kc::DType::kBF16, cv.cu_seqlens = st.cu_pre,
    cv.slots = st.slots_pre;
    cv.has_initial_state = st.has_init_pre, cv.out = xbc + t0 * conv_dim, cv.n_tok = st.n_pre_tok,
    cv.n_seq = st.n_pre;
    cv.channels = conv_dim, cv.K = c.conv_kernel;
    {
        auto timed = timer_.scope("mamba.conv_varlen", pre_stream);
        kc::causal_conv1d_varlen(cv, pre_stream);
    }
    if (overlap) SURF_CUDA_CHECK(cudaEventRecord(branch_ready_, pre_stream));
    if (st.n_fold > 0) {
        auto timed = timer_.scope("mamba.replay_fold", pre_stream);
        fold_replay(li, st.fold_slots, st.fold_counts, st.n_fold, pre_stream);
    }
    kc::SsdVarlenParams sp;
    bf16* xb = xbc + t0 * conv_dim;
    sp.x = xb, sp.B = xb + d_inner, sp.C = xb + d_inner + G * N, sp.x_stride = conv_dim,
    sp.bc_stride = conv_dim;
    sp.dt_raw = zx + t0 * proj + d_inner + conv_dim, sp.dt_stride = proj, sp.dt_bias = W.dt_bias.ptr(),
    sp.A = W.A.ptr(), sp.D = W.D.ptr();
    sp.state = ssm_state_[li].get(), sp.state_dtype = limits_.ssm_state,
    sp.state_split = limits_.state_split_applies(), sp.cu_seqlens = st.cu_pre, sp.slots = st.slots_pre;
    sp.has_initial_state = st.has_init_pre, sp.y = mamba_y(t0), sp.y_dtype = mamba_y_dtype();
    sp.n_tok = st.n_pre_tok, sp.n_seq = st.n_pre, sp.H = c.mamba_n_heads, sp.P = c.mamba_head_dim, sp.G = G,
    sp.N = N, sp.chunk = c.chunk_size;
    sp.dt_min = c.dt_min, sp.dt_max = c.dt_upper(),
    sp.p_split = limits_.ssd_split ? limits_.ssd_split : (overlap ? 1 : 0);
    sp.wgmma = limits_.ssd_wgmma && !overlap;
    SURF_CHECK(kc::ssd_workspace_bytes(sp) <= ssd_ws_.bytes(), "ssd workspace too small");
    auto timed = timer_.scope("mamba.ssd_scan", pre_stream);
    kc::ssd_varlen(sp, ssd_ws_.get(), pre_stream);
}

void GpuModel::mamba_decode_rows(size_t li, const GpuLayer& W, bool overlap) {
    const LlmConfig& c = cfg_.llm;
    const Step& st = step_;
    const int64_t proj = c.in_proj_dim(), d_inner = c.d_inner(), conv_dim = c.conv_dim();
    const int64_t G = c.n_groups, N = c.d_state;
    bf16* zx = big_.as<bf16>();   // [n_tok, z | xBC | dt]
    bf16* xbc = xbc_.as<bf16>();  // [n_tok, conv_dim] after conv + SiLU
    kc::ConvUpdateParams cu;
    cu.x = zx + d_inner, cu.x_stride = proj, cu.weight = W.conv_w.ptr(), cu.bias = W.conv_b.ptr();
    cu.state = conv_state_[li].get(), cu.state_dtype = kc::DType::kBF16, cu.slots = st.slots_dec,
    cu.out = xbc;
    cu.batch = st.n_dec, cu.channels = conv_dim, cu.K = c.conv_kernel;
    {
        auto timed = timer_.scope("mamba.conv_update", stream_);
        kc::causal_conv1d_update(cu, stream_);
    }
    if (overlap && limits_.ssu_after_prefill_conv && st.n_pre > 0)
        SURF_CUDA_CHECK(cudaStreamWaitEvent(stream_, branch_ready_, 0));
    kc::SsuParams su;
    su.x = xbc, su.B = xbc + d_inner, su.C = xbc + d_inner + G * N, su.x_stride = conv_dim,
    su.bc_stride = conv_dim;
    su.dt_raw = zx + d_inner + conv_dim, su.dt_stride = proj, su.dt_bias = W.dt_bias.ptr(), su.A = W.A.ptr(),
    su.D = W.D.ptr();
    su.state = ssm_state_[li].get(), su.state_dtype = limits_.ssm_state,
    su.state_split = limits_.state_split_applies(), su.slots = st.slots_dec, su.y = mamba_y(0),
    su.y_dtype = mamba_y_dtype();
    su.batch = st.n_dec, su.H = c.mamba_n_heads, su.P = c.mamba_head_dim, su.G = G, su.N = N,
    su.dt_min = c.dt_min, su.dt_max = c.dt_upper(), su.row_split = limits_.ssu_split;
    su.bulk_stage = limits_.ssu_bulk_stage;
    su.l2_evict_first = limits_.l2_evict_first;
    if (st.replay_dec)
        su.replay = ssm_replay_[li].get(), su.replay_count = st.replay_dec,
        su.replay_window = limits_.ssm_replay_window;
    auto timed = timer_.scope("mamba.state_update", stream_);
    kc::selective_state_update(su, stream_);
}

void GpuModel::mamba_gate_on_tail(const GpuLayer& W, const LogitRows& tail, kc::GatedRmsNormParams& gn) {
    const LlmConfig& c = cfg_.llm;
    const int64_t d_inner = c.d_inner(), d = c.hidden_size, HP = c.mamba_n_heads * c.mamba_head_dim;
    const size_t y_elem = kc::dtype_size(mamba_y_dtype());
    // zx is no longer read (the conv and the scan are done): big_ takes the logits rows' in_proj input
    // [R, d], their z [R, d_inner] and their y [R, H·P], one after another; the gated norm writes its R
    // rows to normed_ once the input rows are copied out of it.
    const int64_t rows = tail.gemm_rows;  // gemm_rows; the gathers and the gated norm take the tail's count
    bf16* x_rows = big_.as<bf16>();
    bf16* z_rows = x_rows + rows * d;
    void* y_rows = z_rows + rows * d_inner;
    {
        auto timed = timer_.scope("logits", stream_);
        gather_rows(x_rows, normed_.get(), static_cast<size_t>(d) * 2, tail.runs);
        gather_rows(y_rows, y_.get(), static_cast<size_t>(HP) * y_elem, tail.runs);
    }
    {
        auto timed = timer_.scope("mamba.in_proj", stream_);
        linear({x_rows, nullptr, nullptr, z_rows, kc::DType::kBF16, rows, d_inner, d}, W.in_proj);
    }
    gn.y = y_rows, gn.z = z_rows, gn.z_stride = d_inner, gn.rows = tail.count;
}

void GpuModel::attention_layer(size_t li, const GpuLayer& W, const LogitRows* tail) {
    const LlmConfig& c = cfg_.llm;
    const Step& st = step_;
    const int64_t hd = c.head_dim, q_dim = c.n_heads * hd, kv_dim = c.n_kv_heads * hd,
                  qkv_dim = q_dim + 2 * kv_dim, d = c.hidden_size;
    bf16* qkv = big_.as<bf16>();  // [n_tok, q | k | v]
    bf16* out =
        normed_.as<bf16>();  // [n_tok, n_heads, hd] (the norm output is consumed by the qkv GEMM first)
    {
        auto timed = timer_.scope("attn.qkv", stream_);
        linear({normed_.as<bf16>(), nullptr, nullptr, qkv, kc::DType::kBF16, st.n_tok, qkv_dim, d}, W.qkv);
    }
    kc::KvAppendParams ka;
    ka.k = qkv + q_dim, ka.v = qkv + q_dim + kv_dim, ka.k_stride = qkv_dim, ka.v_stride = qkv_dim;
    ka.k_cache = k_cache_[li].as<bf16>(), ka.v_cache = v_cache_[li].as<bf16>(),
    ka.slot_mapping = st.slot_mapping;
    ka.n_tok = st.n_tok, ka.n_kv_heads = c.n_kv_heads, ka.head_dim = hd;
    {
        auto timed = timer_.scope("attn.kv_append", stream_);
        kc::kv_cache_append(ka, stream_);
    }
    attention_pair(li, qkv, out, timer_.enabled() ? nullptr : green_for_step(li));
    mixer_output(out, q_dim, W.o, "attn.o_proj", tail);
}

bool GpuModel::overlap_branches(bool enabled) const {
    return enabled && step_.n_dec > 0 && step_.n_pre > 0 && !timer_.enabled();
}

void GpuModel::fork_branch() {
    SURF_CUDA_CHECK(cudaEventRecord(branch_fork_, stream_));
    SURF_CUDA_CHECK(cudaStreamWaitEvent(branch_stream_, branch_fork_, 0));
}

void GpuModel::join_branch() {
    SURF_CUDA_CHECK(cudaEventRecord(branch_join_, branch_stream_));
    SURF_CUDA_CHECK(cudaStreamWaitEvent(stream_, branch_join_, 0));
}

void GpuModel::mlp_layer(const GpuLayer& W, float* residual, int64_t n) {
    const LlmConfig& c = cfg_.llm;
    const int64_t d = c.hidden_size, inter = c.intermediate_size;
    bf16* hidden = big_.as<bf16>();  // [n_tok, intermediate]
    {
        // ReLU² in the GEMM's epilogue where our kernel runs it, else gemm() runs relu_squared after
        // cuBLASLt.
        auto timed = timer_.scope("mlp.up_relu2", stream_);
        kc::GemmParams up{normed_.as<bf16>(), nullptr, nullptr, hidden, kc::DType::kBF16, n, inter, d};
        up.activation = kc::GemmActivation::kReluSquared;
        // An FP8 down projection takes its input's codes from up's epilogue; the bf16 hidden rows are then
        // not needed.
        linear(up, W.up, 0, fp8_out_for(W.down, n, inter, false));
    }
    kc::GemmParams down{hidden, nullptr, nullptr, residual, kc::DType::kF32, n, d, inter};
    down.beta = 1.0f;
    auto timed = timer_.scope("mlp.down", stream_);
    linear(down, W.down);
}

void GpuModel::copy_logits_to_host(int64_t rows, std::vector<float>& host) {
    const size_t V = static_cast<size_t>(cfg_.llm.vocab_size);
    host.resize(static_cast<size_t>(rows) * V);
    SURF_CUDA_CHECK(cudaMemcpy2DAsync(host.data(), V * 4, logits_.get(),
                                      static_cast<size_t>(logits_stride()) * 4, V * 4,
                                      static_cast<size_t>(rows), cudaMemcpyDeviceToHost, stream_));
    SURF_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void GpuModel::copy_layer_output(int64_t layer, int64_t n_tok, std::vector<float>& host) const {
    SURF_CHECK(keep_layers_ && layer >= 0 && static_cast<size_t>(layer) < layer_out_.size(),
               "layer outputs not kept");
    host.resize(static_cast<size_t>(n_tok * cfg_.llm.hidden_size));
    SURF_CUDA_CHECK(cudaMemcpyAsync(host.data(), layer_out_[layer].get(), host.size() * 4,
                                    cudaMemcpyDeviceToHost, stream_));
    SURF_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

}  // namespace surf::model::cuda
