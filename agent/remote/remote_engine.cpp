#include "agent/remote/remote_engine.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/check.h"
#include "base/error.h"
#include "model/structured/token_constraint.h"

namespace surf::agent {

namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

constexpr const char* kRolePrefix = "<|surf_role:";
constexpr const char* kEnd = "<|surf_end|>";
constexpr const char* kThinkingPrefix = "<|surf_thinking:";

bool starts_at(const std::string& s, size_t at, const std::string& p) {
    return s.compare(at, p.size(), p) == 0;
}

std::string base64_encode(const std::vector<uint8_t>& bytes) {
    static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    size_t i = 0;
    for (; i + 2 < bytes.size(); i += 3) {
        const uint32_t v = (uint32_t{bytes[i]} << 16) | (uint32_t{bytes[i + 1]} << 8) | bytes[i + 2];
        out += k[v >> 18];
        out += k[(v >> 12) & 63];
        out += k[(v >> 6) & 63];
        out += k[v & 63];
    }
    if (i < bytes.size()) {
        const uint32_t v =
            (uint32_t{bytes[i]} << 16) | (i + 1 < bytes.size() ? uint32_t{bytes[i + 1]} << 8 : 0);
        out += k[v >> 18];
        out += k[(v >> 12) & 63];
        out += i + 1 < bytes.size() ? k[(v >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

// A BPE tokenizer with no ordinary vocabulary, only special tokens: the pass-through markers (so
// the agent neutralises them in page text) and, when given, the checkpoint's own special tokens.
model::Tokenizer marker_tokenizer(const std::string& tokenizer_dir) {
    std::vector<std::string> specials = {
        "<unk>", "<|surf_role:system|>", "<|surf_role:user|>",   "<|surf_role:assistant|>",
        kEnd,    kRemoteImageMarker,     "<|surf_thinking:on|>", "<|surf_thinking:off|>"};
    if (!tokenizer_dir.empty()) {
        const fs::path path = fs::path(tokenizer_dir) / "tokenizer.json";
        std::ifstream in(path);
        if (!in)
            throw Error(ErrorKind::kIo, path.string() + ": cannot open (RemoteEngineOptions.tokenizer_dir)");
        json j;
        try {
            j = json::parse(in);
        } catch (const json::exception& e) {
            throw Error(ErrorKind::kFormat, path.string() + ": not valid JSON: " + e.what());
        }
        for (const json& t : j.value("added_tokens", json::array())) {
            if (t.value("special", false) && t.contains("content") && t["content"].is_string()) {
                const std::string s = t["content"].get<std::string>();
                if (std::find(specials.begin(), specials.end(), s) == specials.end()) specials.push_back(s);
            }
        }
    }
    json vocab = json::object();
    json added = json::array();
    for (size_t i = 0; i < specials.size(); ++i) {
        vocab[specials[i]] = i;
        added.push_back({{"id", i},
                         {"content", specials[i]},
                         {"single_word", false},
                         {"lstrip", false},
                         {"rstrip", false},
                         {"normalized", false},
                         {"special", true}});
    }
    const json tok = {
        {"added_tokens", added},
        {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}, {"unk_token", "<unk>"}}}};
    return model::Tokenizer::from_json(tok.dump(), "remote engine marker tokenizer");
}

}  // namespace

const std::string& remote_chat_template() {
    // Lossless: every message is "<|surf_role:ROLE|>" + content + "<|surf_end|>", images as "<image>"
    // (what the agent's Conversation counts), the generation prompt an open assistant message.
    static const std::string t =
        "{%- if enable_thinking is defined and enable_thinking is not none -%}"
        "{{- '<|surf_thinking:on|>' if enable_thinking else '<|surf_thinking:off|>' -}}"
        "{%- endif -%}"
        "{%- for message in messages -%}"
        "{{- '<|surf_role:' ~ message.role ~ '|>' -}}"
        "{%- if message.content is string -%}{{- message.content -}}"
        "{%- elif message.content is not none -%}"
        "{%- for part in message.content -%}"
        "{%- if part.type == 'image' -%}{{- '<image>' -}}"
        "{%- elif part.type == 'text' -%}{{- part.text -}}"
        "{%- else -%}{{- raise_exception('unsupported content part ' ~ part.type) -}}{%- endif -%}"
        "{%- endfor -%}"
        "{%- endif -%}"
        "{{- '<|surf_end|>' -}}"
        "{%- endfor -%}"
        "{%- if add_generation_prompt -%}{{- '<|surf_role:assistant|>' -}}{%- endif -%}";
    return t;
}

std::vector<RemoteMessage> parse_remote_chat(const std::string& text, std::string* thinking) {
    auto fail = [&](size_t at, const std::string& what) {
        return Error(ErrorKind::kInvalidArgument,
                     "remote engine: the input is not in the pass-through chat format (" + what +
                         " at byte " + std::to_string(at) + ": \"" + text.substr(at, 40) +
                         "\"); render prompts with remote_chat_template(), not the checkpoint's template");
    };
    std::vector<RemoteMessage> out;
    size_t at = 0;
    if (thinking) thinking->clear();
    while (at < text.size()) {
        if (starts_at(text, at, kThinkingPrefix)) {
            const size_t close = text.find("|>", at);
            if (close == std::string::npos) throw fail(at, "unterminated thinking marker");
            if (thinking)
                *thinking = text.substr(at + std::string(kThinkingPrefix).size(),
                                        close - at - std::string(kThinkingPrefix).size());
            at = close + 2;
            continue;
        }
        if (!starts_at(text, at, kRolePrefix)) throw fail(at, "expected a role marker");
        const size_t role_end = text.find("|>", at);
        if (role_end == std::string::npos) throw fail(at, "unterminated role marker");
        RemoteMessage m;
        m.role = text.substr(at + std::string(kRolePrefix).size(),
                             role_end - at - std::string(kRolePrefix).size());
        const size_t content_at = role_end + 2;
        const size_t end = text.find(kEnd, content_at);
        if (end == std::string::npos) {
            m.text = text.substr(content_at);
            m.open = true;
            at = text.size();
        } else {
            m.text = text.substr(content_at, end - content_at);
            at = end + std::string(kEnd).size();
        }
        out.push_back(std::move(m));
    }
    return out;
}

RemoteEngine::RemoteEngine(RemoteEngineOptions options)
    : options_(std::move(options)),
      client_(options_.client),
      tokenizer_(marker_tokenizer(options_.tokenizer_dir)) {
    // The agent loads its chat template from config().dir: give it a folder with the pass-through one.
    std::string dir_template = (fs::temp_directory_path() / "surf_remote_XXXXXX").string();
    if (!::mkdtemp(dir_template.data())) {
        throw Error(ErrorKind::kIo,
                    "remote engine: cannot create a folder under " + fs::temp_directory_path().string());
    }
    config_.dir = dir_template;
    std::ofstream(fs::path(config_.dir) / "chat_template.jinja") << remote_chat_template();
    std::ofstream(fs::path(config_.dir) / "tokenizer_config.json") << "{}";
    config_.architecture = "remote";
    config_.llm.vocab_size = tokenizer_.vocab_size();
    config_.has_vision = true;  // whatever the server serves; images are sent, the server decides
}

RemoteEngine::~RemoteEngine() {
    std::error_code ec;
    fs::remove_all(config_.dir, ec);
}

std::shared_ptr<const model::TokenIndex> RemoteEngine::token_index() const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!index_) index_ = model::TokenIndex::build(model::token_vocabulary(tokenizer_, {}));
    return index_;
}

