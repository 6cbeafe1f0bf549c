// Loading tokenizer.json and the encode / decode pipelines (HF tokenizers' TokenizerImpl order:
// added tokens → normalizer → added tokens on normalized text → pre-tokenizer → BPE).
#include "model/text/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.h"
#include "model/text/tokenizer_internal.h"

namespace surf::model {

using namespace tokenizer_detail;
using nlohmann::json;

namespace {

// GPT-2's split of the ByteLevel pre-tokenizer when use_regex is set.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class Loader {
public:
    explicit Loader(std::string source) : source_(std::move(source)) {}

    [[noreturn]] void fail(ErrorKind kind, const std::string& field, const std::string& what) const {
        throw Error(kind, source_ + ": " + field + ": " + what);
    }

    const json& member(const json& object, const char* key, const std::string& field) const {
        if (!object.is_object() || !object.contains(key)) {
            fail(ErrorKind::kFormat, field, std::string("missing field '") + key + "'");
        }
        return object.at(key);
    }

    std::string string_of(const json& value, const std::string& field) const {
        if (!value.is_string()) fail(ErrorKind::kFormat, field, "expected a string, got " + value.dump());
        return value.get<std::string>();
    }

    bool flag(const json& object, const char* key, bool fallback, const std::string& field) const {
        if (!object.contains(key) || object.at(key).is_null()) return fallback;
        if (!object.at(key).is_boolean())
            fail(ErrorKind::kFormat, field + "." + key, "expected true or false");
        return object.at(key).get<bool>();
    }

    std::string type_of(const json& object, const std::string& field) const {
        return string_of(member(object, "type", field), field + ".type");
    }

    // SplitPattern / Replace pattern: {"String": s} or {"Regex": r}.
    std::shared_ptr<Regex> pattern(const json& object, const std::string& field,
                                   std::string* literal = nullptr) {
        const json& p = member(object, "pattern", field);
        if (p.is_object() && p.contains("String")) {
            std::string text = string_of(p.at("String"), field + ".pattern.String");
            if (literal) *literal = text;
            return std::make_shared<Regex>(text, true, source_ + ": " + field + ".pattern");
        }
        if (p.is_object() && p.contains("Regex")) {
            if (literal) fail(ErrorKind::kUnsupported, field + ".pattern", "a Regex pattern here");
            return std::make_shared<Regex>(string_of(p.at("Regex"), field + ".pattern.Regex"), false,
                                           source_ + ": " + field + ".pattern");
        }
        fail(ErrorKind::kFormat, field + ".pattern", "expected {\"String\": ...} or {\"Regex\": ...}");
    }

    void normalizer(const json& n, const std::string& field, TokenizerData& d) {
        if (n.is_null()) return;
        std::string type = type_of(n, field);
        if (type == "Sequence") {
            const json& list = member(n, "normalizers", field);
            if (!list.is_array()) fail(ErrorKind::kFormat, field + ".normalizers", "expected a list");
            for (size_t i = 0; i < list.size(); ++i) {
                normalizer(list[i], field + ".normalizers[" + std::to_string(i) + "]", d);
            }
        } else if (type == "Prepend") {
            d.normalizers.push_back({NormalizerStep::Kind::kPrepend,
                                     string_of(member(n, "prepend", field), field + ".prepend"), nullptr});
        } else if (type == "Replace") {
            NormalizerStep step{NormalizerStep::Kind::kReplace, "", pattern(n, field)};
            step.text = string_of(member(n, "content", field), field + ".content");
            d.normalizers.push_back(std::move(step));
        } else if (type == "Strip") {
            NormalizerStep step{NormalizerStep::Kind::kStrip, "", nullptr};
            step.strip_left = flag(n, "strip_left", false, field);
            step.strip_right = flag(n, "strip_right", false, field);
            d.normalizers.push_back(std::move(step));
        } else {
            fail(ErrorKind::kUnsupported, field + ".type", "normalizer '" + type + "' is not supported");
        }
    }

