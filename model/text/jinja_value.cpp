// Python semantics of the Jinja value model: str(), repr(), ==, ordering and json.dumps.
#include "model/text/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string_view>

namespace surf::model::jinja {

const Value* Dict::find(const std::string& key) const {
    for (const auto& [k, v] : entries) {
        if (k == key) return &v;
    }
    return nullptr;
}

void Dict::set(const std::string& key, Value value) {
    for (auto& [k, v] : entries) {
        if (k == key) {
            v = std::move(value);
            return;
        }
    }
    entries.emplace_back(key, std::move(value));
}

const char* Value::type_name() const {
    switch (kind_) {
        case Kind::kUndefined: return "Undefined";
        case Kind::kNone: return "NoneType";
        case Kind::kBool: return "bool";
        case Kind::kInt: return "int";
        case Kind::kFloat: return "float";
        case Kind::kString: return "str";
        case Kind::kList: return tuple_ ? "tuple" : "list";
        case Kind::kDict: return "dict";
        case Kind::kNamespace: return "Namespace";
        case Kind::kCallable: return "function";
    }
    return "?";
}

bool Value::truthy() const {
    switch (kind_) {
        case Kind::kUndefined:
        case Kind::kNone: return false;
        case Kind::kBool: return as_bool();
        case Kind::kInt: return as_int() != 0;
        case Kind::kFloat: return as_double() != 0.0;
        case Kind::kString: return !as_string().empty();
        case Kind::kList: return !as_list().empty();
        case Kind::kDict: return !as_dict().entries.empty();
        case Kind::kNamespace:
        case Kind::kCallable: return true;
    }
    return false;
}

// float.__repr__: the shortest digits that round-trip, fixed notation for 1e-4 <= |d| < 1e16,
// otherwise d.ddde±XX.
std::string python_float_repr(double d) {
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
    if (d == 0.0) return std::signbit(d) ? "-0.0" : "0.0";
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
    std::string sci(buf, res.ptr);  // "-1.2345e+02"
    bool negative = sci[0] == '-';
    if (negative) sci.erase(0, 1);
    size_t e_pos = sci.find('e');
    int exponent = std::stoi(sci.substr(e_pos + 1));
    std::string digits;
    for (char c : sci.substr(0, e_pos)) {
        if (c != '.') digits += c;
    }
    while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
    std::string out = negative ? "-" : "";
    if (exponent >= -4 && exponent < 16) {
        if (exponent < 0) {
            out.append("0.").append(size_t(-exponent - 1), '0').append(digits);
        } else if (size_t(exponent) + 1 >= digits.size()) {
            out.append(digits).append(size_t(exponent) + 1 - digits.size(), '0').append(".0");
        } else {
            out.append(digits, 0, size_t(exponent) + 1).append(".").append(digits, size_t(exponent) + 1);
        }
        return out;
    }
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp_buf[16];
    std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp_buf;
}

namespace {

std::string repr_string(const std::string& s) {
    bool has_single = s.find('\'') != std::string::npos;
    bool has_double = s.find('"') != std::string::npos;
    char quote = has_single && !has_double ? '"' : '\'';
    std::string out(1, quote);
    for (unsigned char c : s) {
        switch (c) {
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c == static_cast<unsigned char>(quote)) {
                    out += '\\';
                    out += char(c);
                } else if (c < 0x20 || c == 0x7f) {
                    char buf[8];
                    std::snprintf(buf, sizeof(buf), "\\x%02x", c);
                    out += buf;
                } else {
                    out += char(c);
                }
        }
    }
    return out + quote;
}

std::string repr_dict_body(const Dict& d) {
    std::string out = "{";
    for (size_t i = 0; i < d.entries.size(); ++i) {
        if (i) out += ", ";
        out += repr_string(d.entries[i].first) + ": " + to_repr(d.entries[i].second);
    }
    return out + "}";
}

}  // namespace

std::string to_repr(const Value& v) {
    switch (v.kind()) {
        case Value::Kind::kUndefined: return "Undefined";
        case Value::Kind::kString: return repr_string(v.as_string());
        case Value::Kind::kList: {
            const ValueList& items = v.as_list();
            std::string out = v.is_tuple() ? "(" : "[";
            for (size_t i = 0; i < items.size(); ++i) {
                if (i) out += ", ";
                out += to_repr(items[i]);
            }
            if (v.is_tuple() && items.size() == 1) out += ",";
            return out + (v.is_tuple() ? ")" : "]");
        }
        case Value::Kind::kDict: return repr_dict_body(v.as_dict());
        case Value::Kind::kNamespace: return "<Namespace " + repr_dict_body(v.as_dict()) + ">";
        case Value::Kind::kCallable: return "<function " + v.as_callable().name + ">";
        default: return to_str(v);
    }
}

std::string to_str(const Value& v) {
    switch (v.kind()) {
        case Value::Kind::kUndefined: return "";
        case Value::Kind::kNone: return "None";
        case Value::Kind::kBool: return v.as_bool() ? "True" : "False";
        case Value::Kind::kInt: return std::to_string(v.as_int());
        case Value::Kind::kFloat: return python_float_repr(v.as_double());
        case Value::Kind::kString: return v.as_string();
        default: return to_repr(v);
    }
}

