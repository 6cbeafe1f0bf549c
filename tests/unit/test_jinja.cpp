// The Jinja interpreter: parity with Python jinja2 as transformers configures it (fixture cases from
// tests/reference/make_chat_template_fixture.py), plus readable per-feature checks and error messages.
#include <doctest/doctest.h>

#include <ctime>
#include <fstream>
#include <random>
#include <sstream>

#include "base/error.h"
#include "model/text/jinja.h"

using surf::Error;
using surf::ErrorKind;
using surf::model::JinjaTemplate;
using Json = nlohmann::ordered_json;

namespace {

std::string render(const std::string& source, const Json& variables = Json::object()) {
    return JinjaTemplate(source, "test.jinja").render(variables);
}

// The message of the surf::Error that rendering `source` throws ("" when it does not throw).
std::string error_of(const std::string& source, const Json& variables = Json::object(),
                     ErrorKind* kind = nullptr) {
    try {
        render(source, variables);
    } catch (const Error& e) {
        if (kind) *kind = e.kind();
        return e.what();
    }
    return "";
}

Json load_fixture(const std::string& name) {
    std::ifstream in(std::string(SURF_FIXTURES_DIR) + "/chat_template/" + name);
    REQUIRE(in.good());
    return Json::parse(in);
}

}  // namespace

TEST_CASE("jinja matches Python jinja2 on every fixture case") {
    Json cases = load_fixture("jinja_cases.json");
    REQUIRE(cases.size() >= 100);
    int errors = 0;
    for (const auto& c : cases) {
        std::string name = c["name"];
        CAPTURE(name);
        std::string source = c["template"];
        if (c.contains("error")) {
            ++errors;
            std::string python_error = c["error"];
            CAPTURE(python_error);
            CHECK_THROWS_AS(render(source, c["context"]), Error);
        } else {
            std::string got;
            CHECK_NOTHROW(got = render(source, c["context"]));
            CHECK(got == c["expected"].get<std::string>());
        }
    }
    CHECK(errors >= 15);
}

TEST_CASE("jinja output, literals and Python str()") {
    CHECK(render("{{ x }}", {{"x", "hi"}}) == "hi");
    CHECK(render("{{ 1.0 }} {{ 1e20 }} {{ [1, 'a', none] }}") == "1.0 1e+20 [1, 'a', None]");
    CHECK(render("{{ 'a\\n' ~ \"b\" }}") == "a\nb");
    CHECK(render("{{ n }} {{ f }} {{ b }} {{ z }}", {{"n", 3}, {"f", 0.5}, {"b", true}, {"z", nullptr}}) ==
          "3 0.5 True None");
}

TEST_CASE("jinja whitespace control follows trim_blocks and lstrip_blocks") {
    CHECK(render("{% if true %}\nx\n{% endif %}\ny") == "x\ny");
    CHECK(render("a\n    {% if true %}\n    b\n    {% endif %}\nc") == "a\n    b\nc");
    CHECK(render("a  {{- 'b' -}}  c") == "abc");
    CHECK(render("a\n  {%+ if true %}b{% endif %}") == "a\n  b");
    CHECK(render("x\n") == "x");  // one trailing newline dropped, as jinja2 does
    CHECK(render("a {# c #} b") == "a  b");
}

TEST_CASE("jinja control flow: if, for with loop variables, break/continue, set, namespace, macro") {
    CHECK(render("{% if a %}1{% elif b %}2{% else %}3{% endif %}", {{"b", true}}) == "2");
    CHECK(render("{% for x in xs %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}",
                 {{"xs", {"a", "b"}}}) == "1a,2b");
    CHECK(render("{% for x in [] %}x{% else %}none{% endfor %}") == "none");
    CHECK(render("{% for i in range(9) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}"
                 "{% endif %}{{ i }}{% endfor %}") == "02");
    CHECK(render("{% set ns = namespace(n=0) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}"
                 "{{ ns.n }}") == "6");
    CHECK(render("{% set x = 1 %}{% for i in [5] %}{% set x = i %}{% endfor %}{{ x }}") == "1");
    CHECK(render("{% macro m(a, b='B') %}{{ a }}{{ b }}{% endmacro %}{{ m('x') }}{{ m('y', b='z') }}") ==
          "xByz");
}