    void pre_tokenizer(const json& p, const std::string& field, TokenizerData& d) {
        if (p.is_null()) return;
        std::string type = type_of(p, field);
        if (!d.pre_tokenizers.empty() && d.pre_tokenizers.back().kind == PreTokenizerStep::Kind::kByteLevel) {
            // The BPE undoes nothing: it maps bytes itself, which is only right when ByteLevel comes last.
            fail(ErrorKind::kUnsupported, field, "a pre-tokenizer after ByteLevel");
        }
        if (type == "Sequence") {
            const json& list = member(p, "pretokenizers", field);
            if (!list.is_array()) fail(ErrorKind::kFormat, field + ".pretokenizers", "expected a list");
            for (size_t i = 0; i < list.size(); ++i) {
                pre_tokenizer(list[i], field + ".pretokenizers[" + std::to_string(i) + "]", d);
            }
        } else if (type == "Split") {
            PreTokenizerStep step{PreTokenizerStep::Kind::kSplit, pattern(p, field)};
            std::string behavior = string_of(member(p, "behavior", field), field + ".behavior");
            if (behavior == "Removed") {
                step.behavior = SplitBehavior::kRemoved;
            } else if (behavior == "Isolated") {
                step.behavior = SplitBehavior::kIsolated;
            } else if (behavior == "MergedWithPrevious") {
                step.behavior = SplitBehavior::kMergedWithPrevious;
            } else if (behavior == "MergedWithNext") {
                step.behavior = SplitBehavior::kMergedWithNext;
            } else if (behavior == "Contiguous") {
                step.behavior = SplitBehavior::kContiguous;
            } else {
                fail(ErrorKind::kFormat, field + ".behavior", "unknown value '" + behavior + "'");
            }
            step.invert = flag(p, "invert", false, field);
            d.pre_tokenizers.push_back(std::move(step));
        } else if (type == "ByteLevel") {
            PreTokenizerStep step{PreTokenizerStep::Kind::kByteLevel, nullptr};
            step.add_prefix_space = flag(p, "add_prefix_space", true, field);
            if (flag(p, "use_regex", true, field)) {
                step.pattern = std::make_shared<Regex>(kGpt2Pattern, false, "ByteLevel regex");
            }
            d.pre_tokenizers.push_back(std::move(step));
        } else {
            fail(ErrorKind::kUnsupported, field + ".type", "pre-tokenizer '" + type + "' is not supported");
        }
    }

    void decoder(const json& p, const std::string& field, TokenizerData& d) {
        if (p.is_null()) return;
        d.has_decoder = true;
        std::string type = type_of(p, field);
        if (type == "Sequence") {
            const json& list = member(p, "decoders", field);
            if (!list.is_array()) fail(ErrorKind::kFormat, field + ".decoders", "expected a list");
            for (size_t i = 0; i < list.size(); ++i) {
                decoder(list[i], field + ".decoders[" + std::to_string(i) + "]", d);
            }
        } else if (type == "ByteLevel") {
            d.decoders.emplace_back(DecoderStep::Kind::kByteLevel);
        } else if (type == "ByteFallback") {
            d.decoders.emplace_back(DecoderStep::Kind::kByteFallback);
        } else if (type == "Fuse") {
            d.decoders.emplace_back(DecoderStep::Kind::kFuse);
        } else if (type == "Strip") {
            DecoderStep step(DecoderStep::Kind::kStrip);
            step.content = string_of(member(p, "content", field), field + ".content");
            const json& start = member(p, "start", field);
            const json& stop = member(p, "stop", field);
            if (!start.is_number_unsigned() || !stop.is_number_unsigned() || start.get<uint64_t>() > 1024 ||
                stop.get<uint64_t>() > 1024) {
                fail(ErrorKind::kFormat, field, "start/stop must be small non-negative integers");
            }
            step.start = start.get<int>();
            step.stop = stop.get<int>();
            d.decoders.push_back(std::move(step));
        } else if (type == "Replace") {
            DecoderStep step(DecoderStep::Kind::kReplace);
            pattern(p, field, &step.pattern);
            step.content = string_of(member(p, "content", field), field + ".content");
            d.decoders.push_back(std::move(step));
        } else {
            fail(ErrorKind::kUnsupported, field + ".type", "decoder '" + type + "' is not supported");
        }
    }

