// Parsing and checking of /v1/chat/completions bodies (openai_api.h): fields, messages with their images,
// sampling, streaming and response-format options. Every refusal is an ApiError naming the field.
#include <cinttypes>
#include <sstream>

#include "apps/serve/openai_api.h"
#include "base/error.h"
#include "base/utf8.h"

namespace surf::serve {

namespace {

using json = nlohmann::ordered_json;

double number_field(const json& body, const char* name, double lo, double hi) {
    const json& v = body[name];
    if (!v.is_number()) throw bad_request(name, "expected a number");
    const double x = v.get<double>();
    if (!(x >= lo && x <= hi)) {
        std::ostringstream os;
        os << "must be in [" << lo << ", " << hi << "], got " << x;
        throw bad_request(name, os.str());
    }
    return x;
}

int64_t int_field(const json& body, const char* name, int64_t lo, int64_t hi) {
    const json& v = body[name];
    if (!v.is_number_integer() && !v.is_number_unsigned()) throw bad_request(name, "expected an integer");
    const int64_t x = v.is_number_unsigned()
                          ? static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), INT64_MAX))
                          : v.get<int64_t>();
    if (x < lo || x > hi) {
        throw bad_request(name, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                                    std::to_string(x));
    }
    return x;
}

// Content: a string, null (assistant), or a list of {type: text|image_url} parts.
model::ChatMessage parse_message(const json& m, size_t index, const ServiceOptions& options,
                                 std::vector<std::shared_ptr<const model::Image>>* images) {
    const std::string where = "messages[" + std::to_string(index) + "]";
    if (!m.is_object()) throw bad_request(where, "expected an object");
    if (!m.contains("role") || !m["role"].is_string())
        throw bad_request(where + ".role", "expected a string");
    model::ChatMessage out;
    out.role = m["role"].get<std::string>();
    if (out.role != "system" && out.role != "user" && out.role != "assistant" && out.role != "developer") {
        throw bad_request(where + ".role",
                          "\"" + out.role + "\" is not supported (system, developer, user, assistant)");
    }
    if (out.role == "developer") out.role = "system";  // OpenAI's newer name for the system role
    const json content = m.value("content", json());
    if (content.is_null()) {
        if (out.role != "assistant") throw bad_request(where + ".content", "required");
        out.content = std::string();
    } else if (content.is_string()) {
        out.content = content.get<std::string>();
    } else if (content.is_array()) {
        std::vector<model::ChatPart> parts;
        for (size_t i = 0; i < content.size(); ++i) {
            const json& p = content[i];
            const std::string pw = where + ".content[" + std::to_string(i) + "]";
            if (!p.is_object() || !p.contains("type") || !p["type"].is_string()) {
                throw bad_request(pw, "expected an object with a string \"type\"");
            }
            const std::string type = p["type"].get<std::string>();
            if (type == "text") {
                if (!p.contains("text") || !p["text"].is_string())
                    throw bad_request(pw + ".text", "expected a string");
                parts.push_back({model::ChatPartKind::kText, p["text"].get<std::string>()});
            } else if (type == "image_url") {
                const json iu = p.value("image_url", json());
                std::string url;
                if (iu.is_string())
                    url = iu.get<std::string>();
                else if (iu.is_object() && iu.contains("url") && iu["url"].is_string())
                    url = iu["url"].get<std::string>();
                else
                    throw bad_request(pw + ".image_url", "expected {\"url\": \"data:image/...;base64,...\"}");
                if (static_cast<int>(images->size()) >= options.max_images) {
                    throw bad_request(
                        pw, "more than " + std::to_string(options.max_images) + " images in one request",
                        "too_many_images");
                }
                // Each image may use what the request's pixel budget has left, so decoding never exceeds it.
                int64_t used = 0;
                for (const auto& im : *images) used += int64_t{im->width} * im->height;
                const int64_t allowed = std::min(options.max_image_pixels, options.max_request_pixels - used);
                images->push_back(
                    decode_data_url(url, options.max_image_bytes, allowed, pw + ".image_url.url"));
                parts.push_back({model::ChatPartKind::kImage, ""});
            } else {
                throw bad_request(pw + ".type", "\"" + type + "\" is not supported (text, image_url)");
            }
        }
        out.content = std::move(parts);
    } else {
        throw bad_request(where + ".content", "expected a string or a list of parts");
    }
    return out;
}

}  // namespace

