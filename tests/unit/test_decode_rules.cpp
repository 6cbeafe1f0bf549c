// DecodeRules (model/decode_rules.h), the output rules both engines apply to a request's tokens, with the
// tiny fixture's tokenizer: stop ids, max_tokens, on_text cancelling, prefill-only requests, the schema's
// constraint (mask, forced end token, a refused token) and which token a finished reply leaves pending.
#include <doctest/doctest.h>

#include "model/decode_rules.h"
#include "model/structured/json_schema.h"

using namespace surf;
using namespace surf::model;

namespace {

const std::string kTinyModel = SURF_FIXTURES_DIR "/golden/tiny_fp32";
constexpr int32_t kStop = 2;

struct Fixture {
    Tokenizer tokenizer = load_model_tokenizer(kTinyModel);
    std::shared_ptr<const TokenIndex> index = TokenIndex::build(token_vocabulary(tokenizer, {kStop}));
    std::vector<int32_t> ids(const std::string& text) const { return tokenizer.encode(text, false); }
    bool allowed(const std::vector<uint32_t>& mask, int32_t token) const {
        return (mask[static_cast<size_t>(token) / 32] >> (token % 32)) & 1u;
    }
};

GenerateOptions with_tokens(int32_t max_tokens) {
    GenerateOptions o;
    o.max_tokens = max_tokens;
    return o;
}

}  // namespace

TEST_CASE("stop ids: a request's own, else the model's eos unless it ignores them") {
    GenerateOptions o;
    CHECK(stop_ids(o, {2, 3}) == std::vector<int64_t>{2, 3});
    o.ignore_eos = true;
    CHECK(stop_ids(o, {2, 3}).empty());
    o.stop_ids = {7};
    CHECK(stop_ids(o, {2, 3}) == std::vector<int64_t>{7});
}

TEST_CASE("a stop id ends the reply, leaves the id pending and keeps it out of the text") {
    Fixture f;
    DecodeRules rules(with_tokens(10), {kStop}, f.index, &f.tokenizer);
    GenerateResult r;
    const std::vector<int32_t> hello = f.ids("hello");
    for (int32_t t : hello) CHECK_FALSE(rules.accept(t, r).done);
    const DecodeRules::Outcome out = rules.accept(kStop, r);
    CHECK(out.done);
    CHECK(out.finish == FinishReason::kStop);
    CHECK(out.pending == kStop);
    CHECK_FALSE(out.error);
    rules.flush(r);
    CHECK(r.text == "hello");
    CHECK(r.tokens.size() == hello.size() + 1);
}

TEST_CASE("max_tokens ends the reply with its last token pending; max_tokens 0 takes no token") {
    Fixture f;
    const std::vector<int32_t> abc = f.ids("abc def");
    REQUIRE(abc.size() >= 2);
    DecodeRules rules(with_tokens(2), {kStop}, f.index, &f.tokenizer);
    GenerateResult r;
    CHECK_FALSE(rules.accept(abc[0], r).done);
    const DecodeRules::Outcome out = rules.accept(abc[1], r);
    CHECK(out.done);
    CHECK(out.finish == FinishReason::kLength);
    CHECK(out.pending == abc[1]);

    DecodeRules prefill_only(with_tokens(0), {kStop}, f.index, &f.tokenizer);
    GenerateResult p;
    const DecodeRules::Outcome none = prefill_only.accept(abc[0], p);
    CHECK(none.done);
    CHECK(none.finish == FinishReason::kLength);
    CHECK(none.pending == -1);
    CHECK(p.tokens.empty());
}

TEST_CASE("on_text returning false cancels; streamed text and the result's text agree") {
    Fixture f;
    GenerateOptions o = with_tokens(50);
    std::string streamed;
    o.on_text = [&](std::string_view piece) {
        streamed += piece;
        return streamed.size() < 6;
    };
    DecodeRules rules(o, {kStop}, f.index, &f.tokenizer);
    GenerateResult r;
    DecodeRules::Outcome out;
    for (int32_t t : f.ids("one two three four")) {
        out = rules.accept(t, r);
        if (out.done) break;
    }
    CHECK(out.done);
    CHECK(out.finish == FinishReason::kCancelled);
    CHECK(out.pending == r.tokens.back());
    CHECK(streamed == r.text);
    CHECK(r.text.size() >= 6);
}

TEST_CASE("no token allowed is an error that leaves nothing pending") {
    Fixture f;
    DecodeRules rules(with_tokens(5), {kStop}, f.index, &f.tokenizer);
    GenerateResult r;
    const DecodeRules::Outcome out = rules.accept(-1, r);
    CHECK(out.done);
    REQUIRE(out.error);
    CHECK(out.error->kind() == ErrorKind::kModelOutput);
    CHECK(std::string(out.error->what()).find("allows no token at step 0") != std::string::npos);
    CHECK(out.pending == -1);
    CHECK(r.tokens.empty());
}

TEST_CASE(
    "a schema: the mask follows the value, a complete value forces the stop id, a refused token fails") {
    Fixture f;
    GenerateOptions o = with_tokens(40);
    o.schema = compile_json_schema_text(R"({"enum":["yes"]})", "test schema");
    DecodeRules rules(o, {kStop}, f.index, &f.tokenizer);
    REQUIRE(rules.constrained());
    const size_t words = (static_cast<size_t>(f.tokenizer.vocab_size()) + 31) / 32;
    const std::vector<uint32_t> generable(words, ~0u);
    std::vector<uint32_t> mask(words);
    GenerateResult r;
    const std::vector<int32_t> value = f.ids("\"yes\"");
    for (int32_t t : value) {
        CHECK(rules.forced() == DecodeRules::kSample);
        rules.fill_mask(mask.data(), generable.data(), words);
        CHECK(f.allowed(mask, t));
        CHECK_FALSE(f.allowed(mask, kStop));  // the value is not complete yet
        CHECK_FALSE(rules.accept(t, r).done);
    }
    CHECK(rules.forced() == kStop);  // nothing but the end may follow
    const DecodeRules::Outcome end = rules.accept(rules.forced(), r);
    CHECK(end.finish == FinishReason::kStop);
    rules.flush(r);
    CHECK(r.text == "\"yes\"");

    DecodeRules other(o, {kStop}, f.index, &f.tokenizer);
    GenerateResult q;
    const int32_t wrong = f.ids("7")[0];
    const DecodeRules::Outcome broke = other.accept(wrong, q);
    CHECK(broke.done);
    REQUIRE(broke.error);
    CHECK(std::string(broke.error->what()).find("broke the output constraint") != std::string::npos);
    CHECK(broke.pending == wrong);
}
