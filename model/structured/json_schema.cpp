#include "model/structured/json_schema.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "base/error.h"

namespace surf::model {
namespace {

using Json = nlohmann::ordered_json;

// Integers are generated in int64's range; decimal numbers with at most 6 fraction digits and |x| <= 1e12
// (scaled by 10^6 they fit int64). Bounds outside these ranges are clamped to them.
constexpr int kNumberFracDigits = 6;
constexpr int64_t kNumberScale = 1000000;
constexpr int64_t kNumberLimitScaled = 1000000000000LL * kNumberScale;

const std::set<std::string> kAnnotations = {
    "description", "title",    "default",   "examples", "$comment",    "$schema",      "$id",
    "deprecated",  "readOnly", "writeOnly", "$defs",    "definitions", "discriminator"};
const std::set<std::string> kStringKeys = {"minLength", "maxLength"};
const std::set<std::string> kNumberKeys = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
const std::set<std::string> kObjectKeys = {"properties", "required", "additionalProperties"};
const std::set<std::string> kArrayKeys = {"items", "minItems", "maxItems"};
const std::set<std::string> kGeneralKeys = {"type", "enum", "const", "anyOf", "oneOf", "$ref"};

std::string pointer_escape(const std::string& token) {
    std::string out;
    for (char ch : token) {
        if (ch == '~')
            out += "~0";
        else if (ch == '/')
            out += "~1";
        else
            out += ch;
    }
    return out;
}

// Type classes used to tell oneOf alternatives apart.
enum TypeClass : uint32_t {
    kClsString = 1,
    kClsNumber = 2,
    kClsObject = 4,
    kClsArray = 8,
    kClsBool = 16,
    kClsNull = 32
};

uint32_t class_of_value(const Json& v) {
    if (v.is_string()) return kClsString;
    if (v.is_number()) return kClsNumber;
    if (v.is_object()) return kClsObject;
    if (v.is_array()) return kClsArray;
    if (v.is_boolean()) return kClsBool;
    return kClsNull;
}

class Compiler {
public:
    Compiler(const Json& root, std::string origin) : root_(root), origin_(std::move(origin)) {}

    Grammar compile_root() {
        grammar_.root = compile(root_, "");
        grammar_.max_depth = depth_of(grammar_.root);
        if (grammar_.max_depth > kMaxGrammarDepth) {
            fail(ErrorKind::kUnsupported, "",
                 "nesting is " + std::to_string(grammar_.max_depth) + " levels deep; at most " +
                     std::to_string(kMaxGrammarDepth) + " are supported");
        }
        return std::move(grammar_);
    }

private:
    [[noreturn]] void fail(ErrorKind kind, const std::string& pointer, const std::string& what) const {
        throw Error(kind, origin_ + ": JSON schema at " + (pointer.empty() ? "/" : pointer) + ": " + what);
    }
    [[noreturn]] void unsupported(const std::string& pointer, const std::string& keyword,
                                  const std::string& why = "") const {
        throw Error(ErrorKind::kUnsupported,
                    origin_ + ": unsupported JSON-schema keyword \"" + keyword + "\" at " + pointer + "/" +
                        pointer_escape(keyword) + (why.empty() ? "" : " (" + why + ")") +
                        "; structured outputs support the subset in docs/STRUCTURED_OUTPUT.md");
    }

    uint32_t add_node(GrammarNode node) {
        grammar_.nodes.push_back(std::move(node));
        return static_cast<uint32_t>(grammar_.nodes.size() - 1);
    }

    uint32_t add_literal(const std::vector<Json>& values) {
        std::vector<std::string> bytes;
        for (const Json& v : values) bytes.push_back(v.dump());
        uint32_t node = grammar_.add_literal_node(bytes);
        literal_values_[node] = values;
        return node;
    }

    uint64_t read_count(const Json& s, const char* key, const std::string& ptr) const {
        const Json& v = s[key];
        if (!v.is_number_integer() || v.get<int64_t>() < 0) {
            fail(ErrorKind::kInvalidArgument, ptr + "/" + key,
                 "must be a non-negative integer, got " + v.dump());
        }
        return v.get<uint64_t>();
    }

