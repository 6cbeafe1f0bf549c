// The scheduler's steps (model/scheduler.h): the plan of a batched step, its accounting once issued, and the
// sampled tokens through each request's DecodeRules.
#include <algorithm>

#include "model/scheduler.h"

namespace surf::model {

namespace {

double since(SchedulerClock::time_point t) {
    return std::chrono::duration<double>(SchedulerClock::now() - t).count();
}

// A step's rows as they are planned: decode rows (the model's order) and prefill chunks, each with its
// owner and sampling position, merged into a PlannedStep at the end.
struct RowLists {
    std::vector<SeqStep> rows;
    std::vector<Request*> owners;
    std::vector<uint64_t> positions;

    void add(SeqStep q, Request* owner, uint64_t position) {
        rows.push_back(std::move(q));
        owners.push_back(owner);
        positions.push_back(position);
    }
};

}  // namespace

bool Scheduler::can_issue_ahead(const PlannedStep& in_flight) const {
    if (!options_.issue_ahead) return false;
    for (int64_t i : in_flight.sample_rows) {
        if (in_flight.owners[static_cast<size_t>(i)]->rules->constrained()) return false;
    }
    return true;
}

std::optional<PlannedStep> Scheduler::plan_step(const PlannedStep* in_flight) {
    finish_cancelled();
    const SchedulerLimits& L = options_.limits;
    const uint64_t ahead_of = in_flight ? in_flight->id : 0;
    RowLists decode, prefill;
    PlannedStep st;
    int64_t budget = std::min(options_.prefill_chunk, L.max_tokens);
    for (auto& r : running_) {
        if (!r->decoding) continue;
        const Session& s = sessions_.at(r->session);
        SeqStep q;
        q.slot = s.slot, q.past = s.past, q.pages = s.pages;
        if (ahead_of != 0 && r->sampled_in_step == ahead_of) {
            if (static_cast<int64_t>(r->result.tokens.size()) + 1 >= r->options.max_tokens)
                continue;  // its last token
            q.tokens = {0}, q.token_from = r->sampled_index;
        } else {
            q.tokens = {r->last_token};
        }
        decode.add(std::move(q), r.get(), static_cast<uint64_t>(s.past));
    }
    // Decode rows count against the chunk (so a step's GEMMs keep one shape while prompts are prefilled), but
    // prefill keeps at least a quarter of it.
    const int64_t n_dec_rows = static_cast<int64_t>(decode.rows.size());
    budget = std::min(std::max(budget - n_dec_rows, budget / 4), L.max_tokens - n_dec_rows);
    for (auto& r : running_) {
        if (!wants_prefill(*r) || (!options_.fixed_chunks && budget <= 0) ||
            static_cast<int64_t>(decode.rows.size() + prefill.rows.size()) >= L.max_seqs) {
            continue;
        }
        st.vision_ticket = std::max(st.vision_ticket, r->vision_ticket);
        const Session& s = sessions_.at(r->session);
        const int64_t room = options_.fixed_chunks ? options_.prefill_chunk : budget;
        const int64_t n = std::min(static_cast<int64_t>(r->tokens.size()) - r->prefill_pos, room);
        SeqStep q;
        q.slot = s.slot, q.past = s.past, q.pages = s.pages;
        q.tokens.assign(r->tokens.begin() + r->prefill_pos, r->tokens.begin() + r->prefill_pos + n);
        if (r->image_region >= 0) q.image_row = r->image_region + image_rows_before(*r, r->prefill_pos);
        if (!options_.fixed_chunks) budget -= n;
        // A one-token chunk on a sequence with state runs as a decode row.
        (q.is_decode() ? decode : prefill).add(std::move(q), r.get(), static_cast<uint64_t>(s.past + n - 1));
    }
    if (decode.rows.empty() && prefill.rows.empty()) return std::nullopt;
    st.n_dec = static_cast<int64_t>(decode.rows.size());
    st.rows = std::move(decode.rows);
    st.rows.insert(st.rows.end(), std::make_move_iterator(prefill.rows.begin()),
                   std::make_move_iterator(prefill.rows.end()));
    st.owners = std::move(decode.owners);
    st.owners.insert(st.owners.end(), prefill.owners.begin(), prefill.owners.end());
    st.positions = std::move(decode.positions);
    st.positions.insert(st.positions.end(), prefill.positions.begin(), prefill.positions.end());
    // Rows that sample: decode rows, and prefill rows whose chunk ends the prompt.
    for (size_t i = 0; i < st.rows.size(); ++i) {
        const Request& r = *st.owners[i];
        const int64_t n = static_cast<int64_t>(st.rows[i].tokens.size());
        st.fed.push_back(n);
        st.prefill.push_back(!r.decoding);
        if (r.decoding || r.prefill_pos + n == static_cast<int64_t>(r.tokens.size()))
            st.sample_rows.push_back(static_cast<int64_t>(i));
    }
    st.cancelled.assign(st.sample_rows.size(), 0);
    st.decode_only =
        std::all_of(st.owners.begin(), st.owners.end(), [](const Request* r) { return r->decoding; });
    st.id = next_step_id_++;
    return st;
}

void Scheduler::mark_issued(PlannedStep& st) {
    last_step_prefilled_ = static_cast<int64_t>(st.rows.size()) > st.n_dec;
    size_t k = 0;
    for (size_t i = 0; i < st.rows.size(); ++i) {
        Request& r = *st.owners[i];
        Session& s = sessions_.at(r.session);
        const int64_t n = st.fed[i];
        s.past += n;
        if (st.rows[i].token_from >= 0) r.fed_in_step = st.id;
        if (st.prefill[i]) {
            r.prefill_pos += n;
            counters_.prefill_tokens += n;
            r.result.prefill_tokens += n;
        } else {
            ++counters_.decode_tokens;
            st.decode_context += s.past;
        }
        if (k < st.sample_rows.size() && st.sample_rows[k] == static_cast<int64_t>(i)) {
            r.decoding = true;
            r.sampled_in_step = st.id;
            r.sampled_index = static_cast<int32_t>(k);
            ++k;
        }
    }
}

void Scheduler::accept_tokens(const PlannedStep& st, const std::vector<int32_t>& tokens) {
    for (size_t k = 0; k < st.sample_rows.size(); ++k) {
        const size_t i = static_cast<size_t>(st.sample_rows[k]);
        Request& r = *st.owners[i];
        // Finished while this step was in flight (it stopped on the token this row fed): what it drew is
        // dropped.
        if (r.finished()) continue;
        if (st.prefill[i]) r.result.prefill_seconds = since(r.started);
        try {
            if (st.cancelled[k]) {
                r.ended = DecodeRules::Outcome{true, FinishReason::kCancelled, std::nullopt, -1};
            } else {
                if (r.result.tokens.empty()) r.first_token_time = SchedulerClock::now();
                DecodeRules::Outcome out = r.rules->accept(tokens[k], r.result);
                if (!out.done) {
                    r.last_token = tokens[k];
                    continue;
                }
                r.ended = std::move(out);
            }
            r.rules->flush(r.result);
        } catch (...) {
            // on_text threw: the request fails with it, leaving nothing pending.
            r.ended = DecodeRules::Outcome{true, FinishReason::kStop, std::nullopt, -1};
            r.failure = std::current_exception();
        }
    }
}

void Scheduler::settle(const PlannedStep& st) {
    ++steps_;
    const size_t retired_before = retired_.size();
    for (int64_t row : st.sample_rows) {
        const size_t i = static_cast<size_t>(row);
        Request& r = *st.owners[i];
        if (r.finished()) continue;
        if (st.prefill[i]) {
            counters_.image_tokens += r.input.image_tokens;
            release_images(r);
        }
        if (!r.ended) continue;
        // `fed`: a step issued ahead already fed the token (SeqStep::token_from), so nothing is left pending.
        DecodeRules::Outcome out = std::move(*r.ended);
        r.ended.reset();
        std::exception_ptr error = out.error ? std::make_exception_ptr(*out.error) : r.failure;
        finish(r, out.finish, out.pending, r.fed_in_step > st.id, std::move(error));
    }
    finish_done();
    // Requests retired before this step settled are in no step still in flight.
    retired_.erase(retired_.begin(), retired_.begin() + static_cast<long>(retired_before));
}

}  // namespace surf::model
