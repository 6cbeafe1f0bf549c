// Chat template: renders a conversation with the checkpoint's own Jinja chat template, the way
// transformers' apply_chat_template does, then expands image placeholders (spec/holotron.md §6.1–6.2).
//
//   ChatTemplate t = ChatTemplate::from_model_dir(dir);
//   std::string prompt = t.render(messages, {.add_generation_prompt = true, .enable_thinking = false});
//   prompt = expand_image_placeholders(prompt, {image_token_count(n_tiles_0), image_token_count(n_tiles_1)});
#pragma once

#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/text/jinja.h"

namespace surf::model {

enum class ChatPartKind { kText, kImage };

struct ChatPart {
    ChatPartKind kind = ChatPartKind::kText;
    std::string text;  // kText only
};

// One message in Hugging Face's format: content is a plain string or a list of text/image parts
// (rendered as {"type": "text", "text": ...} / {"type": "image"}).
struct ChatMessage {
    std::string role;  // "system", "user", "assistant" (the template decides what else it accepts)
    std::variant<std::string, std::vector<ChatPart>> content;
};

nlohmann::ordered_json messages_to_json(const std::vector<ChatMessage>& messages);

struct ChatRenderOptions {
    bool add_generation_prompt = true;
    // Passed as the `enable_thinking` template variable when set; left undefined otherwise, so the
    // template's own default (and /think, /no_think) applies.
    std::optional<bool> enable_thinking;
    nlohmann::ordered_json tools = nullptr;  // list of tool JSON schemas, or null (HF passes None)
    // Further template variables (HF's chat_template_kwargs); they override everything above.
    nlohmann::ordered_json extra = nlohmann::ordered_json::object();
};

class ChatTemplate {
public:
    // `special_tokens` maps names such as "bos_token" to strings; they become template variables.
    ChatTemplate(const std::string& source, std::string origin,
                 nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object());

    // The template a checkpoint ships, in transformers' order of precedence: chat_template.jinja,
    // chat_template.json {"chat_template": ...}, tokenizer_config.json "chat_template" (a string, or a
    // list of {name, template} of which "default" is used). Special tokens come from
    // tokenizer_config.json (then special_tokens_map.json). Throws surf::Error naming the file.
    static ChatTemplate from_model_dir(const std::filesystem::path& dir);
    // A template file; special tokens from `tokenizer_config` when given (may be empty).
    static ChatTemplate from_file(const std::filesystem::path& template_path,
                                  const std::filesystem::path& tokenizer_config = {});

    std::string render(const std::vector<ChatMessage>& messages, const ChatRenderOptions& options = {}) const;
    // `messages` is a JSON list of HF-style messages (any extra fields, e.g. tool_calls, pass through).
    std::string render(const nlohmann::ordered_json& messages, const ChatRenderOptions& options = {}) const;

    const std::string& origin() const { return origin_; }  // where the template came from
    const nlohmann::ordered_json& special_tokens() const { return special_tokens_; }

private:
    std::string origin_;
    nlohmann::ordered_json special_tokens_;
    JinjaTemplate template_;
};

// Reads the special-token strings ("bos_token": "<s>" or {"content": "<s>", ...}) of a
// tokenizer_config.json or special_tokens_map.json. Throws surf::Error on an unreadable file.
nlohmann::ordered_json read_special_tokens(const std::filesystem::path& path);

struct ImageTokens {
    std::string placeholder = "<image>";  // one per image in the rendered prompt
    std::string start = "<img>";
    std::string end = "</img>";
};

// Tokens one image occupies: tokens_per_tile (256 for 512² tiles, 16² patches, 0.5 pixel shuffle) per tile,
// thumbnail included in n_tiles (spec §5–6.1).
int image_token_count(int n_tiles, int tokens_per_tile = 256);

// Replaces the i-th placeholder with start + placeholder × tokens_per_image[i] + end (spec §6.1).
// Throws surf::Error(kInvalidArgument) when the number of placeholders differs from the number of
// images or a count is not positive.
std::string expand_image_placeholders(const std::string& rendered, std::span<const int> tokens_per_image,
                                      const ImageTokens& tokens = {});

}  // namespace surf::model