TEST_CASE("jinja expressions: operators, slicing, methods, filters and tests") {
    CHECK(render("{{ 'abc'[::-1] }} {{ [1, 2, 3][1:] }} {{ 'héllo'[1] }}") == "cba [2, 3] é");
    CHECK(render("{{ 7 // 2 }} {{ -7 % 3 }} {{ 2 ** 3 }} {{ 'a' ~ 1 }} {{ 1 in [1] }}") == "3 2 8 a1 True");
    CHECK(render("{{ ' x '.strip() }}|{{ 'a,b'.split(',') }}|{{ 'ab'.startswith('a') }}") ==
          "x|['a', 'b']|True");
    CHECK(render("{{ d.get('k', 0) }} {{ d.items() | list }}", {{"d", {{"k", 1}}}}) == "1 [('k', 1)]");
    CHECK(render("{{ ['b', 'a'] | sort | join('-') }} {{ '  t ' | trim | upper }} {{ x | default('d') }}") ==
          "a-b T d");
    CHECK(render("{{ m | selectattr('role', 'equalto', 'user') | list | length }}",
                 {{"m", {{{"role", "user"}}, {{"role", "assistant"}}}}}) == "1");
    CHECK(render("{{ x is defined }} {{ none is none }} {{ 'a' is string }} {{ {} is mapping }} {{ 2 is "
                 "equalto 2 }}") == "False True True True True");
}

TEST_CASE("jinja tojson is HF's: no HTML escaping, non-ASCII kept, options honoured") {
    Json v = {{"b", "é<&>"}, {"a", {1, 2.5, nullptr}}};
    CHECK(render("{{ v | tojson }}", {{"v", v}}) == "{\"b\": \"é<&>\", \"a\": [1, 2.5, null]}");
    CHECK(render("{{ v | tojson(indent=1) }}", {{"v", {{"k", {1}}}}}) == "{\n \"k\": [\n  1\n ]\n}");
    CHECK(render("{{ v | tojson(sort_keys=true) }}", {{"v", v}}) ==
          "{\"a\": [1, 2.5, null], \"b\": \"é<&>\"}");
}

TEST_CASE("jinja keeps JSON object key order") {
    Json d = Json::object();
    d["zeta"] = 1;
    d["alpha"] = 2;
    CHECK(render("{% for k in d %}{{ k }} {% endfor %}", {{"d", d}}) == "zeta alpha ");
    nlohmann::json sorted = {{"zeta", 1}, {"alpha", 2}};  // nlohmann::json sorts its keys
    CHECK(JinjaTemplate("{% for k in d %}{{ k }} {% endfor %}").render(nlohmann::json{{"d", sorted}}) ==
          "alpha zeta ");
}

TEST_CASE("jinja undefined values behave like jinja2's default Undefined") {
    CHECK(render("[{{ missing }}]") == "[]");
    CHECK(render("{% if missing %}y{% else %}n{% endif %}") == "n");
    CHECK(render("{{ missing | length }}{{ d.nokey is defined }}", {{"d", Json::object()}}) == "0False");
    std::string message = error_of("{{ missing.attr }}");
    CHECK(message.find("'missing' is undefined") != std::string::npos);
}

TEST_CASE("jinja syntax errors name the template, line and problem") {
    ErrorKind kind{};
    std::string message = error_of("line one\nline two {{ x | nosuchfilter }}", Json::object(), &kind);
    CHECK(kind == ErrorKind::kFormat);
    CHECK(message.find("test.jinja:2:") != std::string::npos);
    CHECK(message.find("no filter named 'nosuchfilter'") != std::string::npos);

    message = error_of("{{ x is nosuchtest }}");
    CHECK(message.find("no test named 'nosuchtest'") != std::string::npos);

    message = error_of("a\n{% if x %}\nb\n{% for y in z %}\n{% endfor %}\n");
    CHECK(message.find("'if' opened on line 2") != std::string::npos);
    CHECK(message.find("'endif'") != std::string::npos);

    message = error_of("a\nb\n{% for x in y %}");
    CHECK(message.find("'for' opened on line 3") != std::string::npos);

    message = error_of("{{ x \n\n");
    CHECK(message.find("test.jinja:1:") != std::string::npos);
    CHECK(message.find("never closed") != std::string::npos);

    message = error_of("ok\n{# open comment");
    CHECK(message.find("test.jinja:2: missing end of comment tag") != std::string::npos);

    message = error_of("{% include 'x.jinja' %}");
    CHECK(message.find("unsupported tag 'include'") != std::string::npos);

    message = error_of("{% if true %}{% endfor %}");
    CHECK(message.find("unknown tag 'endfor'") != std::string::npos);

    message = error_of("{{ 1 + }}");
    CHECK(message.find("unexpected '}}'") != std::string::npos);
}