    uint32_t compile(const Json& s, const std::string& ptr) {
        if (s.is_boolean()) {
            fail(ErrorKind::kUnsupported, ptr,
                 std::string("boolean schema '") + (s.get<bool>() ? "true" : "false") +
                     "' is not supported (give a typed schema)");
        }
        if (!s.is_object())
            fail(ErrorKind::kInvalidArgument, ptr, "a schema must be a JSON object, got " + s.dump());
        for (auto it = s.begin(); it != s.end(); ++it) {
            const std::string& k = it.key();
            if (kAnnotations.count(k) || kGeneralKeys.count(k) || kStringKeys.count(k) ||
                kNumberKeys.count(k) || kObjectKeys.count(k) || kArrayKeys.count(k)) {
                continue;
            }
            unsupported(ptr, k);
        }
        if (s.contains("$ref")) {
            only_annotations_besides(s, ptr, "$ref");
            return compile_ref(s["$ref"], ptr + "/$ref");
        }
        if (s.contains("anyOf") || s.contains("oneOf")) {
            const char* key = s.contains("anyOf") ? "anyOf" : "oneOf";
            only_annotations_besides(s, ptr, key);
            return compile_alternatives(s[key], ptr + "/" + key, std::string(key) == "oneOf");
        }
        if (s.contains("enum") || s.contains("const")) return compile_enum(s, ptr);

        std::vector<std::string> types = schema_types(s, ptr);
        // Every constraint keyword must apply to one of the types: a misplaced keyword is a schema bug.
        for (auto it = s.begin(); it != s.end(); ++it) {
            const std::string& k = it.key();
            auto has = [&](const char* t) { return std::find(types.begin(), types.end(), t) != types.end(); };
            bool ok = kAnnotations.count(k) || k == "type" || (kStringKeys.count(k) && has("string")) ||
                      (kNumberKeys.count(k) && (has("integer") || has("number"))) ||
                      (kObjectKeys.count(k) && has("object")) || (kArrayKeys.count(k) && has("array"));
            if (!ok) unsupported(ptr, k, "does not apply to type " + s.value("type", Json()).dump());
        }
        if (types.size() == 1) return compile_typed(s, types[0], ptr);
        GrammarNode any;
        any.kind = GrammarNodeKind::kAnyOf;
        for (const std::string& t : types) any.alternatives.push_back(compile_typed(s, t, ptr));
        return add_node(std::move(any));
    }

    // `main` ($ref, anyOf, oneOf) stands alone: any other keyword but an annotation is refused.
    void only_annotations_besides(const Json& s, const std::string& ptr, const char* main) const {
        for (auto it = s.begin(); it != s.end(); ++it) {
            if (it.key() != main && !kAnnotations.count(it.key())) {
                unsupported(ptr, it.key(), std::string("not supported next to \"") + main + "\"");
            }
        }
    }

    // The schema's types: its "type" (a name or a non-empty array of names), else inferred from the
    // keywords present (common in hand-written schemas).
    std::vector<std::string> schema_types(const Json& s, const std::string& ptr) const {
        std::vector<std::string> types;
        if (s.contains("type")) {
            const Json& t = s["type"];
            if (t.is_string()) {
                types.push_back(t.get<std::string>());
            } else if (t.is_array() && !t.empty()) {
                for (const Json& e : t) {
                    if (!e.is_string())
                        fail(ErrorKind::kInvalidArgument, ptr + "/type", "type names must be strings");
                    types.push_back(e.get<std::string>());
                }
            } else {
                fail(ErrorKind::kInvalidArgument, ptr + "/type", "must be a string or a non-empty array");
            }
        } else {
            for (auto it = s.begin(); it != s.end(); ++it) {
                if (kObjectKeys.count(it.key())) types = {"object"};
                if (kArrayKeys.count(it.key())) types = {"array"};
                if (kStringKeys.count(it.key())) types = {"string"};
                if (kNumberKeys.count(it.key())) types = {"number"};
            }
            if (types.empty()) {
                fail(ErrorKind::kUnsupported, ptr,
                     "schema has no \"type\" (values of any type are not supported)");
            }
        }
        for (const std::string& t : types) {
            if (t != "string" && t != "integer" && t != "number" && t != "object" && t != "array" &&
                t != "boolean" && t != "null") {
                fail(ErrorKind::kInvalidArgument, ptr + "/type", "unknown type \"" + t + "\"");
            }
        }
        return types;
    }