std::string RemoteEngine::backend_name() const {
    return "remote " + client_.options().base_url + " (" + client_.options().model_name + ")";
}

model::EngineStats RemoteEngine::stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    model::EngineStats s;
    s.prefill_tokens = prompt_tokens_;
    s.decode_tokens = completion_tokens_;
    s.running = running_;
    s.resident_sessions = static_cast<int64_t>(sessions_.size());
    return s;
}

size_t RemoteEngine::open_sessions() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return sessions_.size();
}

model::SessionId RemoteEngine::open_session() {
    std::lock_guard<std::mutex> lock(mutex_);
    const model::SessionId id = next_id_++;
    sessions_.emplace(id, Session{});
    return id;
}

model::SessionId RemoteEngine::fork_session(model::SessionId from) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = sessions_.find(from);
    if (it == sessions_.end())
        throw Error(ErrorKind::kInvalidArgument, "unknown session " + std::to_string(from));
    const model::SessionId id = next_id_++;
    Session copy = it->second;
    sessions_.emplace(id, std::move(copy));
    return id;
}

void RemoteEngine::close_session(model::SessionId id) {
    std::lock_guard<std::mutex> lock(mutex_);
    sessions_.erase(id);
}

model::GenerateResult RemoteEngine::generate(model::SessionId id, const std::vector<model::InputPart>& input,
                                             const model::GenerateOptions& options) {
    if (options.on_logits) {
        throw Error(ErrorKind::kUnsupported,
                    "remote engine: on_logits (the server returns text, not logits)");
    }
    if (options.max_tokens < 0) throw Error(ErrorKind::kInvalidArgument, "max_tokens must be ≥ 0");
    model::validate(options.sampling);
    Session s;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = sessions_.find(id);
        if (it == sessions_.end())
            throw Error(ErrorKind::kInvalidArgument, "unknown session " + std::to_string(id));
        s = it->second;
    }
    for (const model::InputPart& part : input) {
        if (!part.token_ids.empty()) {
            throw Error(ErrorKind::kUnsupported,
                        "remote engine: token-id inputs (the server takes chat messages)");
        }
        if (part.image) {
            s.text += kRemoteImageMarker;
            s.images.push_back(part.image);
            s.data_urls.push_back(std::make_shared<const std::string>(
                "data:image/png;base64," + base64_encode(model::encode_png(*part.image))));
        } else {
            s.text += part.text;
        }
    }

    std::string thinking;
    const std::vector<RemoteMessage> messages = parse_remote_chat(s.text, &thinking);
    ChatCall call;
    size_t image = 0;
    for (size_t i = 0; i < messages.size(); ++i) {
        const RemoteMessage& m = messages[i];
        if (m.open && m.role != "assistant") {
            throw Error(ErrorKind::kInvalidArgument, "remote engine: the prompt ends inside a " + m.role +
                                                         " message (no generation prompt)");
        }
        if (m.open && m.text.empty()) break;  // the generation prompt
        if (m.open) call.continue_final_message = true;
        if (m.text.find(kRemoteImageMarker) == std::string::npos) {
            call.messages.push_back({{"role", m.role}, {"content", m.text}});
            continue;
        }
        json parts = json::array();
        size_t at = 0;
        for (;;) {
            const size_t mark = m.text.find(kRemoteImageMarker, at);
            const std::string piece =
                m.text.substr(at, mark == std::string::npos ? std::string::npos : mark - at);
            if (!piece.empty()) parts.push_back({{"type", "text"}, {"text", piece}});
            if (mark == std::string::npos) break;
            SURF_CHECK(image < s.data_urls.size());
            parts.push_back({{"type", "image_url"}, {"image_url", {{"url", *s.data_urls[image++]}}}});
            at = mark + std::string(kRemoteImageMarker).size();
        }
        call.messages.push_back({{"role", m.role}, {"content", parts}});
    }
    if (call.messages.empty()) throw Error(ErrorKind::kInvalidArgument, "remote engine: no messages to send");
    call.max_tokens = options.max_tokens;
    call.temperature = options.sampling.temperature;
    call.top_p = options.sampling.top_p;
    call.top_k = options.sampling.top_k;
    call.seed = options.sampling.seed;
    call.send_seed = true;
    call.ignore_eos = options.ignore_eos;
    if (options.schema) call.json_schema = options.schema->schema_text;
    if (!thinking.empty()) call.chat_template_kwargs = {{"enable_thinking", thinking == "on"}};
    call.on_text = options.on_text;

    {
        std::lock_guard<std::mutex> lock(mutex_);
        ++running_;
    }
    ChatReply reply;
    try {
        reply = client_.chat(call);
    } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        --running_;
        throw;
    }
    model::GenerateResult result;
    result.text = reply.text;
    result.finish = reply.cancelled                   ? model::FinishReason::kCancelled
                    : reply.finish_reason == "length" ? model::FinishReason::kLength
                                                      : model::FinishReason::kStop;
    result.prefill_tokens = reply.prompt_tokens;
    result.session_tokens = reply.prompt_tokens + reply.completion_tokens;
    result.reported_tokens = reply.completion_tokens;  // the server returns text, not ids
    result.prefill_seconds = 0;
    result.decode_seconds = reply.seconds;

    // The session now holds the reply, as an in-process session holds what it generated.
    s.text += reply.text;
    std::lock_guard<std::mutex> lock(mutex_);
    --running_;
    ++calls_;
    prompt_tokens_ += reply.prompt_tokens;
    completion_tokens_ += reply.completion_tokens;
    auto it = sessions_.find(id);
    if (it != sessions_.end()) it->second = std::move(s);
    return result;
}

std::shared_ptr<RemoteEngine> open_remote_engine(const RemoteEngineOptions& options) {
    auto engine = std::make_shared<RemoteEngine>(options);
    if (options.check_model) {
        const std::vector<std::string> ids = engine->client().models();
        if (std::find(ids.begin(), ids.end(), options.client.model_name) == ids.end()) {
            std::string list;
            for (const auto& i : ids) list += (list.empty() ? "" : ", ") + i;
            throw Error(ErrorKind::kInvalidArgument, "remote model server " + engine->client().url("") +
                                                         " does not serve \"" + options.client.model_name +
                                                         "\" (it serves: " + list + ")");
        }
    }
    return engine;
}

}  // namespace surf::agent
