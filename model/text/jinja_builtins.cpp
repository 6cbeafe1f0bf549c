// Jinja builtins with jinja2 3.1 / Python semantics: operators, attribute and item access, string and
// dict methods, globals. Filters and tests are in jinja_filters.cpp.
//
// Methods: str.startswith/endswith/split/rsplit/strip/lstrip/rstrip/replace/upper/lower/title/
// capitalize/find/count/join/splitlines/isdigit/isalpha/isalnum/isspace/islower/isupper,
// dict.items/keys/values/get. Globals: range, namespace, dict, raise_exception, strftime_now.
// Case mapping covers ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic (jinja_text.cpp).
#include <algorithm>
#include <cmath>
#include <ctime>
#include <functional>
#include <optional>

#include "model/text/jinja_builtins.h"
#include "model/text/jinja_text.h"

namespace surf::model::jinja {

namespace {

constexpr int64_t kMaxSequence = 1 << 24;  // refuse range()/repetition beyond this: never hang on input

int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
}

int64_t floor_mod(int64_t a, int64_t b) {
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}

[[noreturn]] void unsupported_operands(const std::string& op, const Value& a, const Value& b) {
    throw TemplateError("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" +
                        b.type_name() + "'");
}

Value repeat(const Value& seq, int64_t n) {
    n = std::max<int64_t>(n, 0);
    if (seq.is_string()) {
        if (int64_t(seq.as_string().size()) * n > kMaxSequence)
            throw TemplateError("string repetition too large");
        std::string out;
        for (int64_t i = 0; i < n; ++i) out += seq.as_string();
        return Value::string(out);
    }
    if (int64_t(seq.as_list().size()) * n > kMaxSequence) throw TemplateError("list repetition too large");
    ValueList out;
    for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
    return Value::list(out, seq.is_tuple());
}

Value method(const Value& self, const std::string& name, std::function<Value(const Value&, Args&)> fn) {
    return Value::callable(name, [self, fn, name](CallArgs& call) {
        Args args(call, name);
        Value result = fn(self, args);
        args.finish();
        return result;
    });
}

// True when `affix` (a string, or a tuple of strings tried in order) passes `matches`.
template <typename Matches>
Value any_affix(const Value& affix, Matches matches) {
    if (affix.is_list()) {
        for (const Value& p : affix.as_list()) {
            if (matches(p)) return Value::boolean(true);
        }
        return Value::boolean(false);
    }
    return Value::boolean(matches(affix));
}

Value str_startswith(const Value& s, Args& a) {
    Value prefix = a.required(0, "prefix");
    return any_affix(prefix, [&](const Value& p) {
        if (!p.is_string()) throw TemplateError("startswith first arg must be str or a tuple of str");
        return s.as_string().compare(0, p.as_string().size(), p.as_string()) == 0;
    });
}

Value str_endswith(const Value& s, Args& a) {
    Value suffix = a.required(0, "suffix");
    return any_affix(suffix, [&](const Value& p) {
        if (!p.is_string()) throw TemplateError("endswith first arg must be str or a tuple of str");
        const std::string& x = s.as_string();
        const std::string& y = p.as_string();
        return x.size() >= y.size() && x.compare(x.size() - y.size(), y.size(), y) == 0;
    });
}

Value str_split(const Value& s, Args& a) {
    return split_string(s.as_string(), a.optional(0, "sep", Value::none()), a.integer(1, "maxsplit", -1),
                        false);
}

Value str_rsplit(const Value& s, Args& a) {
    return split_string(s.as_string(), a.optional(0, "sep", Value::none()), a.integer(1, "maxsplit", -1),
                        true);
}

Value str_replace(const Value& s, Args& a) {
    return Value::string(
        replace_string(s.as_string(), a.string(0, "old"), a.string(1, "new"), a.integer(2, "count", -1)));
}

// str.find: the index counts code points, as Python's does.
Value str_find(const Value& s, Args& a) {
    const std::string& str = s.as_string();
    size_t at = str.find(a.string(0, "sub"));
    return Value::integer(at == std::string::npos ? -1 : int64_t(utf8_length(str.substr(0, at))));
}

// str.count: non-overlapping occurrences; an empty `sub` matches between every code point.
Value str_count(const Value& s, Args& a) {
    const std::string& str = s.as_string();
    std::string sub = a.string(0, "sub");
    if (sub.empty()) return Value::integer(int64_t(utf8_length(str)) + 1);
    int64_t n = 0;
    for (size_t at = str.find(sub); at != std::string::npos; at = str.find(sub, at + sub.size())) ++n;
    return Value::integer(n);
}

Value str_join(const Value& s, Args& a) {
    std::string out;
    bool first = true;
    for (const Value& item : iterate(a.required(0, "iterable"))) {
        if (!item.is_string()) {
            throw TemplateError(std::string("sequence item: expected str instance, ") + item.type_name() +
                                " found");
        }
        if (!first) out += s.as_string();
        out += item.as_string();
        first = false;
    }
    return Value::string(out);
}

Value str_splitlines(const Value& s, Args&) {
    ValueList lines;
    for (std::string& line : split_lines(s.as_string())) lines.push_back(Value::string(std::move(line)));
    return Value::list(std::move(lines));
}

Value string_method(const Value& self, const std::string& name) {
    using Fn = std::function<Value(const Value&, Args&)>;
    auto str = [](const Value& v) -> const std::string& { return v.as_string(); };
    static const std::vector<std::pair<std::string, Fn>> kMethods = {
        {"startswith", str_startswith},
        {"endswith", str_endswith},
        {"split", str_split},
        {"rsplit", str_rsplit},
        {"strip",
         [str](const Value& s, Args& a) {
             return Value::string(strip_string(str(s), a.optional(0, "chars", Value::none()), true, true));
         }},
        {"lstrip",
         [str](const Value& s, Args& a) {
             return Value::string(strip_string(str(s), a.optional(0, "chars", Value::none()), true, false));
         }},
        {"rstrip",
         [str](const Value& s, Args& a) {
             return Value::string(strip_string(str(s), a.optional(0, "chars", Value::none()), false, true));
         }},
        {"replace", str_replace},
        {"upper", [str](const Value& s, Args&) { return Value::string(upper_string(str(s))); }},
        {"lower", [str](const Value& s, Args&) { return Value::string(lower_string(str(s))); }},
        {"title", [str](const Value& s, Args&) { return Value::string(title_string(str(s))); }},
        {"capitalize", [str](const Value& s, Args&) { return Value::string(capitalize_string(str(s))); }},
        {"find", str_find},
        {"count", str_count},
        {"join", str_join},
        {"splitlines", str_splitlines},
        {"isdigit", [str](const Value& s, Args&) { return Value::boolean(all_chars(str(s), ::isdigit)); }},
        {"isalpha", [str](const Value& s, Args&) { return Value::boolean(all_chars(str(s), ::isalpha)); }},
        {"isalnum", [str](const Value& s, Args&) { return Value::boolean(all_chars(str(s), ::isalnum)); }},
        {"isspace", [str](const Value& s, Args&) { return Value::boolean(all_chars(str(s), ::isspace)); }},
        {"islower",
         [str](const Value& s, Args&) {
             return Value::boolean(lower_string(str(s)) == str(s) && upper_string(str(s)) != str(s));
         }},
        {"isupper",
         [str](const Value& s, Args&) {
             return Value::boolean(upper_string(str(s)) == str(s) && lower_string(str(s)) != str(s));
         }},
    };
    for (const auto& [n, fn] : kMethods) {
        if (n == name) return method(self, name, fn);
    }
    return Value::undefined("'str object' has no attribute '" + name + "'");
}

Value dict_method(const Value& self, const std::string& name) {
    if (name == "items") {
        return method(self, name, [](const Value& d, Args&) {
            ValueList items;
            for (const auto& [k, v] : d.as_dict().entries)
                items.push_back(Value::list({Value::string(k), v}, true));
            return Value::list(std::move(items));
        });
    }
    if (name == "keys") {
        return method(self, name, [](const Value& d, Args&) {
            ValueList keys;
            for (const auto& entry : d.as_dict().entries) keys.push_back(Value::string(entry.first));
            return Value::list(std::move(keys));
        });
    }
    if (name == "values") {
        return method(self, name, [](const Value& d, Args&) {
            ValueList values;
            for (const auto& entry : d.as_dict().entries) values.push_back(entry.second);
            return Value::list(std::move(values));
        });
    }
    if (name == "get") {
        return method(self, name, [](const Value& d, Args& a) {
            Value key = a.required(0, "key");
            Value fallback = a.optional(1, "default", Value::none());
            if (!key.is_string()) return fallback;
            const Value* found = d.as_dict().find(key.as_string());
            return found ? *found : fallback;
        });
    }
    return Value::undefined();
}

bool is_mutating_method(const std::string& name) {
    static const char* kNames[] = {"append",     "extend",  "insert", "pop",     "remove", "clear",  "update",
                                   "setdefault", "popitem", "sort",   "reverse", "add",    "discard"};
    for (const char* n : kNames) {
        if (name == n) return true;
    }
    return false;
}

}  // namespace

