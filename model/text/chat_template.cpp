// Chat template loading, rendering and image placeholder expansion (spec/holotron.md §6.1–6.2).
#include "model/text/chat_template.h"

#include "base/error.h"
#include "base/file_text.h"

namespace surf::model {

namespace {

namespace fs = std::filesystem;

nlohmann::ordered_json read_json(const fs::path& path) {
    std::string text = read_text_file(path);
    try {
        return nlohmann::ordered_json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw Error(ErrorKind::kFormat, path.string() + ": invalid JSON: " + e.what());
    }
}

// tokenizer_config.json "chat_template": a string, or [{"name": ..., "template": ...}, ...].
std::optional<std::string> template_from_config(const nlohmann::ordered_json& config, const fs::path& path) {
    if (!config.is_object() || !config.contains("chat_template") || config["chat_template"].is_null()) {
        return std::nullopt;
    }
    const auto& value = config["chat_template"];
    if (value.is_string()) return value.get<std::string>();
    if (value.is_array()) {
        for (const auto& entry : value) {
            if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
                entry["template"].is_string()) {
                return entry["template"].get<std::string>();
            }
        }
        throw Error(ErrorKind::kConfig, path.string() +
                                            ": field 'chat_template' lists named templates but none "
                                            "is named 'default'");
    }
    throw Error(ErrorKind::kFormat, path.string() +
                                        ": field 'chat_template' must be a string or a list of "
                                        "{name, template}, got " +
                                        std::string(value.type_name()));
}

}  // namespace

nlohmann::ordered_json read_special_tokens(const fs::path& path) {
    nlohmann::ordered_json config = read_json(path);
    nlohmann::ordered_json tokens = nlohmann::ordered_json::object();
    if (!config.is_object()) throw Error(ErrorKind::kFormat, path.string() + ": expected a JSON object");
    static const char* kNames[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                   "pad_token", "cls_token", "mask_token"};
    for (const char* name : kNames) {
        if (!config.contains(name)) continue;
        const auto& value = config[name];
        if (value.is_string()) {
            tokens[name] = value;
        } else if (value.is_object() && value.contains("content") && value["content"].is_string()) {
            tokens[name] = value["content"];  // a serialised AddedToken
        } else if (!value.is_null()) {
            throw Error(ErrorKind::kFormat, path.string() + ": field '" + name + "' must be a string or " +
                                                "{\"content\": string}");
        }
    }
    return tokens;
}

ChatTemplate::ChatTemplate(const std::string& source, std::string origin,
                           nlohmann::ordered_json special_tokens)
    : origin_(std::move(origin)), special_tokens_(std::move(special_tokens)), template_(source, origin_) {}

ChatTemplate ChatTemplate::from_model_dir(const fs::path& dir) {
    if (!fs::is_directory(dir)) throw Error(ErrorKind::kIo, "model directory not found: " + dir.string());
    nlohmann::ordered_json tokens = nlohmann::ordered_json::object();
    std::optional<nlohmann::ordered_json> tokenizer_config;
    fs::path config_path = dir / "tokenizer_config.json";
    if (fs::exists(config_path)) {
        tokenizer_config = read_json(config_path);
        tokens = read_special_tokens(config_path);
    }
    fs::path map_path = dir / "special_tokens_map.json";
    if (fs::exists(map_path)) {
        for (const auto& [name, value] : read_special_tokens(map_path).items()) {
            if (!tokens.contains(name)) tokens[name] = value;
        }
    }

    fs::path jinja_path = dir / "chat_template.jinja";
    if (fs::exists(jinja_path)) return ChatTemplate(read_text_file(jinja_path), jinja_path.string(), tokens);
    fs::path json_path = dir / "chat_template.json";
    if (fs::exists(json_path)) {
        nlohmann::ordered_json processor = read_json(json_path);
        if (!processor.is_object() || !processor.contains("chat_template") ||
            !processor["chat_template"].is_string()) {
            throw Error(ErrorKind::kFormat, json_path.string() + ": expected a string field 'chat_template'");
        }
        return ChatTemplate(processor["chat_template"].get<std::string>(), json_path.string(), tokens);
    }
    if (tokenizer_config) {
        if (auto source = template_from_config(*tokenizer_config, config_path)) {
            return ChatTemplate(*source, config_path.string() + " (chat_template)", tokens);
        }
    }
    throw Error(ErrorKind::kConfig, "no chat template in " + dir.string() +
                                        ": looked for chat_template.jinja, chat_template.json and the "
                                        "'chat_template' field of tokenizer_config.json");
}

