#include "agent/remote/remote_chat.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>

#include "base/error.h"
#include "model/structured/token_constraint.h"
#include "model/vision/image.h"

namespace surf::agent {

namespace {

using json = nlohmann::ordered_json;

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

// "<image>", "<img>", "</img>" and, from `tokenizer_dir`'s tokenizer.json, every special token that looks
// like markup ("<...>").
std::vector<std::string> special_strings_of(const std::string& tokenizer_dir) {
    std::vector<std::string> out = {"<image>", "<img>", "</img>"};
    if (!tokenizer_dir.empty()) {
        const std::filesystem::path path = std::filesystem::path(tokenizer_dir) / "tokenizer.json";
        std::ifstream in(path);
        if (!in)
            throw Error(ErrorKind::kIo, path.string() + ": cannot open (RemoteChatOptions.tokenizer_dir)");
        json j;
        try {
            j = json::parse(in);
        } catch (const json::exception& e) {
            throw Error(ErrorKind::kFormat, path.string() + ": not valid JSON: " + e.what());
        }
        for (const json& t : j.value("added_tokens", json::array())) {
            if (!t.value("special", false) || !t.contains("content") || !t["content"].is_string()) continue;
            const std::string s = t["content"].get<std::string>();
            if (s.size() >= 3 && s.front() == '<' && s.back() == '>') out.push_back(s);
        }
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

std::string trimmed(const std::string& s) {
    const size_t b = s.find_first_not_of(" \t\r\n");
    const size_t e = s.find_last_not_of(" \t\r\n");
    return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace

json openai_messages(
    const std::vector<Message>& messages,
    const std::function<const std::string&(const std::shared_ptr<const model::Image>&)>& data_url) {
    json out = json::array();
    for (const Message& m : messages) {
        if (m.images.empty()) {
            out.push_back({{"role", m.role}, {"content", m.text}});
            continue;
        }
        json parts = json::array();
        if (!m.text.empty()) parts.push_back({{"type", "text"}, {"text", m.text}});
        for (const auto& image : m.images) {
            if (!image)
                throw Error(ErrorKind::kInvalidArgument,
                            "remote chat: a " + m.role + " message has a null image");
            parts.push_back({{"type", "image_url"}, {"image_url", {{"url", data_url(image)}}}});
        }
        out.push_back({{"role", m.role}, {"content", parts}});
    }
    return out;
}

// One conversation: the messages so far, re-sent whole on every turn to the server it is placed on.
class RemoteChat final : public Chat {
public:
    RemoteChat(RemoteChatModel& model, ChatOptions options)
        : model_(model), options_(std::move(options)), endpoint_(model.endpoints_.place()) {}
    ~RemoteChat() override { model_.endpoints_.leave(endpoint_); }
    RemoteChat(const RemoteChat&) = delete;
    RemoteChat& operator=(const RemoteChat&) = delete;

    void reset(std::vector<Message> messages) override {
        for (Message& m : messages) m.text = sanitize_for_prompt(m.text, model_.special_strings_);
        messages_ = std::move(messages);
        data_urls_.clear();
        session_tokens_ = 0;
    }

    TurnReport ask(Message user, model::GenerateOptions options) override;

    const std::vector<Message>& messages() const override { return messages_; }
    int64_t session_tokens() const override { return session_tokens_; }
    int fresh_starts() const override { return 0; }  // the server keeps no state to restart

private:
    ChatCall call_for(const model::GenerateOptions& options);
    const std::string& data_url(const std::shared_ptr<const model::Image>& image);

    RemoteChatModel& model_;
    ChatOptions options_;
    std::vector<Message> messages_;
    std::map<const model::Image*, std::string> data_urls_;  // the images messages_ holds, encoded once
    int64_t session_tokens_ = 0;
    size_t endpoint_;  // the server this chat's turns go to (RemoteEndpoints moves it when it fails)
};

const std::string& RemoteChat::data_url(const std::shared_ptr<const model::Image>& image) {
    auto [it, added] = data_urls_.try_emplace(image.get());
    if (added) it->second = "data:image/png;base64," + base64_encode(model::encode_png(*image));
    return it->second;
}

ChatCall RemoteChat::call_for(const model::GenerateOptions& options) {
    if (options.on_logits)
        throw Error(ErrorKind::kUnsupported, "remote chat: on_logits (the server returns text, not logits)");
    if (options.max_tokens < 0) throw Error(ErrorKind::kInvalidArgument, "max_tokens must be ≥ 0");
    model::validate(options.sampling);
    ChatCall call;
    call.messages = openai_messages(
        messages_, [this](const auto& image) -> const std::string& { return data_url(image); });
    call.max_tokens = options.max_tokens;
    call.temperature = options.sampling.temperature;
    call.top_p = options.sampling.top_p;
    call.top_k = options.sampling.top_k;
    call.seed = options.sampling.seed;
    call.send_seed = true;
    call.ignore_eos = options.ignore_eos;
    if (options.schema) call.json_schema = options.schema->schema_text;
    call.chat_template_kwargs = {{"enable_thinking", options_.enable_thinking}};
    call.on_text = options.on_text;
    return call;
}

TurnReport RemoteChat::ask(Message user, model::GenerateOptions options) {
    user.role = "user";
    user.text = sanitize_for_prompt(user.text, model_.special_strings_);
    TurnReport report;
    report.feed_mode = "remote";
    report.fed_chars = static_cast<int64_t>(user.text.size());
    report.images_fed = static_cast<int>(user.images.size());
    messages_.push_back(std::move(user));
    ChatReply reply;
    const auto t0 = std::chrono::steady_clock::now();
    try {
        reply = model_.endpoints_.chat(endpoint_, call_for(options));
    } catch (...) {
        messages_.pop_back();  // the conversation holds what it held before
        throw;
    }
    report.latency_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    model::GenerateResult& r = report.result;
    r.text = reply.text;
    r.finish = reply.cancelled                   ? model::FinishReason::kCancelled
               : reply.finish_reason == "length" ? model::FinishReason::kLength
                                                 : model::FinishReason::kStop;
    r.prefill_tokens = reply.prompt_tokens;
    r.session_tokens = reply.prompt_tokens + reply.completion_tokens;
    r.reported_tokens = reply.completion_tokens;  // the server returns text, not ids
    r.decode_seconds = reply.seconds;
    session_tokens_ = r.session_tokens;
    model_.prompt_tokens_ += reply.prompt_tokens;
    model_.completion_tokens_ += reply.completion_tokens;
    messages_.push_back(
        Message{"assistant", trimmed(sanitize_for_prompt(reply.text, model_.special_strings_)), {}});
    return report;
}

namespace {

std::vector<std::string> base_urls(const RemoteChatOptions& o) {
    std::vector<std::string> urls = {o.client.base_url};
    urls.insert(urls.end(), o.more_base_urls.begin(), o.more_base_urls.end());
    return urls;
}

}  // namespace

RemoteChatModel::RemoteChatModel(RemoteChatOptions options)
    : options_(std::move(options)),
      endpoints_(options_.client, base_urls(options_), options_.down_seconds),
      special_strings_(special_strings_of(options_.tokenizer_dir)) {}

std::unique_ptr<Chat> RemoteChatModel::open_chat(const ChatOptions& options) {
    return std::make_unique<RemoteChat>(*this, options);
}

std::string RemoteChatModel::name() const {
    std::string urls;
    for (const std::string& url : base_urls(options_)) urls += (urls.empty() ? "" : ", ") + url;
    return "remote " + urls + " (" + options_.client.model_name + ")";
}

std::shared_ptr<RemoteChatModel> open_remote_chat_model(const RemoteChatOptions& options) {
    auto model = std::make_shared<RemoteChatModel>(options);
    if (!options.check_model) return model;
    for (size_t e = 0; e < model->endpoints().size(); ++e) {
        RemoteClient& client = model->endpoints().client(e);
        const std::vector<std::string> ids = client.models();
        if (std::find(ids.begin(), ids.end(), options.client.model_name) == ids.end()) {
            std::string list;
            for (const auto& i : ids) list += (list.empty() ? "" : ", ") + i;
            throw Error(ErrorKind::kInvalidArgument, "remote model server " + client.url("") +
                                                         " does not serve \"" + options.client.model_name +
                                                         "\" (it serves: " + list + ")");
        }
    }
    return model;
}

}  // namespace surf::agent