    uint32_t compile_ref(const Json& ref, const std::string& ptr) {
        if (!ref.is_string()) fail(ErrorKind::kInvalidArgument, ptr, "$ref must be a string");
        std::string r = ref.get<std::string>();
        if (r.empty() || r[0] != '#')
            unsupported(ptr.substr(0, ptr.size() - 5), "$ref",
                        "only local refs \"#/...\", got \"" + r + "\"");
        if (auto it = ref_nodes_.find(r); it != ref_nodes_.end()) return it->second;
        if (active_refs_.count(r)) {
            unsupported(ptr.substr(0, ptr.size() - 5), "$ref",
                        "recursive reference \"" + r + "\": recursive schemas are not supported");
        }
        const Json* target = nullptr;
        try {
            target = &root_.at(Json::json_pointer(r.substr(1)));
        } catch (const std::exception&) {
            fail(ErrorKind::kInvalidArgument, ptr, "$ref \"" + r + "\" does not resolve");
        }
        active_refs_.insert(r);
        uint32_t node = compile(*target, r.substr(1));
        active_refs_.erase(r);
        ref_nodes_[r] = node;
        return node;
    }

    uint32_t compile_alternatives(const Json& alts, const std::string& ptr, bool one_of) {
        if (!alts.is_array() || alts.empty())
            fail(ErrorKind::kInvalidArgument, ptr, "must be a non-empty array");
        GrammarNode any;
        any.kind = GrammarNodeKind::kAnyOf;
        for (size_t i = 0; i < alts.size(); ++i) {
            any.alternatives.push_back(compile(alts[i], ptr + "/" + std::to_string(i)));
        }
        if (one_of) {
            // oneOf means exactly one alternative matches; we generate any alternative, so they must be
            // disjoint.
            for (size_t i = 0; i < any.alternatives.size(); ++i) {
                for (size_t j = i + 1; j < any.alternatives.size(); ++j) {
                    if (!disjoint(any.alternatives[i], any.alternatives[j])) {
                        unsupported(
                            ptr.substr(0, ptr.size() - 6), "oneOf",
                            "alternatives " + std::to_string(i) + " and " + std::to_string(j) +
                                " are not told apart by type or by a required const property; use anyOf "
                                "if either may match");
                    }
                }
            }
        }
        if (any.alternatives.size() == 1) return any.alternatives[0];
        return add_node(std::move(any));
    }

    uint32_t classes(uint32_t node) const {
        const GrammarNode& n = grammar_.nodes[node];
        switch (n.kind) {
            case GrammarNodeKind::kString: return kClsString;
            case GrammarNodeKind::kNumber: return kClsNumber;
            case GrammarNodeKind::kObject: return kClsObject;
            case GrammarNodeKind::kArray: return kClsArray;
            case GrammarNodeKind::kLiteral: {
                uint32_t c = 0;
                for (const Json& v : literal_values_.at(node)) c |= class_of_value(v);
                return c;
            }
            case GrammarNodeKind::kAnyOf: {
                uint32_t c = 0;
                for (uint32_t a : n.alternatives) c |= classes(a);
                return c;
            }
        }
        return 0;
    }

    bool disjoint(uint32_t a, uint32_t b) const {
        uint32_t ca = classes(a), cb = classes(b);
        if ((ca & cb) == 0) return true;
        const GrammarNode& na = grammar_.nodes[a];
        const GrammarNode& nb = grammar_.nodes[b];
        if (na.kind == GrammarNodeKind::kLiteral && nb.kind == GrammarNodeKind::kLiteral) {
            for (const Json& x : literal_values_.at(a)) {
                for (const Json& y : literal_values_.at(b)) {
                    if (x == y) return false;
                }
            }
            return true;
        }
        if (na.kind == GrammarNodeKind::kObject && nb.kind == GrammarNodeKind::kObject) {
            for (const ObjectProperty& pa : na.properties) {
                for (const ObjectProperty& pb : nb.properties) {
                    if (pa.key == pb.key && pa.required && pb.required &&
                        grammar_.nodes[pa.value].kind == GrammarNodeKind::kLiteral &&
                        grammar_.nodes[pb.value].kind == GrammarNodeKind::kLiteral &&
                        disjoint(pa.value, pb.value)) {
                        return true;
                    }
                }
            }
        }
        return false;
    }

