// Token-level JSON-schema constraint: for random schemas of the supported subset and random or adversarial
// logits over a synthetic byte-level vocabulary, masked decoding always ends, parses with nlohmann::json and
// validates against the schema under a validator written here, independently of the grammar compiler.
// The token mask is also compared with a brute-force mask (every token tried on the byte matcher).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "model/structured/json_schema.h"
#include "model/structured/token_constraint.h"

using namespace surf;
using namespace surf::model;
using Json = nlohmann::ordered_json;

namespace {

// ------------------------------------------------------------------ independent JSON-schema validator

size_t code_points(const std::string& s) {
    size_t n = 0;
    for (unsigned char ch : s) n += (ch & 0xC0) != 0x80;
    return n;
}

bool has_type(const Json& v, const std::string& t) {
    if (t == "string") return v.is_string();
    if (t == "integer")
        return v.is_number_integer() ||
               (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
    if (t == "number") return v.is_number();
    if (t == "boolean") return v.is_boolean();
    if (t == "null") return v.is_null();
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    return false;
}

long double num(const Json& v) {
    if (v.is_number_unsigned()) return static_cast<long double>(v.get<uint64_t>());
    if (v.is_number_integer()) return static_cast<long double>(v.get<int64_t>());
    return static_cast<long double>(v.get<double>());
}

// Returns "" when valid, else the first violation.
std::string validate(const Json& v, const Json& s, const Json& root, const std::string& at = "") {
    if (s.contains("$ref")) {
        return validate(v, root.at(Json::json_pointer(s["$ref"].get<std::string>().substr(1))), root, at);
    }
    if (s.contains("anyOf")) {
        for (const Json& alt : s["anyOf"]) {
            if (validate(v, alt, root, at).empty()) return "";
        }
        return at + ": matches no anyOf alternative";
    }
    if (s.contains("oneOf")) {
        int n = 0;
        for (const Json& alt : s["oneOf"]) n += validate(v, alt, root, at).empty();
        return n == 1 ? "" : at + ": matches " + std::to_string(n) + " oneOf alternatives";
    }
    if (s.contains("const") && v != s["const"]) return at + ": not the const";
    if (s.contains("enum")) {
        bool found = false;
        for (const Json& e : s["enum"]) found = found || e == v;
        if (!found) return at + ": not in enum";
    }
    if (s.contains("type")) {
        bool ok = false;
        if (s["type"].is_string())
            ok = has_type(v, s["type"].get<std::string>());
        else
            for (const Json& t : s["type"]) ok = ok || has_type(v, t.get<std::string>());
        if (!ok) return at + ": wrong type";
    }
    if (v.is_string()) {
        size_t n = code_points(v.get<std::string>());
        if (s.contains("maxLength") && n > s["maxLength"].get<size_t>()) return at + ": too long";
        if (s.contains("minLength") && n < s["minLength"].get<size_t>()) return at + ": too short";
    }
    if (v.is_number()) {
        long double x = num(v);
        if (s.contains("minimum") && x < num(s["minimum"])) return at + ": below minimum";
        if (s.contains("maximum") && x > num(s["maximum"])) return at + ": above maximum";
        if (s.contains("exclusiveMinimum") && x <= num(s["exclusiveMinimum"]))
            return at + ": <= exclusiveMinimum";
        if (s.contains("exclusiveMaximum") && x >= num(s["exclusiveMaximum"]))
            return at + ": >= exclusiveMaximum";
    }
    if (v.is_array()) {
        if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return at + ": too many items";
        if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return at + ": too few items";
        if (s.contains("items")) {
            for (size_t i = 0; i < v.size(); ++i) {
                std::string r = validate(v[i], s["items"], root, at + "/" + std::to_string(i));
                if (!r.empty()) return r;
            }
        }
    }
    if (v.is_object()) {
        const Json props = s.value("properties", Json::object());
        for (const Json& r : s.value("required", Json::array())) {
            if (!v.contains(r.get<std::string>())) return at + ": missing " + r.get<std::string>();
        }
        for (auto it = v.begin(); it != v.end(); ++it) {
            if (props.contains(it.key())) {
                std::string r = validate(it.value(), props[it.key()], root, at + "/" + it.key());
                if (!r.empty()) return r;
            } else if (s.contains("additionalProperties") && s["additionalProperties"] == false) {
                return at + ": extra property " + it.key();
            }
        }
    }
    return "";
}

// Keys of every object appear in the order the (resolved) schema lists them.
bool keys_in_schema_order(const Json& v, const Json& s, const Json& root) {
    if (s.contains("$ref"))
        return keys_in_schema_order(v, root.at(Json::json_pointer(s["$ref"].get<std::string>().substr(1))),
                                    root);
    for (const char* k : {"anyOf", "oneOf"}) {
        if (!s.contains(k)) continue;
        for (const Json& alt : s[k]) {
            if (validate(v, alt, root).empty() && keys_in_schema_order(v, alt, root)) return true;
        }
        return false;
    }
    if (v.is_array() && s.contains("items")) {
        for (const Json& e : v) {
            if (!keys_in_schema_order(e, s["items"], root)) return false;
        }
    }
    if (v.is_object() && s.contains("properties")) {
        std::vector<std::string> order;
        for (auto it = s["properties"].begin(); it != s["properties"].end(); ++it) order.push_back(it.key());
        size_t pos = 0;
        for (auto it = v.begin(); it != v.end(); ++it) {
            while (pos < order.size() && order[pos] != it.key()) ++pos;
            if (pos == order.size()) return false;
            if (!keys_in_schema_order(it.value(), s["properties"][it.key()], root)) return false;
        }
    }
    return true;
}

// ---------------------------------------------------------------------------- random schema generator

const char* kNames[] = {"a",
                        "b",
                        "name",
                        "x",
                        "y",
                        "\xC3\xA9t\xC3\xA9",
                        "key with space",
                        "quo\"te",
                        "back\\slash",
                        "\xE4\xB8\xAD\xE6\x96\x87",
                        "type",
                        "k"};
const char* kWords[] = {"up",          "down",  "",      "a\"b", "\xC3\xA9", "\xF0\x9F\x98\x80",
                        "line\nbreak", "tab\t", "click", "the",  "1",        "null"};

struct SchemaGen {
    std::mt19937_64& rng;
    Json defs = Json::object();
    int n_defs = 0;

    int pick(int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); }

    Json scalar_value() {
        switch (pick(5)) {
            case 0: return kWords[pick(12)];
            case 1: return pick(2000) - 1000;
            case 2: return pick(2) == 0;
            case 3: return nullptr;
            default: return (pick(200) - 100) / 4.0;
        }
    }

    Json string_schema() {
        Json s = {{"type", "string"}};
        int mx = pick(10);
        s["maxLength"] = mx;
        if (pick(3) == 0) s["minLength"] = pick(mx + 1);
        return s;
    }

    Json integer_schema() {
        Json s = {{"type", "integer"}};
        switch (pick(8)) {
            case 0:
                s["minimum"] = 0;
                s["maximum"] = 1000;
                break;
            case 1:
                s["minimum"] = -50;
                s["maximum"] = 50;
                break;
            case 2:
                s["minimum"] = 7;
                s["maximum"] = 7;
                break;
            case 3:
                s["minimum"] = -1000;
                s["maximum"] = -990;
                break;
            case 4: s["minimum"] = 5; break;
            case 5: s["maximum"] = -5; break;
            case 6:
                s["exclusiveMinimum"] = 9;
                s["exclusiveMaximum"] = 100;
                break;
            default: break;
        }
        return s;
    }

    Json number_schema() {
        Json s = {{"type", "number"}};
        switch (pick(5)) {
            case 0:
                s["minimum"] = 0.5;
                s["maximum"] = 2.25;
                break;
            case 1:
                s["minimum"] = -1.5;
                s["exclusiveMaximum"] = 1.5;
                break;
            case 2: s["minimum"] = 0; break;
            case 3:
                s["exclusiveMinimum"] = 0.1;
                s["maximum"] = 0.3;
                break;
            default: break;
        }
        return s;
    }

    Json object_schema(int depth, const std::string& discriminator = "") {
        Json s = {{"type", "object"}};
        Json props = Json::object();
        Json required = Json::array();
        if (!discriminator.empty()) {
            props["kind"] = {{"const", discriminator}};
            required.push_back("kind");
        }
        int n = 1 + pick(5);
        for (int i = 0; i < n; ++i) {
            std::string key = kNames[pick(12)];
            if (props.contains(key)) continue;
            props[key] = gen(depth - 1);
            if (pick(2) == 0) required.push_back(key);
        }
        s["properties"] = props;
        if (!required.empty()) s["required"] = required;
        if (pick(2) == 0) s["additionalProperties"] = false;
        return s;
    }

    Json gen(int depth) {
        int kinds = depth > 0 ? 15 : 9;
        switch (pick(kinds)) {
            case 0: return string_schema();
            case 1: {
                Json e = Json::array();
                int n = 1 + pick(4);
                for (int i = 0; i < n; ++i) e.push_back(kWords[pick(12)]);
                return {{"enum", e}};
            }
            case 2: return {{"const", scalar_value()}};
            case 3: return integer_schema();
            case 4: return number_schema();
            case 5: return {{"type", "boolean"}};
            case 6: return {{"type", "null"}, {"description", "nothing"}};
            case 7: {
                Json s = string_schema();
                s["type"] =
                    pick(2) == 0 ? Json::array({"string", "null"}) : Json::array({"integer", "string"});
                return s;
            }
            case 8: {
                Json e = Json::array();
                for (int i = 0; i < 3; ++i) e.push_back(scalar_value());
                return {{"enum", e}};
            }
            case 9:
            case 10: {
                Json s = {{"type", "array"}, {"items", gen(depth - 1)}};
                int mx = pick(4);
                s["maxItems"] = mx;
                if (pick(2) == 0) s["minItems"] = pick(mx + 1);
                return s;
            }
            case 11:
            case 12: return object_schema(depth);
            case 13: {
                Json alts = Json::array();
                int n = 2 + pick(3);
                for (int i = 0; i < n; ++i) alts.push_back(object_schema(depth, "k" + std::to_string(i)));
                return {{pick(2) == 0 ? "anyOf" : "oneOf", alts}};
            }
            default: {
                std::string name = "d" + std::to_string(n_defs++);
                defs[name] = gen(depth - 1);
                return {{"$ref", "#/$defs/" + name}};
            }
        }
    }

    Json root(int depth) {
        // Mostly objects at the root (what agents ask for), with every kind of value below.
        Json body = pick(4) == 0 || depth == 0 ? gen(depth) : object_schema(depth + 1);
        if (n_defs == 0) return body;
        Json s = Json::object();
        s["$defs"] = defs;
        if (body.is_object()) {
            for (auto it = body.begin(); it != body.end(); ++it) s[it.key()] = it.value();
        }
        return s;
    }
};

// ---------------------------------------------------------------------------------------- vocabulary

TokenVocabulary test_vocabulary() {
    TokenVocabulary v = synthetic_byte_vocabulary(3000, 5);
    int32_t eos = v.end_ids[0];
    // Tokens spanning structure of the random schemas: keys with punctuation, escapes, split surrogates.
    std::vector<std::string> extra;
    for (const char* n : kNames) {
        std::string key = Json(n).dump();
        extra.push_back(key + ":");
        extra.push_back("{" + key + ":");
        extra.push_back("," + key + ":");
        extra.push_back("\"," + key + ":\"");
        extra.push_back("}," + key + ":[");
    }
    for (const char* w : kWords) {
        std::string lit = Json(w).dump();
        extra.push_back(lit);
        extra.push_back(lit + "}");
        extra.push_back(":" + lit + ",");
    }
    for (const char* t : {"\\ud83d\\ude00",
                          "\\ud800",
                          "\\udc00",
                          "\\u00e9",
                          "\\u0000\"",
                          "\\\"\"",
                          "\\\\\"",
                          "\\/",
                          "\"k0\"",
                          "\"k1\"}",
                          "[[",
                          "]]",
                          "],[",
                          "[{\"",
                          "}]}",
                          "null}",
                          "null,",
                          "true]",
                          "-0",
                          "0.5",
                          "1.",
                          "2.25",
                          "-1.5",
                          "1e5",
                          "e",
                          "E+",
                          "1000",
                          "1001",
                          "-990",
                          "-1000,"}) {
        extra.push_back(t);
    }
    std::set<std::string> seen(v.token_bytes.begin(), v.token_bytes.end());
    for (const std::string& t : extra) {
        if (seen.insert(t).second) v.token_bytes.push_back(t);
    }
    v.token_bytes.push_back("");            // an unusable special token (empty bytes)
    v.token_bytes.push_back("<|im_end|>");  // a special token with text, flagged unusable
    v.unusable_ids.push_back(static_cast<int32_t>(v.token_bytes.size()) - 1);
    v.token_bytes.push_back("");  // a second end token
    v.end_ids = {eos, static_cast<int32_t>(v.token_bytes.size()) - 1};
    return v;
}

bool bit(const std::vector<uint32_t>& mask, int32_t i) {
    return mask[i >> 5] >> (i & 31) & 1u;
}

enum class Logits { kRandomGreedy, kRandomSampled, kAdversarialStructure, kAdversarialLong };

struct Decoded {
    std::string text;
    int steps = 0;
};

// Decode one sequence under the mask; every step's mask may also be checked against brute force.
Decoded decode(const std::shared_ptr<const CompiledSchema>& schema,
               const std::shared_ptr<const TokenIndex>& index, std::mt19937_64& rng, Logits mode,
               bool brute_force) {
    TokenConstraint c(schema, index);
    const int32_t V = index->vocab_size();
    std::vector<uint32_t> mask(index->mask_words());
    std::vector<float> logits(V);
    std::normal_distribution<float> normal(0.f, 2.f);
    Decoded out;
    for (; out.steps < 3000; ++out.steps) {
        c.fill_allowed(mask.data());
        if (brute_force) {
            for (int32_t t = 0; t < V; ++t) {
                TokenConstraint probe = c.clone();
                bool ok = probe.try_accept(t);
                if (ok != bit(mask, t)) {
                    FAIL_CHECK("mask disagrees with the matcher for token ", t, " \"", index->token_bytes(t),
                               "\" after \"", c.generated_bytes(), "\": mask ", bit(mask, t));
                    return out;
                }
            }
        }
        for (int32_t t = 0; t < V; ++t) {
            const std::string& b = index->token_bytes(t);
            bool end = index->is_end(t);
            switch (mode) {
                case Logits::kRandomGreedy:
                case Logits::kRandomSampled: logits[t] = normal(rng); break;
                case Logits::kAdversarialStructure:
                    // Favour what breaks JSON: ending early, quotes, brackets, escapes, stray UTF-8 bytes.
                    logits[t] = end ? 50.f
                                : (b.find_first_of("\"{}[],:\\") != std::string::npos ||
                                   static_cast<unsigned char>(b[0]) >= 0x80)
                                    ? 20.f + normal(rng)
                                    : normal(rng);
                    break;
                case Logits::kAdversarialLong:
                    // Never want to stop: long tokens, no end token.
                    logits[t] = end ? -50.f : static_cast<float>(b.size()) + normal(rng) * 0.1f;
                    break;
            }
        }
        apply_token_bitmask(logits.data(), mask.data(), V);
        int32_t pick = -1;
        if (mode == Logits::kRandomSampled) {
            float mx = -std::numeric_limits<float>::infinity();
            for (float l : logits) mx = std::max(mx, l);
            double total = 0;
            for (float l : logits) total += std::isinf(l) ? 0.0 : std::exp(l - mx);
            double r = std::uniform_real_distribution<double>(0, total)(rng);
            for (int32_t t = 0; t < V && pick < 0; ++t) {
                if (std::isinf(logits[t])) continue;
                r -= std::exp(logits[t] - mx);
                if (r <= 0) pick = t;
            }
            if (pick < 0) {
                for (int32_t t = V - 1; t >= 0 && pick < 0; --t) pick = std::isinf(logits[t]) ? -1 : t;
            }
        } else {
            pick = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        }
        REQUIRE_MESSAGE((pick >= 0 && !std::isinf(logits[pick])), "empty mask after \"", c.generated_bytes(),
                        "\"");
        c.accept(pick);
        if (index->is_end(pick)) break;
    }
    REQUIRE_MESSAGE(c.ended(), "no end after ", out.steps, " steps: \"", c.generated_bytes(), "\"");
    out.text = c.generated_bytes();
    return out;
}

void check_output(const std::string& text, const Json& schema) {
    Json value;
    try {
        value = Json::parse(text);
    } catch (const std::exception& e) {
        FAIL_CHECK("output does not parse: ", text, " (", e.what(), ") schema ", schema.dump());
        return;
    }
    std::string why = validate(value, schema, schema);
    CHECK_MESSAGE(why.empty(), "output ", text, " violates ", schema.dump(), ": ", why);
    CHECK_MESSAGE(keys_in_schema_order(value, schema, schema), "keys out of schema order: ", text);
    bool in_string = false, escaped = false, whitespace = false;
    for (char ch : text) {
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (ch == '\\')
                escaped = true;
            else if (ch == '"')
                in_string = false;
        } else if (ch == '"') {
            in_string = true;
        } else if (ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r') {
            whitespace = true;
        }
    }
    CHECK_MESSAGE(!whitespace, "output is not compact: ", text);
}

