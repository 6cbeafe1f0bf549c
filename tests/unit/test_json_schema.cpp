// JSON schema → grammar: the byte-level matcher accepts exactly the compact JSON texts the schema allows,
// and schemas outside the subset are rejected with an error naming the keyword and where it is.
#include <doctest/doctest.h>

#include <string>

#include "base/error.h"
#include "model/structured/grammar.h"
#include "model/structured/json_schema.h"

using namespace surf;
using namespace surf::model;

namespace {

std::shared_ptr<const CompiledSchema> compile(const std::string& text) {
    return compile_json_schema_text(text);
}

// Whether the whole text is accepted and the value may end there.
bool matches(const CompiledSchema& schema, const std::string& text) {
    ByteMatcher m(schema.grammar);
    return m.accept_bytes(text) && m.can_end();
}

// Whether the text is a viable prefix (every live state can still complete).
bool prefix_ok(const CompiledSchema& schema, const std::string& text) {
    ByteMatcher m(schema.grammar);
    return m.accept_bytes(text);
}

std::string error_of(const std::string& text) {
    try {
        compile(text);
    } catch (const Error& e) {
        return std::string(error_kind_name(e.kind())) + ": " + e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("localizer schema: integers 0..1000 enforced digit by digit") {
    auto s =
        load_json_schema_file(std::string(SURF_SOURCE_DIR) + "/prompts/schemas/localizer_point.schema.json");
    CHECK(matches(*s, R"({"x":0,"y":1000})"));
    CHECK(matches(*s, R"({"x":552,"y":404})"));
    CHECK_FALSE(matches(*s, R"({"x":1001,"y":4})"));
    CHECK_FALSE(prefix_ok(*s, R"({"x":1001)"));
    CHECK_FALSE(prefix_ok(*s, R"({"x":10000)"));
    CHECK_FALSE(prefix_ok(*s, R"({"x":-)"));
    CHECK_FALSE(prefix_ok(*s, R"({"x":01)"));
    CHECK_FALSE(prefix_ok(*s, R"({"x":1.)"));
    CHECK_FALSE(prefix_ok(*s, R"({"y":1)"));         // schema order: x first
    CHECK_FALSE(prefix_ok(*s, R"({ "x":1)"));        // compact: no whitespace
    CHECK_FALSE(matches(*s, R"({"x":1})"));          // y is required
    CHECK_FALSE(prefix_ok(*s, R"({"x":1,"y":2,)"));  // no additional properties
    CHECK(prefix_ok(*s, R"({"x":100)"));
    CHECK_FALSE(matches(*s, R"({"x":100)"));
}

TEST_CASE("policy schema: discriminated actions") {
    auto s =
        load_json_schema_file(std::string(SURF_SOURCE_DIR) + "/prompts/schemas/policy_action.schema.json");
    CHECK(matches(
        *s,
        R"({"thought":"Click search.","note":"","action":{"type":"click","element":"Search box","x":500,"y":20}})"));
    CHECK(matches(*s, R"({"thought":"t","note":"n","action":{"type":"scroll","direction":"down"}})"));
    CHECK(matches(*s, R"({"thought":"t","note":"n","action":{"type":"back"}})"));
    CHECK(matches(*s, R"({"thought":"t","note":"n","action":{"type":"wait","seconds":10}})"));
    CHECK_FALSE(matches(*s, R"({"thought":"t","note":"n","action":{"type":"wait","seconds":11}})"));
    CHECK_FALSE(
        matches(*s, R"({"thought":"t","note":"n","action":{"type":"scroll","direction":"sideways"}})"));
    CHECK_FALSE(
        matches(*s, R"({"thought":"t","note":"n","action":{"type":"goto","url":""}})"));  // minLength 1
    CHECK_FALSE(prefix_ok(*s, R"({"thought":"t","note":"n","action":{"type":"jump")"));
    CHECK_FALSE(matches(*s, R"({"thought":"t","note":"n","action":{"type":"click","element":"e","x":5}})"));
}

TEST_CASE("strings: escapes, UTF-8 validity and code-point lengths") {
    auto s = compile(R"({"type":"string","maxLength":3})");
    CHECK(matches(*s, R"("abc")"));
    CHECK_FALSE(matches(*s, R"("abcd")"));
    CHECK(matches(*s, "\"\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80\""));  // é 中 😀 = 3 code points
    CHECK_FALSE(matches(*s, "\"\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80x\""));
    CHECK(matches(*s, R"("\n\"\\")"));
    CHECK(matches(*s, R"("\u00e9\/\t")"));
    CHECK(matches(*s, R"("\ud83d\ude00")"));         // a surrogate pair is one code point
    CHECK_FALSE(prefix_ok(*s, R"("\ude00)"));        // lone low surrogate
    CHECK_FALSE(prefix_ok(*s, R"("\ud83dx)"));       // high surrogate without its pair
    CHECK_FALSE(prefix_ok(*s, R"("\ud83d\u0041)"));  // high surrogate followed by a non-low one
    CHECK_FALSE(prefix_ok(*s, R"("\x)"));
    CHECK_FALSE(prefix_ok(*s, "\"\x01"));      // raw control character
    CHECK_FALSE(prefix_ok(*s, "\"\x80"));      // continuation byte without a lead
    CHECK_FALSE(prefix_ok(*s, "\"\xC0\xAF"));  // overlong
    CHECK_FALSE(prefix_ok(*s, "\"\xE0\x80"));  // overlong 3-byte
    CHECK_FALSE(prefix_ok(*s, "\"\xED\xA0"));  // UTF-16 surrogate in UTF-8
    CHECK_FALSE(prefix_ok(*s, "\"\xF4\x90"));  // above U+10FFFF
    CHECK_FALSE(prefix_ok(*s, "\"\xF5"));
    CHECK(prefix_ok(*s, "\"\xF0\x9F"));        // a split character is a fine prefix
    CHECK_FALSE(matches(*s, "\"\xF0\x9F\""));  // but cannot close mid-character
    auto m = compile(R"({"type":"string","minLength":2})");
    CHECK_FALSE(matches(*m, R"("a")"));
    CHECK(matches(*m, R"("ab")"));
}

TEST_CASE("numbers: bounds, decimals, negative ranges") {
    auto i = compile(R"({"type":"integer","minimum":-20,"maximum":-3})");
    CHECK(matches(*i, "-3"));
    CHECK(matches(*i, "-20"));
    CHECK_FALSE(matches(*i, "-2"));
    CHECK_FALSE(prefix_ok(*i, "-21"));
    CHECK_FALSE(prefix_ok(*i, "0"));
    CHECK_FALSE(prefix_ok(*i, "-0"));
    auto n = compile(R"({"type":"number","minimum":0.5,"exclusiveMaximum":2.25})");
    CHECK(matches(*n, "0.5"));
    CHECK(matches(*n, "2.249999"));
    CHECK(matches(*n, "1"));
    CHECK_FALSE(matches(*n, "2.25"));
    CHECK_FALSE(matches(*n, "0.4"));
    CHECK_FALSE(prefix_ok(*n, "3"));
    CHECK_FALSE(prefix_ok(*n, "1.1234567"));  // at most 6 fraction digits
    CHECK_FALSE(matches(*n, "1."));
    auto u = compile(R"({"type":"integer"})");
    CHECK(matches(*u, "9223372036854775807"));
    CHECK_FALSE(prefix_ok(*u, "9223372036854775808"));
    CHECK(matches(*u, "-9223372036854775807"));
    auto e = compile(R"({"enum":[1,10,100]})");
    CHECK(matches(*e, "1"));
    CHECK(matches(*e, "10"));
    CHECK_FALSE(matches(*e, "11"));
}

TEST_CASE("objects: optional properties may be skipped, order kept") {
    auto s = compile(R"({"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"},
        "c":{"type":["integer","null"],"maximum":5}},"required":["b"]})");
    CHECK(matches(*s, R"({"b":null})"));
    CHECK(matches(*s, R"({"a":true,"b":null,"c":5})"));
    CHECK(matches(*s, R"({"b":null,"c":null})"));
    CHECK_FALSE(matches(*s, R"({"a":true})"));
    CHECK_FALSE(prefix_ok(*s, R"({"c":1)"));
    CHECK_FALSE(prefix_ok(*s, R"({"b":null,"a")"));
    CHECK_FALSE(prefix_ok(*s, R"({"b":null,"c":6)"));
    auto empty = compile(R"({"type":"object"})");
    CHECK(matches(*empty, "{}"));
    auto arr = compile(
        R"({"type":"array","items":{"type":"integer","minimum":0,"maximum":9},"minItems":1,"maxItems":2})");
    CHECK(matches(*arr, "[1]"));
    CHECK(matches(*arr, "[1,2]"));
    CHECK_FALSE(matches(*arr, "[]"));
    CHECK_FALSE(prefix_ok(*arr, "[1,2,"));
}

TEST_CASE("anyOf, oneOf and $ref") {
    auto s =
        compile(R"({"$defs":{"p":{"type":"object","properties":{"k":{"const":"p"},"v":{"type":"integer"}},
        "required":["k","v"]},"q":{"type":"object","properties":{"k":{"const":"q"},"w":{"type":"string"}},
        "required":["k"]}},"oneOf":[{"$ref":"#/$defs/p"},{"$ref":"#/$defs/q"}]})");
    CHECK(matches(*s, R"({"k":"p","v":3})"));
    CHECK(matches(*s, R"({"k":"q"})"));
    CHECK(matches(*s, R"({"k":"q","w":"x"})"));
    CHECK_FALSE(matches(*s, R"({"k":"p"})"));
    CHECK_FALSE(prefix_ok(*s, R"({"k":"p","w")"));
    auto t = compile(R"({"oneOf":[{"type":"string","maxLength":2},{"type":"null"},{"type":"integer"}]})");
    CHECK(matches(*t, "null"));
    CHECK(matches(*t, "\"ab\""));
    CHECK(matches(*t, "-7"));
}

TEST_CASE("schemas outside the subset are rejected with the keyword and its path") {
    std::string e = error_of(R"({"type":"object","properties":{"name":{"type":"string","pattern":"^a"}}})");
    CHECK(e.find("unsupported") != std::string::npos);
    CHECK(e.find("\"pattern\" at /properties/name/pattern") != std::string::npos);
    e = error_of(R"({"type":"string","format":"uri"})");
    CHECK(e.find("\"format\" at /format") != std::string::npos);
    e = error_of(
        R"({"$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"})");
    CHECK(e.find("recursive reference \"#/$defs/n\"") != std::string::npos);
    CHECK(e.find("/$defs/n/properties/next/$ref") != std::string::npos);
    e = error_of(R"({"oneOf":[{"type":"object","properties":{"a":{"type":"string"}}},{"type":"object"}]})");
    CHECK(e.find("\"oneOf\" at /oneOf") != std::string::npos);
    CHECK(e.find("not told apart") != std::string::npos);
    e = error_of(R"({"allOf":[{"type":"string"}]})");
    CHECK(e.find("\"allOf\" at /allOf") != std::string::npos);
    e = error_of(R"({"type":"integer","multipleOf":2})");
    CHECK(e.find("\"multipleOf\" at /multipleOf") != std::string::npos);
    e = error_of(R"({"type":"integer","maxLength":2})");
    CHECK(e.find("\"maxLength\" at /maxLength") != std::string::npos);
    e = error_of(R"({"type":"array","items":[{"type":"string"}]})");
    CHECK(e.find("\"items\" at /items") != std::string::npos);
    e = error_of(R"({"description":"any value"})");
    CHECK(e.find("no \"type\"") != std::string::npos);
    e = error_of(R"({"type":"string","minLength":5,"maxLength":2})");
    CHECK(e.find("minLength > maxLength") != std::string::npos);
    e = error_of(R"({"type":"object","properties":{},"required":["x"]})");
    CHECK(e.find("required property \"x\"") != std::string::npos);
    e = error_of(R"({"type":"integer","minimum":5,"maximum":4})");
    CHECK(e.find("no integer satisfies") != std::string::npos);
    e = error_of(R"({"$ref":"http://example.com/s.json"})");
    CHECK(e.find("only local refs") != std::string::npos);
    e = error_of("{not json");
    CHECK(e.find("not valid JSON") != std::string::npos);
    CHECK(error_of(R"({"type":"string","title":"t","description":"d"})").empty());
}

TEST_CASE("schema cache shares one compiled schema per text") {
    SchemaCache cache;
    auto a = cache.get(R"({"type":"boolean"})");
    auto b = cache.get(R"({"type":"boolean"})");
    CHECK(a.get() == b.get());
    CHECK(cache.size() == 1);
}
