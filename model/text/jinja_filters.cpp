// Jinja filters and tests with jinja2 3.1 semantics (plus HF's tojson, which does not HTML-escape).
//
// Filters: abs attr capitalize count d default dictsort e escape first float indent int items join
// last length list lower map max min reject rejectattr replace reverse round safe select selectattr
// sort string sum title tojson trim unique upper wordcount format.
// Tests: defined undefined none boolean true false integer float number string mapping iterable
// sequence callable sameas equalto eq ne lt le gt ge in odd even divisibleby lower upper (and the
// operator spellings == != < <= > >= for select/reject).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "model/text/jinja_ast.h"
#include "model/text/jinja_builtins.h"
#include "model/text/jinja_text.h"

namespace surf::model::jinja {

namespace {

const char* const kTests[] = {
    "defined", "undefined", "none",     "boolean",  "true",     "false",  "integer", "float",       "number",
    "string",  "mapping",   "iterable", "sequence", "callable", "sameas", "equalto", "eq",          "ne",
    "lt",      "le",        "gt",       "ge",       "in",       "odd",    "even",    "divisibleby", "lower",
    "upper",   "==",        "!=",       "<",        "<=",       ">",      ">="};

// `a.b.0` attribute paths as map/selectattr/sort/join take them.
Value lookup_path(const Value& v, const std::string& path) {
    Value current = v;
    size_t start = 0;
    while (true) {
        size_t dot = path.find('.', start);
        std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
        if (current.is_undefined()) return current;
        current = digits ? get_item(current, Value::integer(std::atoll(part.c_str())))
                         : get_item(current, Value::string(part));
        if (dot == std::string::npos) return current;
        start = dot + 1;
    }
}

Value attribute_of(const Value& v, const Value& attribute) {
    if (attribute.is_none() || attribute.is_undefined()) return v;
    if (attribute.is_number() && !attribute.is_float()) return get_item(v, attribute);
    return lookup_path(v, to_str(attribute));
}

// jinja2 compares strings case-insensitively in sort/unique/min/max/dictsort unless asked not to.
Value sort_key(const Value& v, bool case_sensitive) {
    if (!case_sensitive && v.is_string()) return Value::string(lower_string(v.as_string()));
    return v;
}

size_t length_of(const Value& v) {
    switch (v.kind()) {
        case Value::Kind::kUndefined: return 0;
        case Value::Kind::kString: return utf8_length(v.as_string());
        case Value::Kind::kList: return v.as_list().size();
        case Value::Kind::kDict:
        case Value::Kind::kNamespace: return v.as_dict().entries.size();
        default: throw TemplateError(std::string("object of type '") + v.type_name() + "' has no len()");
    }
}

std::string html_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&#34;"; break;
            case '\'': out += "&#39;"; break;
            default: out += c;
        }
    }
    return out;
}

Value to_int(const Value& v, const Value& fallback) {
    if (v.is_number()) return Value::integer(v.is_float() ? int64_t(std::trunc(v.as_double())) : v.as_int());
    if (v.is_string()) {
        std::string s = strip_string(v.as_string(), Value::none(), true, true);
        char* end = nullptr;
        long long i = std::strtoll(s.c_str(), &end, 10);
        if (!s.empty() && end == s.c_str() + s.size()) return Value::integer(i);
        double d = std::strtod(s.c_str(), &end);
        if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(d)) return Value::integer(int64_t(d));
    }
    return fallback;
}

Value to_float(const Value& v, const Value& fallback) {
    if (v.is_number()) return Value::number(v.as_double());
    if (v.is_string()) {
        std::string s = strip_string(v.as_string(), Value::none(), true, true);
        char* end = nullptr;
        double d = std::strtod(s.c_str(), &end);
        if (!s.empty() && end == s.c_str() + s.size()) return Value::number(d);
    }
    return fallback;
}

// Python's round(x, n): correctly rounded, ties to even on the exact binary value.
double python_round(double x, int64_t digits) {
    if (!std::isfinite(x)) return x;
    if (digits == 0) return std::nearbyint(x);
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", int(std::clamp<int64_t>(digits, 0, 300)), x);
    return digits > 0 ? std::strtod(buf, nullptr)
                      : std::nearbyint(x / std::pow(10.0, double(-digits))) * std::pow(10.0, double(-digits));
}