    void model(const json& m, TokenizerData& d) {
        // Older files omit model.type for BPE; a file with merges is a BPE.
        std::string type = m.is_object() && m.contains("type") ? type_of(m, "model") : "BPE";
        if (type != "BPE")
            fail(ErrorKind::kUnsupported, "model.type", "model '" + type + "' is not supported");
        if (m.contains("dropout") && !m.at("dropout").is_null() && m.at("dropout").get<double>() != 0.0) {
            fail(ErrorKind::kUnsupported, "model.dropout", "BPE dropout (training only)");
        }
        const json& vocab = member(m, "vocab", "model");
        if (!vocab.is_object()) fail(ErrorKind::kFormat, "model.vocab", "expected an object {token: id}");
        d.vocab.reserve(vocab.size());
        int32_t max_id = -1;
        for (auto it = vocab.begin(); it != vocab.end(); ++it) {
            if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 ||
                it.value().get<int64_t>() >= (int64_t{1} << 28)) {
                fail(ErrorKind::kFormat, "model.vocab['" + it.key() + "']",
                     "id " + it.value().dump() + " out of range");
            }
            auto id = static_cast<int32_t>(it.value().get<int64_t>());
            d.vocab[it.key()] = id;
            max_id = std::max(max_id, id);
        }
        d.model_tokens.assign(static_cast<size_t>(max_id + 1), std::string());
        d.has_model_token.assign(static_cast<size_t>(max_id + 1), 0);
        for (const auto& [token, id] : d.vocab) {
            d.model_tokens[id] = token;
            d.has_model_token[id] = 1;
        }

        std::vector<std::pair<std::string, std::string>> merges;
        const json& list = member(m, "merges", "model");
        if (!list.is_array()) fail(ErrorKind::kFormat, "model.merges", "expected a list");
        merges.reserve(list.size());
        for (size_t i = 0; i < list.size(); ++i) {
            const json& entry = list[i];
            std::string field = "model.merges[" + std::to_string(i) + "]";
            if (entry.is_string()) {  // "a b"
                const std::string& s = entry.get_ref<const std::string&>();
                size_t space = s.find(' ');
                if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
                    fail(ErrorKind::kFormat, field, "'" + s + "' is not two tokens separated by one space");
                }
                merges.emplace_back(s.substr(0, space), s.substr(space + 1));
            } else if (entry.is_array() && entry.size() == 2) {  // ["a", "b"]
                merges.emplace_back(string_of(entry[0], field), string_of(entry[1], field));
            } else {
                fail(ErrorKind::kFormat, field, "expected \"a b\" or [\"a\", \"b\"]");
            }
        }