std::shared_ptr<const TokenIndex> test_index() {
    static std::shared_ptr<const TokenIndex> index = TokenIndex::build(test_vocabulary());
    return index;
}

}  // namespace

TEST_CASE("random schemas: masked decoding always yields valid JSON (random and adversarial logits)") {
    auto index = test_index();
    std::mt19937_64 rng(12345);
    int compiled = 0, rejected = 0;
    size_t total_steps = 0, total_bytes = 0;
    for (int i = 0; i < 300; ++i) {
        SchemaGen gen{rng};
        Json schema = gen.root(i % 5);
        std::shared_ptr<const CompiledSchema> compiled_schema;
        try {
            compiled_schema = compile_json_schema(schema, "random schema " + std::to_string(i));
        } catch (const Error& e) {
            // oneOf of generated alternatives can be legitimately ambiguous (identical enum values).
            std::string what = e.what();
            CHECK_MESSAGE((what.find("not told apart") != std::string::npos ||
                           what.find("no value has the declared type") != std::string::npos),
                          what);
            ++rejected;
            continue;
        }
        ++compiled;
        for (Logits mode : {Logits::kRandomGreedy, Logits::kRandomSampled, Logits::kAdversarialStructure,
                            Logits::kAdversarialLong}) {
            bool brute = i < 80 && mode == Logits::kRandomSampled;
            Decoded d = decode(compiled_schema, index, rng, mode, brute);
            check_output(d.text, schema);
            total_steps += d.steps;
            total_bytes += d.text.size();
        }
    }
    MESSAGE("decoded ", total_steps, " tokens, ", total_bytes, " bytes");
    MESSAGE("compiled ", compiled, " random schemas, rejected ", rejected);
    CHECK(compiled > 250);
}