bool equals(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
        return a.as_int() == b.as_int();
    }
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
        case Value::Kind::kUndefined:
        case Value::Kind::kNone: return true;
        case Value::Kind::kString: return a.as_string() == b.as_string();
        case Value::Kind::kList: {
            if (a.is_tuple() != b.is_tuple()) return false;
            const ValueList& x = a.as_list();
            const ValueList& y = b.as_list();
            if (x.size() != y.size()) return false;
            for (size_t i = 0; i < x.size(); ++i) {
                if (!equals(x[i], y[i])) return false;
            }
            return true;
        }
        case Value::Kind::kDict: {
            const Dict& x = a.as_dict();
            const Dict& y = b.as_dict();
            if (x.entries.size() != y.entries.size()) return false;
            for (const auto& [k, v] : x.entries) {
                const Value* other = y.find(k);
                if (!other || !equals(v, *other)) return false;
            }
            return true;
        }
        case Value::Kind::kNamespace: return &a.as_dict() == &b.as_dict();
        case Value::Kind::kCallable: return &a.as_callable() == &b.as_callable();
        default: return false;
    }
}

int compare(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) {
            double x = a.as_double(), y = b.as_double();
            return x < y ? -1 : (x > y ? 1 : 0);
        }
        int64_t x = a.as_int(), y = b.as_int();
        return x < y ? -1 : (x > y ? 1 : 0);
    }
    if (a.is_string() && b.is_string()) {
        int c = a.as_string().compare(b.as_string());  // UTF-8 byte order == code point order
        return c < 0 ? -1 : (c > 0 ? 1 : 0);
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
        const ValueList& x = a.as_list();
        const ValueList& y = b.as_list();
        for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
            if (!equals(x[i], y[i])) return compare(x[i], y[i]);
        }
        return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
    }
    throw TemplateError(std::string("cannot order values of type '") + a.type_name() + "' and '" +
                        b.type_name() + "'");
}

namespace {

void append_codepoint_escape(std::string& out, uint32_t cp) {
    char buf[16];
    if (cp >= 0x10000) {
        cp -= 0x10000;
        std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
    } else {
        std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
    }
    out += buf;
}

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
    out += '"';
    for (size_t i = 0; i < s.size(); ++i) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (c < 0x20) {
                    append_codepoint_escape(out, c);
                } else if (c >= 0x80 && ensure_ascii) {
                    int extra = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : 0;
                    uint32_t cp = c & (0x3f >> extra);
                    for (int k = 0; k < extra && i + 1 < s.size(); ++k) {
                        cp = (cp << 6) | (static_cast<unsigned char>(s[++i]) & 0x3f);
                    }
                    append_codepoint_escape(out, cp);
                } else {
                    out += char(c);
                }
        }
    }
    out += '"';
}

void json_value(std::string& out, const Value& v, const JsonOptions& o, int depth) {
    std::string item_sep = !o.item_separator.empty() ? o.item_separator : (o.indent >= 0 ? "," : ", ");
    std::string key_sep = !o.key_separator.empty() ? o.key_separator : ": ";
    auto newline = [&](int level) {
        if (o.indent >= 0) out += "\n" + std::string(size_t(o.indent * level), ' ');
    };
    switch (v.kind()) {
        case Value::Kind::kNone: out += "null"; return;
        case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; return;
        case Value::Kind::kInt: out += std::to_string(v.as_int()); return;
        case Value::Kind::kFloat: {
            double d = v.as_double();
            if (std::isnan(d))
                out += "NaN";
            else if (std::isinf(d))
                out += d < 0 ? "-Infinity" : "Infinity";
            else
                out += python_float_repr(d);
            return;
        }
        case Value::Kind::kString: json_string(out, v.as_string(), o.ensure_ascii); return;
        case Value::Kind::kList: {
            const ValueList& items = v.as_list();
            if (items.empty()) {
                out += "[]";
                return;
            }
            out += '[';
            for (size_t i = 0; i < items.size(); ++i) {
                if (i) out += item_sep;
                newline(depth + 1);
                json_value(out, items[i], o, depth + 1);
            }
            newline(depth);
            out += ']';
            return;
        }
        case Value::Kind::kDict: {
            std::vector<const std::pair<std::string, Value>*> entries;
            for (const auto& e : v.as_dict().entries) entries.push_back(&e);
            if (o.sort_keys) {
                std::stable_sort(entries.begin(), entries.end(),
                                 [](auto* a, auto* b) { return a->first < b->first; });
            }
            if (entries.empty()) {
                out += "{}";
                return;
            }
            out += '{';
            for (size_t i = 0; i < entries.size(); ++i) {
                if (i) out += item_sep;
                newline(depth + 1);
                json_string(out, entries[i]->first, o.ensure_ascii);
                out += key_sep;
                json_value(out, entries[i]->second, o, depth + 1);
            }
            newline(depth);
            out += '}';
            return;
        }
        default:
            throw TemplateError(std::string("Object of type ") + v.type_name() + " is not JSON serializable");
    }
}

}  // namespace

std::string to_json(const Value& v, const JsonOptions& options) {
    std::string out;
    json_value(out, v, options, 0);
    return out;
}

std::vector<std::string> utf8_chars(const std::string& s) {
    std::vector<std::string> chars;
    for (size_t i = 0; i < s.size();) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
        n = std::min(n, s.size() - i);
        chars.push_back(s.substr(i, n));
        i += n;
    }
    return chars;
}

size_t utf8_length(const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xc0) != 0x80;
    return n;
}

}  // namespace surf::model::jinja