std::string indent_text(const std::string& text, const Value& width, bool first, bool blank) {
    if (!width.is_string() && (!width.is_number() || width.is_float())) {
        throw TemplateError("indent width must be an integer or a string");
    }
    std::string pad = width.is_string() ? width.as_string()
                                        : std::string(size_t(std::max<int64_t>(width.as_int(), 0)), ' ');
    std::vector<std::string> lines = split_lines(text + "\n");
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) {
        if (i > 0) {
            out += "\n";
            if (blank || !lines[i].empty()) out += pad;
        }
        out += lines[i];
    }
    return first ? pad + out : out;
}

bool run_test(const std::string& name, const Value& v, CallArgs& call);

// select/reject/selectattr/rejectattr: keep the items whose test (or truthiness) equals `keep`.
Value filter_items(const Value& subject, CallArgs& call, bool keep, bool by_attribute, const char* fname) {
    size_t first_test_arg = by_attribute ? 1 : 0;
    Value attribute = by_attribute ? (call.positional.empty() ? Value() : call.positional[0]) : Value();
    if (by_attribute && call.positional.empty())
        throw TemplateError(std::string(fname) + "() missing attribute name");
    std::string test;
    CallArgs test_args;
    if (call.positional.size() > first_test_arg) {
        test = to_str(call.positional[first_test_arg]);
        if (!is_known_test(test)) throw TemplateError("no test named '" + test + "'");
        test_args.positional.assign(call.positional.begin() + long(first_test_arg) + 1,
                                    call.positional.end());
    }
    test_args.keyword = call.keyword;
    ValueList out;
    for (const Value& item : iterate(subject)) {
        Value probe = by_attribute ? attribute_of(item, attribute) : item;
        CallArgs args = test_args;
        bool passed = test.empty() ? probe.truthy() : run_test(test, probe, args);
        if (passed == keep) out.push_back(item);
    }
    return Value::list(std::move(out));
}

Value extremum(const Value& subject, Args& a, bool want_max) {
    bool case_sensitive = a.flag(0, "case_sensitive", false);
    Value attribute = a.optional(1, "attribute", Value::none());
    ValueList items = iterate(subject);
    if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
    size_t best = 0;
    for (size_t i = 1; i < items.size(); ++i) {
        int c = compare(sort_key(attribute_of(items[i], attribute), case_sensitive),
                        sort_key(attribute_of(items[best], attribute), case_sensitive));
        if (want_max ? c > 0 : c < 0) best = i;
    }
    return items[best];
}

Value sorted(ValueList items, bool reverse, bool case_sensitive, const Value& attribute) {
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
        int c = compare(sort_key(attribute_of(x, attribute), case_sensitive),
                        sort_key(attribute_of(y, attribute), case_sensitive));
        return reverse ? c > 0 : c < 0;
    });
    return Value::list(std::move(items));
}

// ---- the filters: one function each, found by name in filter_table() ----
//
// A filter reads its arguments through Args; the table says whether run_filter then checks that none is left
// over (the filters that pass their arguments on, such as map and select, check their own).

Value f_default(const std::string&, const Value& v, Args& a, CallArgs&) {
    Value fallback = a.optional(0, "default_value", Value::string(""));
    bool boolean = a.flag(1, "boolean", false);
    return (v.is_undefined() || (boolean && !v.truthy())) ? fallback : v;
}

Value f_length(const std::string&, const Value& v, Args&, CallArgs&) {
    return Value::integer(int64_t(length_of(v)));
}

Value f_string(const std::string&, const Value& v, Args&, CallArgs&) {
    return Value::string(to_str(v));
}

Value f_case(const std::string& name, const Value& v, Args&, CallArgs&) {
    const std::string s = to_str(v);
    if (name == "lower") return Value::string(lower_string(s));
    if (name == "upper") return Value::string(upper_string(s));
    if (name == "title") return Value::string(jinja_title(s));
    return Value::string(capitalize_string(s));
}

Value f_trim(const std::string&, const Value& v, Args& a, CallArgs&) {
    return Value::string(strip_string(to_str(v), a.optional(0, "chars", Value::none()), true, true));
}

Value f_replace(const std::string&, const Value& v, Args& a, CallArgs&) {
    return Value::string(replace_string(to_str(v), to_str(a.required(0, "old")), to_str(a.required(1, "new")),
                                        a.integer(2, "count", -1)));
}