[[noreturn]] void fail_undefined(const Value& v) {
    throw TemplateError(v.is_undefined() && !v.undefined_hint().empty() ? v.undefined_hint()
                                                                        : "use of an undefined value");
}

Value get_attribute(const Value& obj, const std::string& name) {
    switch (obj.kind()) {
        case Value::Kind::kUndefined: fail_undefined(obj);
        case Value::Kind::kString: return string_method(obj, name);
        case Value::Kind::kDict: {
            Value m = dict_method(obj, name);
            if (m.is_callable()) return m;
            const Value* found = obj.as_dict().find(name);
            if (found) return *found;
            if (is_mutating_method(name)) break;
            return Value::undefined("'dict object' has no attribute '" + name + "'");
        }
        case Value::Kind::kNamespace: {
            const Value* found = obj.as_dict().find(name);
            if (found) return *found;
            return Value::undefined("'Namespace' has no attribute '" + name + "'");
        }
        default: break;
    }
    if (is_mutating_method(name) && (obj.is_list() || obj.is_dict())) {
        throw TemplateError(std::string("access to attribute '") + name + "' of '" + obj.type_name() +
                            "' object is unsafe (templates cannot modify values)");
    }
    return Value::undefined(std::string("'") + obj.type_name() + " object' has no attribute '" + name + "'");
}