TEST_CASE("policy and localizer schemas decode to valid actions and points") {
    auto index = test_index();
    std::string dir = std::string(SURF_SOURCE_DIR) + "/prompts/schemas/";
    for (const char* file : {"policy_action.schema.json", "localizer_point.schema.json"}) {
        auto compiled = load_json_schema_file(dir + file);
        Json schema = Json::parse(compiled->schema_text);
        std::mt19937_64 rng(99);
        std::set<std::string> action_types;
        for (int i = 0; i < 40; ++i) {
            Logits mode = static_cast<Logits>(i % 4);
            Decoded d = decode(compiled, index, rng, mode, i < 2);
            check_output(d.text, schema);
            Json v = Json::parse(d.text);
            if (v.contains("action")) action_types.insert(v["action"]["type"].get<std::string>());
            if (v.contains("x")) CHECK((v["x"].get<int>() >= 0 && v["x"].get<int>() <= 1000));
        }
        if (std::string(file) == "policy_action.schema.json") CHECK(action_types.size() >= 3);
    }
    CHECK(index->string_cache_size() > 0);
}

TEST_CASE("constraint state: end tokens, errors, clone, completion") {
    auto index = test_index();
    auto schema = compile_json_schema_text(
        R"({"type":"object","properties":{"x":{"type":"integer","minimum":0,"maximum":9}},"required":["x"]})");
    TokenConstraint c(schema, index);
    std::vector<uint32_t> mask(index->mask_words());
    const auto& vocab_end = index->end_ids();
    auto id_of = [&](const std::string& bytes) {
        for (int32_t t = 0; t < index->vocab_size(); ++t) {
            if (index->token_bytes(t) == bytes && index->is_usable(t)) return t;
        }
        FAIL("token not in the test vocabulary: ", bytes);
        return -1;
    };
    c.fill_allowed(mask.data());
    CHECK_FALSE(bit(mask, vocab_end[0]));
    CHECK_FALSE(c.can_end());
    CHECK(bit(mask, id_of("{\"x\":")));
    CHECK_FALSE(bit(mask, id_of("}")));
    CHECK_THROWS_WITH_AS(c.accept(id_of("}")), doctest::Contains("token"), Error);
    c.accept(id_of("{\"x\":"));
    TokenConstraint fork = c.clone();
    c.accept(id_of("7"));
    CHECK_FALSE(c.is_complete());
    c.fill_allowed(mask.data());
    CHECK(bit(mask, id_of("}")));
    CHECK_FALSE(bit(mask, id_of("7")));  // 77 > 9
    c.accept(id_of("}"));
    CHECK(c.can_end());
    CHECK(c.is_complete());
    c.fill_allowed(mask.data());
    for (int32_t t = 0; t < index->vocab_size(); ++t) CHECK(bit(mask, t) == index->is_end(t));
    c.accept(vocab_end[1]);
    CHECK(c.ended());
    CHECK_FALSE(c.try_accept(vocab_end[0]));
    // The fork is unaffected by what the original accepted.
    CHECK(fork.generated_bytes() == "{\"x\":");
    fork.accept(id_of("3"));
    CHECK(fork.generated_bytes() == "{\"x\":3");
    // Unusable specials are never allowed.
    fork.fill_allowed(mask.data());
    CHECK_FALSE(bit(mask, index->vocab_size() - 2));
    CHECK_FALSE(bit(mask, index->vocab_size() - 3));
}

TEST_CASE("apply_token_bitmask sets disallowed logits to -inf") {
    std::vector<float> logits(70, 1.f);
    std::vector<uint32_t> mask = {0xFFFFFFFFu, 0x00000001u, 0x20u};
    apply_token_bitmask(logits.data(), mask.data(), 70);
    for (int i = 0; i < 70; ++i) {
        bool allowed = i < 32 || i == 32 || i == 69;
        CHECK(std::isinf(logits[i]) == !allowed);
    }
}

TEST_CASE("one index and schema shared by concurrent sequences") {
    auto index = TokenIndex::build(test_vocabulary());  // fresh: its string cache fills under contention
    auto schema =
        load_json_schema_file(std::string(SURF_SOURCE_DIR) + "/prompts/schemas/policy_action.schema.json");
    Json json_schema = Json::parse(schema->schema_text);
    std::vector<std::string> outputs(4);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            std::mt19937_64 rng(t);
            outputs[t] = decode(schema, index, rng, Logits::kRandomSampled, false).text;
        });
    }
    for (auto& th : threads) th.join();
    for (const std::string& o : outputs) check_output(o, json_schema);
}