Value f_tojson(const std::string&, const Value& v, Args& a, CallArgs&) {
    JsonOptions o;
    Value indent = a.optional(1, "indent", Value::none());
    o.ensure_ascii = a.flag(0, "ensure_ascii", false);
    if (!indent.is_none()) o.indent = int(indent.as_int());
    Value separators = a.optional(2, "separators", Value::none());
    if (separators.is_list() && separators.as_list().size() == 2) {
        o.item_separator = to_str(separators.as_list()[0]);
        o.key_separator = to_str(separators.as_list()[1]);
    }
    o.sort_keys = a.flag(3, "sort_keys", false);
    return Value::string(to_json(v, o));
}

Value f_join(const std::string&, const Value& v, Args& a, CallArgs&) {
    std::string sep = to_str(a.optional(0, "d", Value::string("")));
    Value attribute = a.optional(1, "attribute", Value::none());
    std::string out;
    bool first = true;
    for (const Value& item : iterate(v)) {
        if (!first) out += sep;
        out += to_str(attribute_of(item, attribute));
        first = false;
    }
    return Value::string(out);
}

Value f_first_last(const std::string& name, const Value& v, Args&, CallArgs&) {
    ValueList items = iterate(v);
    if (items.empty()) return Value::undefined("No " + name + " item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
}

Value f_items(const std::string&, const Value& v, Args&, CallArgs&) {
    ValueList items;
    if (v.is_dict() || v.is_namespace()) {
        for (const auto& [k, x] : v.as_dict().entries)
            items.push_back(Value::list({Value::string(k), x}, true));
    } else if (!v.is_undefined()) {
        throw TemplateError(std::string("Can only get item pairs from a mapping, not ") + v.type_name());
    }
    return Value::list(std::move(items));
}

Value f_list(const std::string&, const Value& v, Args&, CallArgs&) {
    return Value::list(iterate(v));
}

Value f_reverse(const std::string&, const Value& v, Args&, CallArgs&) {
    if (v.is_string()) {
        std::vector<std::string> chars = utf8_chars(v.as_string());
        std::string out;
        for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
        return Value::string(out);
    }
    ValueList items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
}

Value f_sort(const std::string&, const Value& v, Args& a, CallArgs&) {
    bool reverse = a.flag(0, "reverse", false);
    bool case_sensitive = a.flag(1, "case_sensitive", false);
    return sorted(iterate(v), reverse, case_sensitive, a.optional(2, "attribute", Value::none()));
}

Value f_dictsort(const std::string&, const Value& v, Args& a, CallArgs&) {
    bool case_sensitive = a.flag(0, "case_sensitive", false);
    std::string by = to_str(a.optional(1, "by", Value::string("key")));
    bool reverse = a.flag(2, "reverse", false);
    if (!v.is_dict()) throw TemplateError(std::string("dictsort expects a dict, not ") + v.type_name());
    ValueList pairs;
    for (const auto& [k, x] : v.as_dict().entries) pairs.push_back(Value::list({Value::string(k), x}, true));
    return sorted(std::move(pairs), reverse, case_sensitive, Value::integer(by == "value" ? 1 : 0));
}

Value f_unique(const std::string&, const Value& v, Args& a, CallArgs&) {
    bool case_sensitive = a.flag(0, "case_sensitive", false);
    Value attribute = a.optional(1, "attribute", Value::none());
    ValueList out, seen;
    for (const Value& item : iterate(v)) {
        Value key = sort_key(attribute_of(item, attribute), case_sensitive);
        if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) {
            seen.push_back(key);
            out.push_back(item);
        }
    }
    return Value::list(std::move(out));
}

Value f_extremum(const std::string& name, const Value& v, Args& a, CallArgs&) {
    return extremum(v, a, name == "max");
}

Value f_sum(const std::string&, const Value& v, Args& a, CallArgs&) {
    Value attribute = a.optional(0, "attribute", Value::none());
    Value total = a.optional(1, "start", Value::integer(0));
    for (const Value& item : iterate(v)) total = binary_op("+", total, attribute_of(item, attribute));
    return total;
}

// map(filter, args...) applies a filter to each item (and checks its own arguments); map(attribute=...) reads
// an attribute of each.
Value f_map(const std::string&, const Value& v, Args& a, CallArgs& call) {
    ValueList out;
    if (!call.positional.empty()) {
        std::string filter = to_str(call.positional[0]);
        if (!is_known_filter(filter)) throw TemplateError("no filter named '" + filter + "'");
        CallArgs rest;
        rest.positional.assign(call.positional.begin() + 1, call.positional.end());
        rest.keyword = call.keyword;
        for (const Value& item : iterate(v)) {
            CallArgs args = rest;
            out.push_back(apply_filter(filter, item, args));
        }
        return Value::list(std::move(out));
    }
    Value attribute = a.required(0, "attribute");
    Value fallback = a.optional(1, "default", Value());
    for (const Value& item : iterate(v)) {
        Value x = attribute_of(item, attribute);
        out.push_back(x.is_undefined() && !fallback.is_undefined() ? fallback : x);
    }
    a.finish();
    return Value::list(std::move(out));
}