Value get_item(const Value& obj, const Value& key) {
    if (obj.is_undefined()) fail_undefined(obj);
    if (obj.is_dict() || obj.is_namespace()) {
        if (key.is_string()) {
            const Value* found = obj.as_dict().find(key.as_string());
            if (found) return *found;
            if (obj.is_dict()) {
                Value m = dict_method(obj, key.as_string());
                if (m.is_callable()) return m;
            }
        }
        return Value::undefined("'dict object' has no attribute " + to_repr(key));
    }
    if ((obj.is_list() || obj.is_string()) && key.is_number() && !key.is_float()) {
        int64_t i = key.as_int();
        if (obj.is_list()) {
            int64_t n = int64_t(obj.as_list().size());
            if (i < 0) i += n;
            if (i >= 0 && i < n) return obj.as_list()[size_t(i)];
        } else {
            std::vector<std::string> chars = utf8_chars(obj.as_string());
            int64_t n = int64_t(chars.size());
            if (i < 0) i += n;
            if (i >= 0 && i < n) return Value::string(chars[size_t(i)]);
        }
        return Value::undefined(std::string(obj.type_name()) + " object has no element " +
                                std::to_string(key.as_int()));
    }
    if (key.is_string()) return get_attribute(obj, key.as_string());
    return Value::undefined(std::string(obj.type_name()) + " object has no element " + to_repr(key));
}

Value get_slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
    if (obj.is_undefined()) fail_undefined(obj);
    auto bound = [](const Value& v, const char* what) -> std::optional<int64_t> {
        if (v.is_undefined() || v.is_none()) return std::nullopt;
        if (!v.is_number() || v.is_float())
            throw TemplateError(std::string("slice ") + what + " must be an integer");
        return v.as_int();
    };
    std::optional<int64_t> start = bound(start_v, "start"), stop = bound(stop_v, "stop"),
                           step_o = bound(step_v, "step");
    int64_t step = step_o.value_or(1);
    if (step == 0) throw TemplateError("slice step cannot be zero");
    std::vector<std::string> chars;
    size_t size = 0;
    if (obj.is_string()) {
        chars = utf8_chars(obj.as_string());
        size = chars.size();
    } else if (obj.is_list()) {
        size = obj.as_list().size();
    } else {
        // jinja2 compiles slices to a plain Python subscript, so unlike getitem this raises.
        throw TemplateError(std::string("'") + obj.type_name() + "' object is not subscriptable");
    }
    int64_t n = int64_t(size);
    // Python's PySlice_AdjustIndices.
    auto adjust = [&](std::optional<int64_t> v, int64_t dflt) {
        if (!v) return dflt;
        int64_t x = *v;
        if (x < 0) {
            x += n;
            if (x < 0) x = step < 0 ? -1 : 0;
        } else if (x >= n) {
            x = step < 0 ? n - 1 : n;
        }
        return x;
    };
    int64_t lo = adjust(start, step < 0 ? n - 1 : 0);
    int64_t hi = adjust(stop, step < 0 ? -1 : n);
    std::vector<size_t> picked;
    for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) picked.push_back(size_t(i));
    if (obj.is_string()) {
        std::string out;
        for (size_t i : picked) out += chars[i];
        return Value::string(out);
    }
    ValueList out;
    for (size_t i : picked) out.push_back(obj.as_list()[i]);
    return Value::list(std::move(out), obj.is_tuple());
}