TEST_CASE("jinja render errors name the line: undefined function, raise_exception, type errors") {
    ErrorKind kind{};
    std::string message = error_of("a\nb\n{{ nosuchfunction(1) }}", Json::object(), &kind);
    CHECK(kind == ErrorKind::kInvalidArgument);
    CHECK(message.find("test.jinja:3:") != std::string::npos);
    CHECK(message.find("'nosuchfunction' is undefined") != std::string::npos);

    message = error_of("\n{{ raise_exception('roles must alternate') }}");
    CHECK(message.find("test.jinja:2: raise_exception: roles must alternate") != std::string::npos);

    message = error_of("{{ 'a' + 1 }}");
    CHECK(message.find("can only concatenate str") != std::string::npos);

    message = error_of("{% set l = [] %}{{ l.append(1) }}");
    CHECK(message.find("unsafe") != std::string::npos);

    message = error_of("{{ 'x'.upper(1) }}");
    CHECK(message.find("takes 0 positional arguments") != std::string::npos);

    message = error_of("{{ [1] | join(',', nosuch=1) }}");
    CHECK(message.find("unexpected keyword argument 'nosuch'") != std::string::npos);

    message = error_of("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}");
    CHECK(message.find("recursion") != std::string::npos);

    message = error_of("{{ range(100000000) | length }}");
    CHECK(message.find("too large") != std::string::npos);
}

TEST_CASE("jinja strftime_now gives the local time like HF's global") {
    std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char year[16];
    std::strftime(year, sizeof(year), "%Y", &local);
    CHECK(render("{{ strftime_now('%Y') }}") == year);
    CHECK(render("{{ strftime_now('%d %b %Y') }}").size() == 11);
}

TEST_CASE("jinja rejects pathological nesting instead of overflowing the stack") {
    std::string deep = "{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}";
    CHECK(error_of(deep).find("nested too deeply") != std::string::npos);
    CHECK(error_of("{{ " + std::string(100000, '-') + "1 }}").find("nested too deeply") != std::string::npos);
    std::string ifs;
    for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
    CHECK(error_of(ifs).find("nested too deeply") != std::string::npos);
    CHECK(render(std::string(100, '(').insert(0, "{{ ") + "1" + std::string(100, ')') + " }}") == "1");
}

TEST_CASE("jinja stops templates that would hang or exhaust memory") {
    // 10^10 iterations and 10^10 bytes if run to the end.
    const std::string nested =
        "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}";
    CHECK(error_of(nested).find("steps") != std::string::npos);
    const std::string doubling =
        "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
        "{% endfor %}{{ ns.s }}";
    CHECK(error_of(doubling).find("concatenation too large") != std::string::npos);
    // A long but reasonable conversation still renders.
    CHECK(render("{% for i in range(20000) %}{{ i % 10 }}{% endfor %}").size() == 20000);
}

TEST_CASE("jinja never crashes on random template soup") {
    const std::vector<std::string> pieces = {
        "{{",       "}}",      "{%",        "%}",         "{#",
        "#}",       "-",       "+",         " if ",       " for ",
        " in ",     " endif ", " endfor ",  " set ",      " x ",
        " ns.a ",   "(",       ")",         "[",          "]",
        "{",        "}",       "'s'",       "\"",         "1",
        "2.5",      ",",       ":",         "|",          " length ",
        " trim ",   " is ",    " defined ", " not ",      " and ",
        " or ",     "~",       "*",         "/",          "//",
        "%",        ".",       "=",         "==",         "\n",
        " ",        "\\",      " macro ",   " endmacro ", " raw ",
        " endraw ", "loop",    " else ",    " elif ",     " namespace(a=1) ",
        "messages"};
    std::mt19937 rng(1234);
    Json variables = {{"x", {1, "two", nullptr}}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
    int rendered = 0;
    for (int i = 0; i < 20000; ++i) {
        std::string source;
        int n = int(rng() % 24);
        for (int k = 0; k < n; ++k) source += pieces[rng() % pieces.size()];
        try {
            JinjaTemplate(source, "fuzz").render(variables);
            ++rendered;
        } catch (const Error&) {
        }
    }
    CHECK(rendered > 100);
}