ChatTemplate ChatTemplate::from_file(const fs::path& template_path, const fs::path& tokenizer_config) {
    nlohmann::ordered_json tokens = nlohmann::ordered_json::object();
    if (!tokenizer_config.empty()) tokens = read_special_tokens(tokenizer_config);
    return ChatTemplate(read_text_file(template_path), template_path.string(), tokens);
}

nlohmann::ordered_json messages_to_json(const std::vector<ChatMessage>& messages) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const ChatMessage& m : messages) {
        nlohmann::ordered_json message = {{"role", m.role}};
        if (const auto* text = std::get_if<std::string>(&m.content)) {
            message["content"] = *text;
        } else {
            nlohmann::ordered_json parts = nlohmann::ordered_json::array();
            for (const ChatPart& part : std::get<std::vector<ChatPart>>(m.content)) {
                if (part.kind == ChatPartKind::kImage) {
                    parts.push_back({{"type", "image"}});
                } else {
                    parts.push_back({{"type", "text"}, {"text", part.text}});
                }
            }
            message["content"] = std::move(parts);
        }
        out.push_back(std::move(message));
    }
    return out;
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages,
                                 const ChatRenderOptions& options) const {
    return render(messages_to_json(messages), options);
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages,
                                 const ChatRenderOptions& options) const {
    if (!messages.is_array()) {
        throw Error(ErrorKind::kInvalidArgument,
                    "chat messages must be a JSON list, got " + std::string(messages.type_name()));
    }
    if (!options.extra.is_object()) {
        throw Error(ErrorKind::kInvalidArgument, "extra chat template variables must be a JSON object");
    }
    // The variables transformers' render_jinja_template passes: messages, tools, documents,
    // add_generation_prompt, then the special tokens and the caller's kwargs.
    nlohmann::ordered_json variables = {{"messages", messages},
                                        {"tools", options.tools},
                                        {"documents", nullptr},
                                        {"add_generation_prompt", options.add_generation_prompt}};
    for (const auto& [name, value] : special_tokens_.items()) variables[name] = value;
    if (options.enable_thinking) variables["enable_thinking"] = *options.enable_thinking;
    for (const auto& [name, value] : options.extra.items()) variables[name] = value;
    return template_.render(variables);
}

int image_token_count(int n_tiles, int tokens_per_tile) {
    if (n_tiles <= 0 || tokens_per_tile <= 0) {
        throw Error(ErrorKind::kInvalidArgument, "image_token_count: n_tiles (" + std::to_string(n_tiles) +
                                                     ") and tokens_per_tile (" +
                                                     std::to_string(tokens_per_tile) + ") must be positive");
    }
    return n_tiles * tokens_per_tile;
}

std::string expand_image_placeholders(const std::string& rendered, std::span<const int> tokens_per_image,
                                      const ImageTokens& tokens) {
    if (tokens.placeholder.empty()) throw Error(ErrorKind::kInvalidArgument, "empty image placeholder");
    std::vector<size_t> positions;
    for (size_t at = rendered.find(tokens.placeholder); at != std::string::npos;
         at = rendered.find(tokens.placeholder, at + tokens.placeholder.size())) {
        positions.push_back(at);
    }
    if (positions.size() != tokens_per_image.size()) {
        throw Error(ErrorKind::kInvalidArgument,
                    "the rendered prompt has " + std::to_string(positions.size()) +
                        " image placeholder(s) '" + tokens.placeholder + "' but " +
                        std::to_string(tokens_per_image.size()) + " image token count(s) were given");
    }
    size_t extra = 0;
    for (size_t i = 0; i < tokens_per_image.size(); ++i) {
        if (tokens_per_image[i] <= 0) {
            throw Error(ErrorKind::kInvalidArgument, "image " + std::to_string(i) +
                                                         " has a non-positive token count " +
                                                         std::to_string(tokens_per_image[i]));
        }
        extra += tokens.start.size() + tokens.end.size() +
                 size_t(tokens_per_image[i] - 1) * tokens.placeholder.size();
    }
    std::string out;
    out.reserve(rendered.size() + extra);
    size_t previous = 0;
    for (size_t i = 0; i < positions.size(); ++i) {
        out.append(rendered, previous, positions[i] - previous);
        out += tokens.start;
        for (int k = 0; k < tokens_per_image[i]; ++k) out += tokens.placeholder;
        out += tokens.end;
        previous = positions[i] + tokens.placeholder.size();
    }
    out.append(rendered, previous, std::string::npos);
    return out;
}

}  // namespace surf::model