std::optional<std::string> base64_decode(const std::string& text) {
    auto value = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        if (c == '+' || c == '-') return 62;
        if (c == '/' || c == '_') return 63;
        return -1;
    };
    size_t n = text.size();
    while (n > 0 && text[n - 1] == '=') --n;
    if (text.size() - n > 2 || n % 4 == 1) return std::nullopt;
    std::string out;
    out.reserve(n * 3 / 4);
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; ++i) {
        const int v = value(text[i]);
        if (v < 0) return std::nullopt;
        acc = (acc << 6) | static_cast<uint32_t>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out.push_back(static_cast<char>((acc >> bits) & 0xFF));
        }
    }
    return out;
}

std::shared_ptr<const model::Image> decode_data_url(const std::string& url, size_t max_bytes,
                                                    int64_t max_pixels, const std::string& param) {
    if (url.rfind("data:", 0) != 0) {
        throw bad_request(
            param, "only data URLs (data:image/png;base64,...) are accepted; the server fetches nothing",
            "invalid_image_url");
    }
    const size_t comma = url.find(',');
    if (comma == std::string::npos)
        throw bad_request(param, "malformed data URL (no comma)", "invalid_image_url");
    const std::string meta = url.substr(5, comma - 5);
    if (meta.rfind("image/", 0) != 0 || meta.size() < 7 || meta.compare(meta.size() - 7, 7, ";base64") != 0) {
        throw bad_request(
            param,
            "expected data:image/<type>;base64,... (got \"data:" + surf::shorten_utf8(meta, 40, "") + "\")",
            "invalid_image_url");
    }
    if ((url.size() - comma - 1) / 4 * 3 > max_bytes) {
        ApiError e = bad_request(param, "image larger than " + std::to_string(max_bytes) + " bytes",
                                 "image_too_large");
        e.status = 413;
        throw e;
    }
    const std::optional<std::string> bytes = base64_decode(url.substr(comma + 1));
    if (!bytes) throw bad_request(param, "malformed base64", "invalid_image_url");
    try {
        return std::make_shared<const model::Image>(
            model::decode_image(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size(), param,
                                model::AlphaMode::kCompositeOnWhite, max_pixels));
    } catch (const Error& e) {
        throw bad_request(param, std::string("cannot decode the image: ") + e.what(), "invalid_image");
    }
}

int json_nesting_depth(std::string_view text) {
    int depth = 0, deepest = 0;
    bool in_string = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\')
                ++i;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            deepest = std::max(deepest, ++depth);
        } else if (c == '}' || c == ']') {
            --depth;
        }
    }
    return deepest;
}