    uint32_t compile_enum(const Json& s, const std::string& ptr) {
        const char* key = s.contains("enum") ? "enum" : "const";
        for (auto it = s.begin(); it != s.end(); ++it) {
            if (it.key() != key && it.key() != "type" && !kAnnotations.count(it.key())) {
                unsupported(ptr, it.key(), std::string("not supported next to \"") + key + "\"");
            }
        }
        std::vector<Json> values;
        if (std::string(key) == "const") {
            values.push_back(s["const"]);
        } else {
            if (!s["enum"].is_array() || s["enum"].empty()) {
                fail(ErrorKind::kInvalidArgument, ptr + "/enum", "must be a non-empty array");
            }
            for (const Json& v : s["enum"]) values.push_back(v);
        }
        if (s.contains("type")) {
            // Keep only the values of the declared type(s).
            std::vector<std::string> types;
            if (s["type"].is_string())
                types.push_back(s["type"].get<std::string>());
            else if (s["type"].is_array()) {
                for (const Json& t : s["type"]) {
                    if (t.is_string()) types.push_back(t.get<std::string>());
                }
            }
            std::vector<Json> kept;
            for (const Json& v : values) {
                for (const std::string& t : types) {
                    bool match = (t == "string" && v.is_string()) ||
                                 (t == "integer" && v.is_number_integer()) ||
                                 (t == "number" && v.is_number()) || (t == "boolean" && v.is_boolean()) ||
                                 (t == "null" && v.is_null()) || (t == "object" && v.is_object()) ||
                                 (t == "array" && v.is_array());
                    if (match) {
                        kept.push_back(v);
                        break;
                    }
                }
            }
            if (kept.empty())
                fail(ErrorKind::kInvalidArgument, ptr + "/" + key, "no value has the declared type");
            values = std::move(kept);
        }
        return add_literal(values);
    }

    uint32_t compile_typed(const Json& s, const std::string& type, const std::string& ptr) {
        if (type == "boolean") return add_literal({Json(true), Json(false)});
        if (type == "null") return add_literal({Json(nullptr)});
        if (type == "string") return compile_string(s, ptr);
        if (type == "integer" || type == "number") return compile_number(s, type == "integer", ptr);
        if (type == "array") return compile_array(s, ptr);
        return compile_object(s, ptr);
    }

    uint32_t compile_string(const Json& s, const std::string& ptr) {
        GrammarNode n;
        n.kind = GrammarNodeKind::kString;
        if (s.contains("minLength"))
            n.min_length =
                static_cast<uint32_t>(std::min<uint64_t>(read_count(s, "minLength", ptr), UINT32_MAX - 1));
        if (s.contains("maxLength"))
            n.max_length =
                static_cast<uint32_t>(std::min<uint64_t>(read_count(s, "maxLength", ptr), UINT32_MAX - 1));
        if (n.min_length > n.max_length) fail(ErrorKind::kInvalidArgument, ptr, "minLength > maxLength");
        return add_node(std::move(n));
    }

    // A bound scaled to 10^-frac units, rounded inward (up for lower bounds, down for upper ones).
    int64_t scaled_bound(const Json& v, const std::string& where, int64_t scale, bool lower, bool exclusive) {
        if (!v.is_number()) fail(ErrorKind::kInvalidArgument, where, "must be a number, got " + v.dump());
        long double x;
        bool exact;
        if (v.is_number_integer()) {
            x = static_cast<long double>(v.is_number_unsigned()
                                             ? static_cast<long double>(v.get<uint64_t>())
                                             : static_cast<long double>(v.get<int64_t>())) *
                scale;
            exact = true;
        } else {
            x = static_cast<long double>(v.get<double>()) * scale;
            // 0.1 * 10^6 is 100000.00000000001 in binary: snap values that are decimal in the schema text.
            long double r = std::nearbyint(x);
            exact = std::fabs(x - r) <= 1e-6L * std::max<long double>(1.0L, std::fabs(r));
            if (exact) x = r;
        }
        long double limit = 9.2e18L;
        x = std::max(-limit, std::min(limit, x));
        long double b = exact ? x : (lower ? std::ceil(x) : std::floor(x));
        if (exact && exclusive) b += lower ? 1 : -1;
        return static_cast<int64_t>(b);
    }