Value f_select(const std::string& name, const Value& v, Args&, CallArgs& call) {
    bool keep = name == "select" || name == "selectattr";
    return filter_items(v, call, keep, name.size() > 6, name.c_str());
}

Value f_attr(const std::string&, const Value& v, Args& a, CallArgs&) {
    Value attribute = get_attribute(v, to_str(a.required(0, "name")));
    // jinja2's attr() does getattr only: dict keys are not attributes.
    return v.is_dict() && !attribute.is_callable() ? Value::undefined() : attribute;
}

Value f_abs(const std::string&, const Value& v, Args&, CallArgs&) {
    if (!v.is_number())
        throw TemplateError(std::string("bad operand type for abs(): '") + v.type_name() + "'");
    return v.is_float() ? Value::number(std::fabs(v.as_double())) : Value::integer(std::llabs(v.as_int()));
}

Value f_int_float(const std::string& name, const Value& v, Args& a, CallArgs&) {
    if (v.is_undefined()) fail_undefined(v);  // int(Undefined) raises in jinja2
    if (name == "int") return to_int(v, a.optional(0, "default", Value::integer(0)));
    return to_float(v, a.optional(0, "default", Value::number(0.0)));
}

Value f_round(const std::string&, const Value& v, Args& a, CallArgs&) {
    int64_t precision = a.integer(0, "precision", 0);
    std::string method = to_str(a.optional(1, "method", Value::string("common")));
    if (!v.is_number()) throw TemplateError(std::string("round expects a number, not ") + v.type_name());
    double x = v.as_double();
    double scale = std::pow(10.0, double(precision));
    if (method == "common")
        return v.is_float() ? Value::number(python_round(x, precision)) : Value::integer(v.as_int());
    if (method == "ceil") return Value::number(std::ceil(x * scale) / scale);
    if (method == "floor") return Value::number(std::floor(x * scale) / scale);
    throw TemplateError("method must be common, ceil or floor");
}

Value f_indent(const std::string&, const Value& v, Args& a, CallArgs&) {
    Value width = a.optional(0, "width", Value::integer(4));
    bool first = a.flag(1, "first", false);
    bool blank = a.flag(2, "blank", false);
    return Value::string(indent_text(to_str(v), width, first, blank));
}

Value f_escape(const std::string&, const Value& v, Args&, CallArgs&) {
    return Value::string(html_escape(to_str(v)));
}

Value f_safe(const std::string&, const Value& v, Args&, CallArgs&) {
    return v;
}

Value f_wordcount(const std::string&, const Value& v, Args&, CallArgs&) {
    return Value::integer(int64_t(split_string(to_str(v), Value::none(), -1, false).as_list().size()));
}

Value f_format(const std::string&, const Value& v, Args&, CallArgs& call) {
    if (!call.keyword.empty()) throw TemplateError("format() keyword arguments are not supported");
    return Value::string(percent_format(to_str(v), Value::list(call.positional, true)));
}

struct FilterEntry {
    Value (*run)(const std::string& name, const Value& v, Args& a, CallArgs& call);
    bool check_args;  // run_filter checks that the filter read every argument it was given
};

const std::map<std::string, FilterEntry>& filter_table() {
    static const std::map<std::string, FilterEntry> table = {
        {"abs", {f_abs, true}},
        {"attr", {f_attr, true}},
        {"capitalize", {f_case, true}},
        {"count", {f_length, true}},
        {"d", {f_default, true}},
        {"default", {f_default, true}},
        {"dictsort", {f_dictsort, true}},
        {"e", {f_escape, true}},
        {"escape", {f_escape, true}},
        {"first", {f_first_last, true}},
        {"float", {f_int_float, true}},
        {"format", {f_format, false}},
        {"indent", {f_indent, true}},
        {"int", {f_int_float, true}},
        {"items", {f_items, true}},
        {"join", {f_join, true}},
        {"last", {f_first_last, true}},
        {"length", {f_length, true}},
        {"list", {f_list, true}},
        {"lower", {f_case, true}},
        {"map", {f_map, false}},
        {"max", {f_extremum, true}},
        {"min", {f_extremum, true}},
        {"reject", {f_select, false}},
        {"rejectattr", {f_select, false}},
        {"replace", {f_replace, true}},
        {"reverse", {f_reverse, true}},
        {"round", {f_round, true}},
        {"safe", {f_safe, true}},
        {"select", {f_select, false}},
        {"selectattr", {f_select, false}},
        {"sort", {f_sort, true}},
        {"string", {f_string, true}},
        {"sum", {f_sum, true}},
        {"title", {f_case, true}},
        {"tojson", {f_tojson, true}},
        {"trim", {f_trim, true}},
        {"unique", {f_unique, true}},
        {"upper", {f_case, true}},
        {"wordcount", {f_wordcount, true}},
    };
    return table;
}

