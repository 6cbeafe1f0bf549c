// Value model of the Jinja interpreter (jinja.h): the Python objects a Hugging Face chat template sees
// (None, bool, int, float, str, list, tuple, dict, namespace, callables) plus Jinja's Undefined.
// Internal to model/jinja*.cpp; callers pass JSON through jinja.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace surf::model::jinja {

// A render-time error; `line` is filled in by the innermost expression that lets it pass (0 = not yet).
struct TemplateError : std::runtime_error {
    explicit TemplateError(const std::string& message, int line_ = 0)
        : std::runtime_error(message), line(line_) {}
    int line;
};

class Value;
using ValueList = std::vector<Value>;

// Insertion-ordered string-keyed map (Python dicts keep insertion order, and tojson/items show it).
struct Dict {
    std::vector<std::pair<std::string, Value>> entries;
    const Value* find(const std::string& key) const;
    void set(const std::string& key, Value value);
};

struct CallArgs {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> keyword;
};

struct Callable {
    std::string name;  // shown in error messages
    std::function<Value(CallArgs&)> fn;
};

class Value {
public:
    enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kCallable };

    Value() = default;  // Undefined
    static Value undefined(std::string hint = "") {
        Value v;
        v.data_ = std::move(hint);
        v.kind_ = Kind::kUndefined;
        return v;
    }
    static Value none() { return with(Kind::kNone, std::monostate{}); }
    static Value boolean(bool b) { return with(Kind::kBool, b); }
    static Value integer(int64_t i) { return with(Kind::kInt, i); }
    static Value number(double d) { return with(Kind::kFloat, d); }
    static Value string(std::string s) { return with(Kind::kString, std::move(s)); }
    static Value list(ValueList items, bool tuple = false) {
        Value v = with(Kind::kList, std::make_shared<ValueList>(std::move(items)));
        v.tuple_ = tuple;
        return v;
    }
    static Value dict(Dict d = {}) { return with(Kind::kDict, std::make_shared<Dict>(std::move(d))); }
    static Value name_space(Dict d = {}) {
        return with(Kind::kNamespace, std::make_shared<Dict>(std::move(d)));
    }
    static Value callable(std::string name, std::function<Value(CallArgs&)> fn) {
        return with(Kind::kCallable, std::make_shared<Callable>(Callable{std::move(name), std::move(fn)}));
    }

    Kind kind() const { return kind_; }
    bool is_undefined() const { return kind_ == Kind::kUndefined; }
    bool is_none() const { return kind_ == Kind::kNone; }
    bool is_bool() const { return kind_ == Kind::kBool; }
    bool is_int() const { return kind_ == Kind::kInt; }
    bool is_float() const { return kind_ == Kind::kFloat; }
    bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
    bool is_string() const { return kind_ == Kind::kString; }
    bool is_list() const { return kind_ == Kind::kList; }
    bool is_tuple() const { return kind_ == Kind::kList && tuple_; }
    bool is_dict() const { return kind_ == Kind::kDict; }
    bool is_namespace() const { return kind_ == Kind::kNamespace; }
    bool is_callable() const { return kind_ == Kind::kCallable; }

    bool as_bool() const { return std::get<bool>(data_); }
    int64_t as_int() const { return kind_ == Kind::kBool ? (as_bool() ? 1 : 0) : std::get<int64_t>(data_); }
    double as_double() const { return kind_ == Kind::kFloat ? std::get<double>(data_) : double(as_int()); }
    const std::string& as_string() const { return std::get<std::string>(data_); }
    const ValueList& as_list() const { return *std::get<std::shared_ptr<ValueList>>(data_); }
    const Dict& as_dict() const { return *std::get<std::shared_ptr<Dict>>(data_); }
    Dict& mutable_dict() const { return *std::get<std::shared_ptr<Dict>>(data_); }  // namespaces only
    const Callable& as_callable() const { return *std::get<std::shared_ptr<Callable>>(data_); }
    // Why this value is undefined ("'x' is undefined"), for the error raised when it is used.
    const std::string& undefined_hint() const {
        static const std::string kNoHint;
        const std::string* hint = std::get_if<std::string>(&data_);
        return hint ? *hint : kNoHint;
    }

    const char* type_name() const;  // Python's type name: "str", "int", "dict", ...
    bool truthy() const;

private:
    template <typename T>
    static Value with(Kind kind, T data) {
        Value v;
        v.kind_ = kind;
        v.data_ = std::move(data);
        return v;
    }

    Kind kind_ = Kind::kUndefined;
    bool tuple_ = false;
    std::variant<std::monostate, bool, int64_t, double, std::string, std::shared_ptr<ValueList>,
                 std::shared_ptr<Dict>, std::shared_ptr<Callable>>
        data_;
};

// Python semantics used by the interpreter.
std::string to_str(const Value& v);   // str(v); Undefined → "" (Jinja's default Undefined)
std::string to_repr(const Value& v);  // repr(v), as str() shows list items
std::string python_float_repr(double d);
bool equals(const Value& a, const Value& b);  // ==
int compare(const Value& a,
            const Value& b);  // <0, 0, >0 for <, ==, > on numbers/strings/lists; throws otherwise

struct JsonOptions {
    int indent = -1;             // < 0: single line
    std::string item_separator;  // empty: json.dumps default for the indent mode
    std::string key_separator;
    bool sort_keys = false;
    bool ensure_ascii = false;
};
// json.dumps(v, ...) as HF's tojson filter calls it.
std::string to_json(const Value& v, const JsonOptions& options);

// UTF-8 helpers: Python strings index by code point.
std::vector<std::string> utf8_chars(const std::string& s);
size_t utf8_length(const std::string& s);

}  // namespace surf::model::jinja