namespace {

// The body as JSON: refused before parsing when nested deeper than kMaxJsonDepth, and when it is not an
// object.
json parse_body(const std::string& body_text) {
    // Everything downstream (the JSON tree, template values, schemas) walks a body recursively: a body nested
    // deeper than any real request is refused before it is parsed.
    if (const int depth = json_nesting_depth(body_text); depth > kMaxJsonDepth) {
        throw bad_request("", "the body nests " + std::to_string(depth) + " levels deep; at most " +
                                  std::to_string(kMaxJsonDepth) + " are allowed");
    }
    json body;
    try {
        body = json::parse(body_text);
    } catch (const json::exception& e) {
        // Syntax, invalid UTF-8, and numbers no double or integer holds (a 400-digit max_tokens, 1e999).
        throw bad_request("", std::string("the body is not valid JSON: ") + e.what());
    }
    if (!body.is_object()) throw bad_request("", "the body must be a JSON object");
    return body;
}

// max_tokens (or max_completion_tokens), the sampling fields, n and ignore_eos.
void parse_sampling(const json& body, const ServiceOptions& options, ChatRequest& req) {
    req.options.max_tokens = options.default_max_tokens;
    for (const char* name : {"max_tokens", "max_completion_tokens"}) {
        if (body.contains(name) && !body[name].is_null()) {
            req.options.max_tokens = static_cast<int32_t>(int_field(body, name, 1, options.max_tokens_limit));
        }
    }
    if (body.contains("temperature") && !body["temperature"].is_null())
        req.options.sampling.temperature = static_cast<float>(number_field(body, "temperature", 0, 2));
    if (body.contains("top_p") && !body["top_p"].is_null())
        req.options.sampling.top_p = static_cast<float>(number_field(body, "top_p", 1e-6, 1));
    if (body.contains("top_k") && !body["top_k"].is_null()) {
        const int64_t k = int_field(body, "top_k", -1, 1 << 20);
        req.options.sampling.top_k = static_cast<int32_t>(k < 0 ? 0 : k);  // vLLM: -1 = off
    }
    if (body.contains("seed") && !body["seed"].is_null())
        req.options.sampling.seed = static_cast<uint64_t>(int_field(body, "seed", INT64_MIN, INT64_MAX));
    if (body.contains("n") && !body["n"].is_null() && int_field(body, "n", 1, 1) != 1)
        throw bad_request("n", "must be 1");
    if (body.contains("ignore_eos")) {
        if (!body["ignore_eos"].is_boolean()) throw bad_request("ignore_eos", "expected a boolean");
        req.options.ignore_eos = body["ignore_eos"].get<bool>();
    }
}

// stream and stream_options.include_usage.
void parse_streaming(const json& body, ChatRequest& req) {
    if (body.contains("stream")) {
        if (!body["stream"].is_boolean() && !body["stream"].is_null())
            throw bad_request("stream", "expected a boolean");
        req.stream = body["stream"].is_boolean() && body["stream"].get<bool>();
    }
    if (body.contains("stream_options") && body["stream_options"].is_object()) {
        const json so = body["stream_options"];
        if (so.contains("include_usage") && !so["include_usage"].is_boolean() &&
            !so["include_usage"].is_null())
            throw bad_request("stream_options.include_usage", "expected a boolean");
        req.include_usage = so.contains("include_usage") && so["include_usage"].is_boolean() &&
                            so["include_usage"].get<bool>();
    }
}

// response_format: text, or json_schema compiled (through the cache) into the request's constraint.
void parse_response_format(const json& body, model::SchemaCache& schemas, ChatRequest& req) {
    if (body.contains("response_format") && !body["response_format"].is_null()) {
        const json& rf = body["response_format"];
        if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
            throw bad_request("response_format.type", "required (a string: text or json_schema)");
        const std::string type = rf["type"].get<std::string>();
        if (type == "json_schema") {
            const json js = rf.value("json_schema", json());
            if (!js.is_object() || !js.contains("schema") || !js["schema"].is_object()) {
                throw bad_request("response_format.json_schema.schema", "required (an object)");
            }
            try {
                req.options.schema = schemas.get(js["schema"].dump());
            } catch (const Error& e) {
                throw bad_request("response_format.json_schema.schema", e.what(), "invalid_schema");
            }
        } else if (type != "text") {
            throw bad_request("response_format.type",
                              "\"" + type + "\" is not supported (text, json_schema)");
        }
    }
}

}  // namespace

ChatRequest parse_chat_request(const std::string& body_text, const ServiceOptions& options,
                               model::SchemaCache& schemas) {
    const json body = parse_body(body_text);
    ChatRequest req;
    if (!body.contains("model") || !body["model"].is_string())
        throw bad_request("model", "required (a string)");
    req.model = body["model"].get<std::string>();
    if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty()) {
        throw bad_request("messages", "required (a non-empty list)");
    }
    for (size_t i = 0; i < body["messages"].size(); ++i) {
        req.messages.push_back(parse_message(body["messages"][i], i, options, &req.images));
    }
    parse_sampling(body, options, req);
    for (const char* name : {"stop", "tools", "logprobs", "logit_bias"}) {
        const json v = body.value(name, json());
        const bool unset = v.is_null() || (v.is_boolean() && !v.get<bool>()) || (v.is_array() && v.empty());
        if (!unset) throw bad_request(name, "not supported by surf serve", "unsupported_parameter");
    }
    parse_streaming(body, req);
    parse_response_format(body, schemas, req);
    if (body.contains("chat_template_kwargs")) {
        if (!body["chat_template_kwargs"].is_object())
            throw bad_request("chat_template_kwargs", "expected an object");
        req.template_kwargs = body["chat_template_kwargs"];
    }
    if (body.contains("add_generation_prompt")) {
        if (!body["add_generation_prompt"].is_boolean())
            throw bad_request("add_generation_prompt", "expected a boolean");
        req.add_generation_prompt = body["add_generation_prompt"].get<bool>();
    }
    return req;
}

}  // namespace surf::serve