    uint32_t compile_number(const Json& s, bool integer, const std::string& ptr) {
        GrammarNode n;
        n.kind = GrammarNodeKind::kNumber;
        int64_t scale = integer ? 1 : kNumberScale;
        n.frac_digits = integer ? 0 : kNumberFracDigits;
        n.max_int_digits = integer ? 19 : 13;
        n.min_scaled = integer ? INT64_MIN + 1 : -kNumberLimitScaled;
        n.max_scaled = integer ? INT64_MAX : kNumberLimitScaled;
        int64_t default_min = n.min_scaled, default_max = n.max_scaled;
        for (const char* key : {"minimum", "exclusiveMinimum"}) {
            if (!s.contains(key)) continue;
            int64_t b = scaled_bound(s[key], ptr + "/" + key, scale, true, key[0] == 'e');
            n.min_scaled = std::max(n.min_scaled, b);
        }
        for (const char* key : {"maximum", "exclusiveMaximum"}) {
            if (!s.contains(key)) continue;
            int64_t b = scaled_bound(s[key], ptr + "/" + key, scale, false, key[0] == 'e');
            n.max_scaled = std::min(n.max_scaled, b);
        }
        if (n.min_scaled > n.max_scaled || n.min_scaled > default_max || n.max_scaled < default_min) {
            fail(ErrorKind::kInvalidArgument, ptr,
                 std::string("no ") + (integer ? "integer" : "number") +
                     " satisfies the bounds (numbers are generated with at most 6 fraction digits, |x| <= "
                     "1e12)");
        }
        return add_node(std::move(n));
    }

    uint32_t compile_array(const Json& s, const std::string& ptr) {
        GrammarNode n;
        n.kind = GrammarNodeKind::kArray;
        if (!s.contains("items")) fail(ErrorKind::kUnsupported, ptr, "an array needs \"items\" (a schema)");
        if (s["items"].is_array()) unsupported(ptr, "items", "tuple form (an array of schemas)");
        if (s.contains("minItems"))
            n.min_items =
                static_cast<uint32_t>(std::min<uint64_t>(read_count(s, "minItems", ptr), UINT32_MAX - 1));
        if (s.contains("maxItems"))
            n.max_items =
                static_cast<uint32_t>(std::min<uint64_t>(read_count(s, "maxItems", ptr), UINT32_MAX - 1));
        if (n.min_items > n.max_items) fail(ErrorKind::kInvalidArgument, ptr, "minItems > maxItems");
        n.item = compile(s["items"], ptr + "/items");
        return add_node(std::move(n));
    }