        Bpe::Options options;
        if (m.contains("unk_token") && !m.at("unk_token").is_null()) {
            options.unk_token = string_of(m.at("unk_token"), "model.unk_token");
        }
        auto optional_string = [&](const char* key) {
            return m.contains(key) && !m.at(key).is_null() ? string_of(m.at(key), std::string("model.") + key)
                                                           : "";
        };
        options.continuing_subword_prefix = optional_string("continuing_subword_prefix");
        options.end_of_word_suffix = optional_string("end_of_word_suffix");
        options.fuse_unk = flag(m, "fuse_unk", false, "model");
        options.byte_fallback = flag(m, "byte_fallback", false, "model");
        options.ignore_merges = flag(m, "ignore_merges", false, "model");
        options.byte_level =
            !d.pre_tokenizers.empty() && d.pre_tokenizers.back().kind == PreTokenizerStep::Kind::kByteLevel;
        d.bpe.build(d.vocab, merges, std::move(options), source_);
    }

    // HF re-adds the listed tokens on load (AddedVocabulary::add_tokens): a token already in the model
    // vocabulary keeps its id, any other takes the next id after the model vocabulary / previous ones.
    void added_tokens(const json& list, TokenizerData& d) {
        if (list.is_null()) return;
        if (!list.is_array()) fail(ErrorKind::kFormat, "added_tokens", "expected a list");
        auto model_size = static_cast<int64_t>(d.vocab.size());
        int64_t max_added = -1;
        for (size_t i = 0; i < list.size(); ++i) {
            const json& t = list[i];
            std::string field = "added_tokens[" + std::to_string(i) + "]";
            AddedToken token;
            token.content = string_of(member(t, "content", field), field + ".content");
            token.single_word = flag(t, "single_word", false, field);
            token.lstrip = flag(t, "lstrip", false, field);
            token.rstrip = flag(t, "rstrip", false, field);
            token.special = flag(t, "special", false, field);
            token.normalized = flag(t, "normalized", !token.special, field);
            if (token.content.empty()) continue;
            int32_t id;
            if (auto it = d.added_by_content.find(token.content); it != d.added_by_content.end()) {
                id = it->second;
            } else if (auto v = d.vocab.find(token.content); v != d.vocab.end()) {
                id = v->second;
            } else {
                int64_t next =
                    max_added < 0 ? model_size : (max_added >= model_size ? max_added + 1 : model_size);
                id = static_cast<int32_t>(next);
            }
            max_added = std::max<int64_t>(max_added, id);
            if (token.special) d.special_contents.insert(token.content);
            d.added_by_content[token.content] = id;
            d.added_by_id[id] = std::move(token);
        }
        for (const auto& [id, token] : d.added_by_id) {
            std::string pattern = token.content;
            if (token.normalized && !d.normalizers.empty()) {
                pattern = d.normalize(token.content);
                if (pattern != token.content) d.added_normalized[id] = pattern;
            }
            (token.normalized ? d.normalized_trie : d.raw_trie).add(pattern, id);
            d.has_single_word |= token.single_word;
        }
    }

private:
    std::string source_;
};

// Splits segments (text, or an added token's id) at the added tokens found by trie, with HF's
// AddedVocabulary::find_matches rules for single_word, lstrip and rstrip.
struct Segment {
    std::string_view text;
    int32_t id;  // -1: text still to tokenize
};

uint32_t last_char(std::string_view s) {
    size_t back = s.size() - 1;
    while (back > 0 && (static_cast<uint8_t>(s[back]) & 0xC0) == 0x80) --back;
    size_t len;
    return decode_utf8(s, back, &len);
}

void split_added(const TokenizerData& d, const TokenTrie& trie, bool parse_special, std::string_view text,
                 std::vector<Segment>& out) {
    size_t start_offset = 0, from = 0;
    size_t start, end;
    int32_t id;
    while (from < text.size() && trie.find(text, from, &start, &end, &id)) {
        from = end;
        const AddedToken& token = d.added_by_id.at(id);
        if (!parse_special && token.special) continue;
        if (token.single_word) {
            size_t len;
            bool start_space = start == 0 || !is_word_char(last_char(text.substr(0, start)));
            bool stop_space = end == text.size() || !is_word_char(decode_utf8(text, end, &len));
            if (!start_space || !stop_space) continue;
        }
        if (token.lstrip) {
            size_t s = start;
            while (s > 0) {
                size_t back = s - 1;
                while (back > 0 && (static_cast<uint8_t>(text[back]) & 0xC0) == 0x80) --back;
                size_t len;
                if (!is_white_space(decode_utf8(text, back, &len))) break;
                s = back;
            }
            start = std::max(s, start_offset);
        }
        if (token.rstrip) {
            size_t len;
            while (end < text.size() && is_white_space(decode_utf8(text, end, &len))) end += len;
        }
        if (start_offset < start) out.push_back({text.substr(start_offset, start - start_offset), -1});
        out.push_back({text.substr(start, end - start), id});
        start_offset = end;
    }
    if (start_offset < text.size()) out.push_back({text.substr(start_offset), -1});
}

}  // namespace

