// A small, strict Jinja2 interpreter for Hugging Face chat templates.
//
// Renders exactly as transformers does (jinja2 ImmutableSandboxedEnvironment with trim_blocks and
// lstrip_blocks, loop controls, HF's tojson and raise_exception): the chat-template fixtures compare
// byte for byte with Python jinja2. Variables are Python-like values built from JSON; undefined
// variables behave like jinja2's default Undefined (falsy, render as empty; using their attributes is
// an error). Unknown filters/tests, unsupported tags and syntax errors fail at load with the line;
// undefined functions, raise_exception() and type errors fail at render with the line.
//
// Supported: {{ }}, {% %}, {# #}, {% raw %}, whitespace control (- and +); if/elif/else, for (tuple
// targets, `if` filter, else, loop.index/index0/revindex/revindex0/first/last/length/previtem/
// nextitem/cycle, break/continue), set (names, tuples, namespace attributes, block set), macro
// (positional, keyword and default arguments), HF's {% generation %}. See jinja_builtins.cpp for the
// filters, tests, methods and globals.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace surf::model {

class JinjaTemplate {
public:
    // Parses `source`; `name` (usually the file path) prefixes every error message.
    // Throws surf::Error(kFormat) on a syntax error, unknown filter/test or unsupported tag.
    explicit JinjaTemplate(const std::string& source, std::string name = "<template>");
    ~JinjaTemplate();
    JinjaTemplate(JinjaTemplate&&) noexcept;
    JinjaTemplate& operator=(JinjaTemplate&&) noexcept;

    // Renders with `variables` (a JSON object: name → value; object key order is kept).
    // Throws surf::Error(kInvalidArgument) naming the template and line on a render error.
    std::string render(const nlohmann::ordered_json& variables) const;
    std::string render(const nlohmann::json& variables) const;

    const std::string& name() const { return name_; }

private:
    struct Impl;
    std::string name_;
    std::unique_ptr<Impl> impl_;
};

}  // namespace surf::model
