// A small, strict Jinja2 interpreter for Hugging Face chat templates.
//
// Renders exactly as transformers does (jinja2 ImmutableSandboxedEnvironment with trim_blocks and
// lstrip_blocks, loop controls, HF's tojson, raise_exception and strftime_now): the fixtures compare byte
// for byte with Python jinja2. Variables are Python-like values built from JSON (object key order kept);
// undefined variables behave like jinja2's default Undefined (falsy, render as empty, iterate as empty;
// using their attributes, calling them or doing arithmetic on them is an error). Unknown filters/tests,
// unsupported tags and syntax errors fail at load with the line; undefined functions, raise_exception()
// and type errors fail at render with the line.
//
// Syntax: {{ }}, {% %}, {# #}, {% raw %}, whitespace control (-, +, trim_blocks, lstrip_blocks, one
// trailing newline dropped, \r\n normalised); if/elif/else; for (tuple targets, `if` filter, else,
// loop.index/index0/revindex/revindex0/first/last/length/previtem/nextitem/depth/cycle, break/continue,
// a fresh scope per iteration); set (names, tuples, namespace attributes, block set); macro (positional,
// keyword and default arguments); HF's {% generation %}. Expressions: literals (str with Python escapes,
// int, float, list, tuple, dict, true/false/none), and/or/not (returning operands, like Python), in,
// not in, chained comparisons, + - * / // % ** ~, string % formatting, conditional expressions,
// attribute/item access, slices with steps, calls with keyword arguments. The filters, tests, methods
// and globals are listed in jinja_filters.cpp and jinja_builtins.cpp.
// Not supported (an error, never a silent difference): include/import/extends/block/call/filter
// blocks, recursive loops, macro varargs/kwargs/caller, str.format, list/dict mutation (as in HF's
// immutable sandbox). Known differences: filters that jinja2 makes lazy (unique, reverse, items on a
// non-dict) yield lists; case mapping covers ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic.
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