Tokenizer Tokenizer::from_json(std::string_view json_text, const std::string& source) {
    json root;
    try {
        root = json::parse(json_text);
    } catch (const json::exception& e) {
        throw Error(ErrorKind::kFormat, source + ": not valid JSON: " + e.what());
    }
    auto data = std::make_shared<TokenizerData>();
    data->source = source;
    Loader loader(source);
    if (!root.is_object()) loader.fail(ErrorKind::kFormat, "top level", "expected a JSON object");
    try {
        loader.normalizer(root.value("normalizer", json()), "normalizer", *data);
        loader.pre_tokenizer(root.value("pre_tokenizer", json()), "pre_tokenizer", *data);
        loader.decoder(root.value("decoder", json()), "decoder", *data);
        loader.model(loader.member(root, "model", "top level"), *data);
        loader.added_tokens(root.value("added_tokens", json()), *data);
    } catch (const json::exception& e) {  // a field of the wrong JSON type deep inside
        throw Error(ErrorKind::kFormat, source + ": unexpected value: " + e.what());
    }

    int32_t size = static_cast<int32_t>(data->model_tokens.size());
    for (const auto& [id, token] : data->added_by_id) size = std::max(size, id + 1);
    data->vocab_size = size;
    data->special_by_id.assign(static_cast<size_t>(size), 0);
    const bool byte_level_only =
        data->decoders.size() == 1 && data->decoders[0].kind == DecoderStep::Kind::kByteLevel;
    if (byte_level_only) data->byte_level_bytes.resize(static_cast<size_t>(size));
    for (int32_t id = 0; id < size; ++id) {
        auto token = data->id_to_token(id);
        data->special_by_id[id] = token && data->special_contents.count(*token) ? 1 : 0;
        if (byte_level_only && token) {
            auto raw = byte_level_decode(*token);
            data->byte_level_bytes[id] = raw ? std::move(*raw) : *token;
        }
    }
    return Tokenizer(std::move(data));
}

Tokenizer Tokenizer::load(const std::string& path) {
    std::filesystem::path file(path);
    std::error_code ec;
    if (std::filesystem::is_directory(file, ec)) file /= "tokenizer.json";
    std::ifstream in(file, std::ios::binary);
    if (!in) throw Error(ErrorKind::kIo, file.string() + ": cannot open tokenizer file");
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) throw Error(ErrorKind::kIo, file.string() + ": read error");
    return from_json(text.str(), file.string());
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
    const TokenizerData& d = *data_;
    std::string sanitized;
    if (!is_valid_utf8(text)) {
        append_utf8_lossy(text, true, sanitized);
        text = sanitized;
    }
    std::vector<Segment> raw_segments;
    if (d.raw_trie.empty()) {
        raw_segments.push_back({text, -1});
    } else {
        split_added(d, d.raw_trie, parse_special, text, raw_segments);
    }

    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3 + 4);
    std::vector<std::unique_ptr<std::string>> arena;
    std::vector<Segment> segments;
    std::vector<std::string_view> pieces;
    for (const Segment& raw : raw_segments) {
        if (raw.id >= 0) {
            ids.push_back(raw.id);
            continue;
        }
        std::string_view normalized = raw.text;
        if (!d.normalizers.empty()) {
            arena.push_back(std::make_unique<std::string>(d.normalize(raw.text)));
            normalized = *arena.back();
        }
        segments.clear();
        if (d.normalized_trie.empty()) {
            segments.push_back({normalized, -1});
        } else {
            split_added(d, d.normalized_trie, parse_special, normalized, segments);
        }
        for (const Segment& segment : segments) {
            if (segment.id >= 0) {
                ids.push_back(segment.id);
                continue;
            }
            d.pre_tokenize(segment.text, pieces, arena);
            for (std::string_view piece : pieces) d.bpe.tokenize(piece, ids);
        }
    }
    return ids;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
    const TokenizerData& d = *data_;
    if (!d.byte_level_bytes.empty()) {  // ByteLevel alone: concatenate the bytes, then repair UTF-8
        std::string bytes;
        for (int32_t id : ids) {
            if (id < 0 || id >= d.vocab_size || (skip_special && d.special_by_id[id])) continue;
            bytes += d.byte_level_bytes[id];
        }
        std::string text;
        text.reserve(bytes.size());
        append_utf8_lossy(bytes, true, text);
        return text;
    }
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (int32_t id : ids) {
        auto token = d.id_to_token(id);
        if (!token) continue;
        if (skip_special && d.special_contents.count(*token)) continue;
        tokens.push_back(std::move(*token));
    }
    return d.run_decoders(std::move(tokens));
}