    uint32_t compile_object(const Json& s, const std::string& ptr) {
        GrammarNode n;
        n.kind = GrammarNodeKind::kObject;
        std::set<std::string> required;
        if (s.contains("required")) {
            if (!s["required"].is_array())
                fail(ErrorKind::kInvalidArgument, ptr + "/required", "must be an array");
            for (const Json& r : s["required"]) {
                if (!r.is_string())
                    fail(ErrorKind::kInvalidArgument, ptr + "/required", "names must be strings");
                required.insert(r.get<std::string>());
            }
        }
        if (s.contains("additionalProperties") && !s["additionalProperties"].is_boolean() &&
            !s["additionalProperties"].is_object()) {
            fail(ErrorKind::kInvalidArgument, ptr + "/additionalProperties", "must be a boolean or a schema");
        }
        // additionalProperties is accepted in any form: only the listed properties are ever generated.
        if (s.contains("properties")) {
            const Json& props = s["properties"];
            if (!props.is_object())
                fail(ErrorKind::kInvalidArgument, ptr + "/properties", "must be an object");
            for (auto it = props.begin(); it != props.end(); ++it) {
                ObjectProperty p;
                p.key = it.key();
                p.required = required.erase(it.key()) > 0;
                p.value = compile(it.value(), ptr + "/properties/" + pointer_escape(it.key()));
                n.properties.push_back(std::move(p));
            }
        }
        if (!required.empty()) {
            fail(ErrorKind::kInvalidArgument, ptr + "/required",
                 "required property \"" + *required.begin() + "\" is not in \"properties\"");
        }
        size_t count = n.properties.size();
        n.key_literal.assign(count + 1, UINT32_MAX);
        n.close_ok.assign(count + 1, 1);
        for (size_t i = count; i-- > 0;) n.close_ok[i] = n.close_ok[i + 1] && !n.properties[i].required;
        for (size_t i = 0; i < count; ++i) {
            // After i properties, the next key is any later one up to and including the first required one.
            std::vector<std::string> keys;
            std::vector<int32_t> ids;
            for (size_t j = i; j < count; ++j) {
                keys.push_back(Json(n.properties[j].key).dump() + ":");
                ids.push_back(static_cast<int32_t>(j));
                if (n.properties[j].required) break;
            }
            size_t first = grammar_.lit_nodes.size();
            n.key_literal[i] = grammar_.add_literal_node(keys);
            for (size_t t = first; t < grammar_.lit_nodes.size(); ++t) {
                int32_t& term = grammar_.lit_nodes[t].terminal;
                if (term >= 0) term = ids[term];
            }
        }
        return add_node(std::move(n));
    }

    uint32_t depth_of(uint32_t node) const {
        const GrammarNode& n = grammar_.nodes[node];
        switch (n.kind) {
            case GrammarNodeKind::kObject: {
                uint32_t d = 1;
                for (const ObjectProperty& p : n.properties) d = std::max(d, depth_of(p.value));
                return 1 + d;
            }
            case GrammarNodeKind::kArray: return 1 + depth_of(n.item);
            case GrammarNodeKind::kAnyOf: {
                uint32_t d = 0;
                for (uint32_t a : n.alternatives) d = std::max(d, depth_of(a));
                return d;
            }
            default: return 1;
        }
    }

    const Json& root_;
    std::string origin_;
    Grammar grammar_;
    std::unordered_map<std::string, uint32_t> ref_nodes_;
    std::set<std::string> active_refs_;
    std::unordered_map<uint32_t, std::vector<Json>> literal_values_;
};

}  // namespace

std::shared_ptr<const CompiledSchema> compile_json_schema(const nlohmann::ordered_json& schema,
                                                          const std::string& origin) {
    auto out = std::make_shared<CompiledSchema>();
    out->grammar = Compiler(schema, origin).compile_root();
    out->schema_text = schema.dump();
    return out;
}

std::shared_ptr<const CompiledSchema> compile_json_schema_text(std::string_view text,
                                                               const std::string& origin) {
    Json schema;
    try {
        schema = Json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw Error(ErrorKind::kFormat, origin + ": JSON schema is not valid JSON: " + e.what());
    }
    return compile_json_schema(schema, origin);
}

std::shared_ptr<const CompiledSchema> load_json_schema_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(ErrorKind::kIo, "cannot open JSON schema file " + path);
    std::stringstream buffer;
    buffer << in.rdbuf();
    return compile_json_schema_text(buffer.str(), path);
}

std::shared_ptr<const CompiledSchema> SchemaCache::get(std::string_view schema_text) {
    std::string key(schema_text);
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    }
    auto compiled = compile_json_schema_text(schema_text);  // outside the lock: compiling may take a while
    std::lock_guard<std::mutex> lock(mutex_);
    return cache_.emplace(std::move(key), std::move(compiled)).first->second;
}

size_t SchemaCache::size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return cache_.size();
}

bool schema_has_refs(const nlohmann::ordered_json& node) {
    if (node.is_object()) {
        for (const auto& [key, value] : node.items())
            if (key == "$ref" || key == "$defs" || key == "definitions" || schema_has_refs(value))
                return true;
    } else if (node.is_array()) {
        for (const auto& value : node)
            if (schema_has_refs(value)) return true;
    }
    return false;
}

}  // namespace surf::model