Value run_filter(const std::string& name, const Value& v, CallArgs& call) {
    const auto it = filter_table().find(name);
    if (it == filter_table().end()) throw TemplateError("no filter named '" + name + "'");
    Args a(call, name);
    Value result = it->second.run(name, v, a, call);
    if (it->second.check_args) a.finish();
    return result;
}

bool type_test(const std::string& name, const Value& v) {
    if (name == "defined") return !v.is_undefined();
    if (name == "undefined") return v.is_undefined();
    if (name == "none") return v.is_none();
    if (name == "boolean") return v.is_bool();
    if (name == "true") return v.is_bool() && v.as_bool();
    if (name == "false") return v.is_bool() && !v.as_bool();
    if (name == "integer") return v.is_int();
    if (name == "float") return v.is_float();
    if (name == "number") return v.is_number();
    if (name == "string") return v.is_string();
    if (name == "mapping") return v.is_dict();
    // jinja2's Undefined is iterable (empty), has len() and is callable (it raises when called).
    if (name == "iterable" || name == "sequence") {
        return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
    }
    if (name == "callable") return v.is_callable() || v.is_undefined();
    throw TemplateError("no test named '" + name + "'");
}

// Python's `is`: identity for containers; None, bools and small values compare by value.
bool same_as(const Value& v, const Value& o) {
    if (v.kind() != o.kind()) return false;
    if (v.is_list()) return &v.as_list() == &o.as_list();
    if (v.is_dict() || v.is_namespace()) return &v.as_dict() == &o.as_dict();
    if (v.is_callable()) return &v.as_callable() == &o.as_callable();
    return equals(v, o);
}

bool run_test(const std::string& name, const Value& v, CallArgs& call) {
    Args a(call, name);
    auto other = [&]() { return a.required(0, "other"); };
    bool result;
    if (name == "sameas") {
        result = same_as(v, other());
    } else if (name == "equalto" || name == "eq" || name == "==") {
        result = equals(v, other());
    } else if (name == "ne" || name == "!=") {
        result = !equals(v, other());
    } else if (name == "lt" || name == "<" || name == "le" || name == "<=" || name == "gt" || name == ">" ||
               name == "ge" || name == ">=") {
        int c = compare(v, other());
        char op = name[0] == 'l' || name[0] == '<' ? '<' : '>';
        bool or_equal = name == "le" || name == "<=" || name == "ge" || name == ">=";
        result = (op == '<' ? c < 0 : c > 0) || (or_equal && c == 0);
    } else if (name == "in") {
        result = contains(a.required(0, "seq"), v);
    } else if (name == "odd" || name == "even" || name == "divisibleby") {
        if (!v.is_number()) throw TemplateError("test '" + name + "' needs a number, not " + v.type_name());
        Value divisor = name == "divisibleby" ? a.required(0, "num") : Value::integer(2);
        Value r = binary_op("%", v, divisor);
        result = equals(r, Value::integer(name == "odd" ? 1 : 0));
    } else if (name == "lower" || name == "upper") {
        std::string s = to_str(v);
        // str.islower()/isupper(): at least one cased character, all of them in that case.
        bool cased = lower_string(s) != upper_string(s);
        result = cased && (name == "lower" ? lower_string(s) == s : upper_string(s) == s);
    } else {
        result = type_test(name, v);
    }
    a.finish();
    return result;
}

}  // namespace

bool is_known_filter(const std::string& name) {
    return filter_table().count(name) > 0;
}

bool is_known_test(const std::string& name) {
    return std::find(std::begin(kTests), std::end(kTests), name) != std::end(kTests);
}

Value apply_filter(const std::string& name, const Value& subject, CallArgs& args) {
    return run_filter(name, subject, args);
}

bool apply_test(const std::string& name, const Value& subject, CallArgs& args) {
    return run_test(name, subject, args);
}

}  // namespace surf::model::jinja