ValueList iterate(const Value& v) {
    switch (v.kind()) {
        case Value::Kind::kUndefined: return {};
        case Value::Kind::kList: return v.as_list();
        case Value::Kind::kDict: {
            ValueList keys;
            for (const auto& entry : v.as_dict().entries) keys.push_back(Value::string(entry.first));
            return keys;
        }
        case Value::Kind::kString: {
            ValueList chars;
            for (std::string& c : utf8_chars(v.as_string())) chars.push_back(Value::string(std::move(c)));
            return chars;
        }
        default: throw TemplateError(std::string("'") + v.type_name() + "' object is not iterable");
    }
}

bool contains(const Value& container, const Value& item) {
    switch (container.kind()) {
        case Value::Kind::kUndefined: return false;
        case Value::Kind::kString:
            if (!item.is_string()) {
                throw TemplateError(std::string("'in <string>' requires string as left operand, not ") +
                                    item.type_name());
            }
            return container.as_string().find(item.as_string()) != std::string::npos;
        case Value::Kind::kList:
            return std::any_of(container.as_list().begin(), container.as_list().end(),
                               [&](const Value& v) { return equals(v, item); });
        case Value::Kind::kDict:
            if (item.is_list() && !item.is_tuple()) throw TemplateError("unhashable type: 'list'");
            if (item.is_dict()) throw TemplateError("unhashable type: 'dict'");
            return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
        default:
            throw TemplateError(std::string("argument of type '") + container.type_name() +
                                "' is not iterable");
    }
}

// a + b of strings or lists, refused past kMaxSequence like repetition.
static void check_joined_size(size_t a, size_t b) {
    if (int64_t(a) + int64_t(b) > kMaxSequence) throw TemplateError("concatenation too large");
}

