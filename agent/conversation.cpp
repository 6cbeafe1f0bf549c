#include "agent/conversation.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"

namespace surf::agent {

namespace {

size_t count_of(const std::string& text, const std::string& needle) {
    size_t n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size()))
        ++n;
    return n;
}

bool starts_with(const std::string& s, const std::string& prefix) {
    return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

std::vector<std::string> markup_special_tokens(const model::Tokenizer& tokenizer) {
    std::vector<std::string> out = {"<image>", "<img>", "</img>"};
    for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
        if (!tokenizer.is_special(id)) continue;
        const std::optional<std::string> s = tokenizer.token_string(id);
        if (s && s->size() >= 3 && s->front() == '<' && s->back() == '>') out.push_back(*s);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

std::string sanitize_for_prompt(const std::string& text, const std::vector<std::string>& special_strings) {
    if (text.find('<') == std::string::npos) return text;
    std::string out = text;
    for (const std::string& s : special_strings) {
        for (size_t at = out.find(s); at != std::string::npos; at = out.find(s, at + 1)) {
            out.replace(at, 1, "\xE2\x80\xB9");  // U+2039 '‹'
        }
    }
    return out;
}

Conversation::Conversation(model::Engine& engine, const model::ChatTemplate& chat_template,
                           ChatOptions options)
    : engine_(engine),
      template_(chat_template),
      options_(std::move(options)),
      special_strings_(markup_special_tokens(engine.tokenizer())) {}

Conversation::~Conversation() {
    close();
}

void Conversation::close() {
    if (open_) {
        try {
            engine_.close_session(session_);
        } catch (const Error&) {
        }
        open_ = false;
    }
}

void Conversation::reset(std::vector<Message> messages) {
    close();
    for (Message& m : messages) m.text = sanitize_for_prompt(m.text, special_strings_);
    messages_ = std::move(messages);
    fed_.clear();
    last_render_.clear();
    last_reply_.clear();
    session_tokens_ = 0;
}

std::string Conversation::render(const std::vector<Message>& messages, bool generation_prompt) const {
    std::vector<model::ChatMessage> chat;
    chat.reserve(messages.size());
    for (const Message& m : messages) {
        if (m.images.empty()) {
            chat.push_back({m.role, m.text});
            continue;
        }
        std::vector<model::ChatPart> parts;
        if (!m.text.empty()) parts.push_back({model::ChatPartKind::kText, m.text});
        for (size_t i = 0; i < m.images.size(); ++i) parts.push_back({model::ChatPartKind::kImage, ""});
        chat.push_back({m.role, std::move(parts)});
    }
    model::ChatRenderOptions opts;
    opts.add_generation_prompt = generation_prompt;
    opts.enable_thinking = options_.enable_thinking;
    return template_.render(chat, opts);
}

TurnReport Conversation::ask(Message user, model::GenerateOptions options) {
    user.role = "user";
    user.text = sanitize_for_prompt(user.text, special_strings_);
    messages_.push_back(std::move(user));
    const std::string full = render(messages_, true);

    TurnReport report;
    const std::string delta = next_delta(full, report.feed_mode);
    const size_t n_images = count_of(delta, "<image>");
    const std::vector<model::InputPart> parts = model::interleave_images(delta, last_images(n_images));

    if (options.stop_ids.empty()) {
        if (auto id = engine_.tokenizer().token_id(options_.stop_token)) options.stop_ids = {*id};
    }
    const auto t0 = std::chrono::steady_clock::now();
    try {
        report.result = engine_.generate(session_, parts, options);
    } catch (...) {
        // The session may hold part of the input now: never build on it again.
        close();
        messages_.pop_back();
        throw;
    }
    report.latency_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    report.fed_chars = static_cast<int64_t>(delta.size());
    report.images_fed = static_cast<int>(n_images);
    session_tokens_ = report.result.session_tokens;
    record_reply(delta, report.result);
    return report;
}

std::string Conversation::next_delta(const std::string& full, std::string& feed_mode) {
    std::string delta;
    if (open_ && starts_with(full, fed_)) {
        feed_mode = "prefix";
        delta = full.substr(fed_.size());
    } else if (open_ && !last_render_.empty() && starts_with(full, last_render_)) {
        // What the template writes after the reply's text (e.g. "\n<SPECIAL_12>\n"), less the stop token
        // the session already holds.
        const size_t reply_at = last_reply_.empty() ? std::string::npos : last_render_.rfind(last_reply_);
        std::string closing =
            reply_at == std::string::npos ? "" : last_render_.substr(reply_at + last_reply_.size());
        const size_t stop_at = closing.find(options_.stop_token);
        if (stop_at != std::string::npos &&
            starts_with(fed_.substr(fed_.size() - std::min(fed_.size(), options_.stop_token.size())),
                        options_.stop_token)) {
            closing = closing.substr(stop_at + options_.stop_token.size());
        }
        if (reply_at != std::string::npos) {
            feed_mode = "splice";
            delta = closing + full.substr(last_render_.size());
        }
    }
    if (feed_mode.empty()) {
        close();
        session_ = engine_.open_session();
        open_ = true;
        fed_.clear();
        ++fresh_starts_;
        feed_mode = "fresh";
        delta = full;
    }
    return delta;
}

std::vector<std::shared_ptr<const model::Image>> Conversation::last_images(size_t n_images) const {
    std::vector<std::shared_ptr<const model::Image>> all_images;
    for (const Message& m : messages_) all_images.insert(all_images.end(), m.images.begin(), m.images.end());
    if (n_images > all_images.size()) {
        throw Error(ErrorKind::kInvalidArgument,
                    "conversation: the prompt mentions more images than were given");
    }
    return std::vector<std::shared_ptr<const model::Image>>(all_images.end() - static_cast<long>(n_images),
                                                            all_images.end());
}

void Conversation::record_reply(const std::string& delta, const model::GenerateResult& result) {
    fed_ += delta + result.text;
    if (result.finish == model::FinishReason::kStop) fed_ += options_.stop_token;
    last_reply_ = sanitize_for_prompt(result.text, special_strings_);
    // Templates strip replies; search for the stripped text when locating it in the render.
    const size_t b = last_reply_.find_first_not_of(" \t\r\n");
    const size_t e = last_reply_.find_last_not_of(" \t\r\n");
    last_reply_ = b == std::string::npos ? "" : last_reply_.substr(b, e - b + 1);
    messages_.push_back(Message{"assistant", last_reply_, {}});
    // A reply cut by max_tokens or cancelled left its last token pending (fed at the start of the next call)
    // and no stop token: the splice then keeps the template's whole closing, which is what the session lacks.
    try {
        last_render_ = render(messages_, false);
    } catch (const Error&) {
        last_render_.clear();  // e.g. a reply cut inside a UTF-8 sequence: start fresh next turn
    }
}

EngineChatModel::EngineChatModel(model::Engine& engine, const model::ChatTemplate& chat_template)
    : engine_(engine), template_(chat_template) {}

EngineChatModel::EngineChatModel(std::shared_ptr<model::Engine> engine,
                                 std::unique_ptr<model::ChatTemplate> chat_template)
    : owned_engine_(std::move(engine)),
      owned_template_(std::move(chat_template)),
      engine_(*owned_engine_),
      template_(*owned_template_) {}

std::shared_ptr<EngineChatModel> EngineChatModel::open(std::shared_ptr<model::Engine> engine,
                                                       const std::string& template_file) {
    if (!engine) throw Error(ErrorKind::kInvalidArgument, "EngineChatModel: no engine");
    auto chat_template = std::make_unique<model::ChatTemplate>(
        template_file.empty() ? model::ChatTemplate::from_model_dir(engine->config().dir)
                              : model::ChatTemplate::from_file(template_file));
    return std::shared_ptr<EngineChatModel>(new EngineChatModel(std::move(engine), std::move(chat_template)));
}

std::unique_ptr<Chat> EngineChatModel::open_chat(const ChatOptions& options) {
    return std::make_unique<Conversation>(engine_, template_, options);
}

}  // namespace surf::agent