std::string Tokenizer::token_bytes(int32_t id) const {
    const TokenizerData& d = *data_;
    if (!d.byte_level_bytes.empty())
        return id >= 0 && id < d.vocab_size ? d.byte_level_bytes[id] : std::string();
    auto token = d.id_to_token(id);
    if (!token) return {};
    std::string s = std::move(*token);
    // The per-token part of the decoder chain, without the final UTF-8 repair (the bytes may be a
    // fragment of a character) and without sequence-level steps (Fuse joins, Strip trims each token
    // in HF but its purpose is the sequence start).
    for (const auto& step : d.decoders) {
        if (step.kind == DecoderStep::Kind::kByteLevel) {
            if (auto raw = byte_level_decode(s)) s = std::move(*raw);
        } else if (step.kind == DecoderStep::Kind::kByteFallback) {
            if (s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>' &&
                std::isxdigit(static_cast<unsigned char>(s[3])) &&
                std::isxdigit(static_cast<unsigned char>(s[4]))) {
                s = std::string(1, static_cast<char>(std::stoi(s.substr(3, 2), nullptr, 16)));
            }
        } else if (step.kind == DecoderStep::Kind::kReplace && !step.pattern.empty()) {
            std::string out;
            size_t pos = 0;
            for (size_t hit; (hit = s.find(step.pattern, pos)) != std::string::npos;
                 pos = hit + step.pattern.size()) {
                out.append(s, pos, hit - pos);
                out += step.content;
            }
            out.append(s, pos, std::string::npos);
            s = std::move(out);
        }
    }
    return s;
}

std::optional<std::string> Tokenizer::token_string(int32_t id) const {
    return data_->id_to_token(id);
}

int32_t Tokenizer::vocab_size() const {
    return data_->vocab_size;
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
    std::string key(token);
    if (auto it = data_->added_by_content.find(key); it != data_->added_by_content.end()) return it->second;
    if (auto it = data_->vocab.find(key); it != data_->vocab.end()) return it->second;
    return std::nullopt;
}

bool Tokenizer::is_special(int32_t id) const {
    return id >= 0 && id < data_->vocab_size && data_->special_by_id[id] != 0;
}

std::string StreamDecoder::push(int32_t id) {
    if (skip_special_ && tokenizer_->is_special(id)) return {};
    pending_ += tokenizer_->token_bytes(id);
    std::string out;
    size_t used = append_utf8_lossy(pending_, false, out);
    pending_.erase(0, used);
    return out;
}

std::string StreamDecoder::flush() {
    std::string out;
    append_utf8_lossy(pending_, true, out);
    pending_.clear();
    return out;
}

}  // namespace surf::model
