// JSON schema → Grammar compiler for structured outputs (docs/STRUCTURED_OUTPUT.md).
//
// Supported subset (anything else throws surf::Error(kUnsupported) naming the keyword and its JSON
// pointer): object (properties in schema order, required/optional, no extra properties are generated),
// string (minLength, maxLength, enum, const), integer and number (minimum, maximum, exclusiveMinimum,
// exclusiveMaximum; enforced exactly by the grammar), boolean, null, array (items, minItems, maxItems),
// enum/const of any JSON values, anyOf, oneOf (alternatives must be told apart: distinct types, or objects
// with a required const discriminator property), type arrays ("type": ["string", "null"]), $ref to
// "#/$defs/..." or "#/definitions/..." (non-recursive), and annotations (description, title, ...).
// Output is compact JSON: no whitespace, keys in schema order.
#pragma once

#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/structured/grammar.h"

namespace surf::model {

// A compiled schema is immutable and may be shared by any number of sequences and threads.
struct CompiledSchema {
    Grammar grammar;
    std::string schema_text;  // the schema as compiled (compact dump), for logs and cache keys

    // Memo filled by TokenConstraint (model/structured/token_constraint.cpp): allowed-token lists keyed by
    // vocabulary and matcher state, shared by every sequence decoding this schema. Thread-safe; bounded in
    // size.
    mutable std::shared_mutex memo_mutex;
    mutable std::unordered_map<std::string, std::shared_ptr<const std::vector<int32_t>>> token_memo;
};

// Compile a schema (key order matters: properties are generated in the order the schema lists them,
// hence ordered_json). `origin` names the schema in error messages (a file name, "request 12", ...).
std::shared_ptr<const CompiledSchema> compile_json_schema(const nlohmann::ordered_json& schema,
                                                          const std::string& origin = "schema");
// Parse the text (kFormat error if it is not JSON) and compile it.
std::shared_ptr<const CompiledSchema> compile_json_schema_text(std::string_view text,
                                                               const std::string& origin = "schema");
// Read a schema file (kIo / kFormat errors name the file) and compile it.
std::shared_ptr<const CompiledSchema> load_json_schema_file(const std::string& path);

// Whether a schema holds "$ref", "$defs" or "definitions" anywhere (for schemas that must be written inline,
// such as the parts a run splices into a larger schema).
bool schema_has_refs(const nlohmann::ordered_json& schema);

// Thread-safe cache: the same schema text compiles once per process (requests repeat their schema).
class SchemaCache {
public:
    std::shared_ptr<const CompiledSchema> get(std::string_view schema_text);
    size_t size() const;

private:
    mutable std::mutex mutex_;
    std::unordered_map<std::string, std::shared_ptr<const CompiledSchema>> cache_;
};

}  // namespace surf::model