// a + b: numbers add; strings, lists and tuples concatenate.
static Value add_values(const Value& a, const Value& b, bool numbers, bool floats) {
    if (numbers)
        return floats ? Value::number(a.as_double() + b.as_double())
                      : Value::integer(a.as_int() + b.as_int());
    if (a.is_string() && b.is_string()) {
        check_joined_size(a.as_string().size(), b.as_string().size());
        return Value::string(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
        check_joined_size(a.as_list().size(), b.as_list().size());
        ValueList out = a.as_list();
        out.insert(out.end(), b.as_list().begin(), b.as_list().end());
        return Value::list(std::move(out), a.is_tuple());
    }
    if (a.is_string() || b.is_string()) {
        throw TemplateError(std::string("can only concatenate str (not \"") +
                            (a.is_string() ? b : a).type_name() + "\") to str");
    }
    unsupported_operands("+", a, b);
}

// a * b: numbers multiply; a string or list times an integer repeats.
static Value multiply_values(const Value& a, const Value& b, bool numbers, bool floats) {
    if (numbers)
        return floats ? Value::number(a.as_double() * b.as_double())
                      : Value::integer(a.as_int() * b.as_int());
    if ((a.is_string() || a.is_list()) && b.is_number() && !b.is_float()) return repeat(a, b.as_int());
    if ((b.is_string() || b.is_list()) && a.is_number() && !a.is_float()) return repeat(b, a.as_int());
    unsupported_operands("*", a, b);
}

// x // y (floor_division) or x % y of floats, as CPython's float_divmod: fmod-based, so 1 // 0.1 == 9.0 and
// 1 % 0.1 == 0.0999...
static double float_divmod(double x, double y, bool floor_division) {
    double mod = std::fmod(x, y);
    double div = (x - mod) / y;
    if (mod != 0.0) {
        if ((y < 0) != (mod < 0)) {
            mod += y;
            div -= 1.0;
        }
    } else {
        mod = std::copysign(0.0, y);
    }
    double floordiv;
    if (div != 0.0) {
        floordiv = std::floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
    } else {
        floordiv = std::copysign(0.0, x / y);
    }
    return floor_division ? floordiv : mod;
}

// a ** b of numbers: an integer for integer operands and a non-negative exponent, else a float.
static Value power_values(const Value& a, const Value& b, bool floats) {
    if (a.as_double() == 0.0 && b.as_double() < 0) {
        throw TemplateError("0.0 cannot be raised to a negative power");
    }
    if (!floats && b.as_int() >= 0) {
        int64_t result = 1;
        for (int64_t i = 0; i < b.as_int() && i < 64; ++i) result *= a.as_int();
        return Value::integer(result);
    }
    return Value::number(std::pow(a.as_double(), b.as_double()));
}

Value binary_op(const std::string& op, const Value& a, const Value& b) {
    if (op == "~") {
        std::string left = to_str(a), right = to_str(b);
        check_joined_size(left.size(), right.size());
        return Value::string(left + right);
    }
    if (a.is_undefined()) fail_undefined(a);
    if (b.is_undefined()) fail_undefined(b);
    bool numbers = a.is_number() && b.is_number();
    bool floats = numbers && (a.is_float() || b.is_float());
    if (op == "+") return add_values(a, b, numbers, floats);
    if (op == "*") return multiply_values(a, b, numbers, floats);
    if (op == "%" && a.is_string()) return Value::string(percent_format(a.as_string(), b));
    if (!numbers) unsupported_operands(op, a, b);
    if (op == "-")
        return floats ? Value::number(a.as_double() - b.as_double())
                      : Value::integer(a.as_int() - b.as_int());
    if (op == "/") {
        if (b.as_double() == 0.0) throw TemplateError("division by zero");
        return Value::number(a.as_double() / b.as_double());
    }
    if (op == "//" || op == "%") {
        if (b.as_double() == 0.0)
            throw TemplateError(op == "//" ? "integer division or modulo by zero" : "modulo by zero");
        if (!floats)
            return Value::integer(op == "//" ? floor_div(a.as_int(), b.as_int())
                                             : floor_mod(a.as_int(), b.as_int()));
        return Value::number(float_divmod(a.as_double(), b.as_double(), op == "//"));
    }
    if (op == "**") return power_values(a, b, floats);
    unsupported_operands(op, a, b);
}

Value lookup_global(const std::string& name) {
    if (name == "range") {
        return Value::callable("range", [](CallArgs& call) {
            Args a(call, "range");
            int64_t start = 0, stop = 0, step = 1;
            if (call.positional.size() <= 1) {
                stop = a.integer(0, "stop", 0);
            } else {
                start = a.integer(0, "start", 0);
                stop = a.integer(1, "stop", 0);
                step = a.integer(2, "step", 1);
            }
            a.finish();
            if (step == 0) throw TemplateError("range() arg 3 must not be zero");
            ValueList out;
            for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
                if (int64_t(out.size()) >= kMaxSequence) throw TemplateError("range() too large");
                out.push_back(Value::integer(i));
            }
            return Value::list(std::move(out));
        });
    }
    if (name == "namespace" || name == "dict") {
        bool ns = name == "namespace";
        return Value::callable(name, [ns](CallArgs& call) {
            Dict d;
            for (const Value& v : call.positional) {
                if (!v.is_dict())
                    throw TemplateError("namespace()/dict() positional argument must be a dict");
                for (const auto& [k, x] : v.as_dict().entries) d.set(k, x);
            }
            for (const auto& [k, v] : call.keyword) d.set(k, v);
            return ns ? Value::name_space(std::move(d)) : Value::dict(std::move(d));
        });
    }
    if (name == "strftime_now") {
        // HF's strftime_now(format): the current local time, datetime.now().strftime(format).
        return Value::callable(name, [](CallArgs& call) {
            Args a(call, "strftime_now");
            std::string format = a.string(0, "format");
            a.finish();
            std::time_t now = std::time(nullptr);
            std::tm local{};
            localtime_r(&now, &local);
            char buf[512];
            size_t n = format.empty() ? 0 : std::strftime(buf, sizeof(buf), format.c_str(), &local);
            if (n == 0 && !format.empty()) throw TemplateError("strftime_now: format too long or invalid");
            return Value::string(std::string(buf, n));
        });
    }
    if (name == "raise_exception") {
        return Value::callable(name, [](CallArgs& call) -> Value {
            std::string message = call.positional.empty() ? "" : to_str(call.positional[0]);
            throw TemplateError("raise_exception: " + message);
        });
    }
    return Value::undefined("'" + name + "' is undefined");
}

}  // namespace surf::model::jinja
