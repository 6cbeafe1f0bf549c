// Tokenizer parity with HF `tokenizers` (fixtures from tests/reference/make_tokenizer_fixture.py), the
// streaming decoder, and bad input.
#include <doctest/doctest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "base/error.h"
#include "model/text/tokenizer.h"

using nlohmann::json;
using surf::Error;
using surf::ErrorKind;
using surf::model::StreamDecoder;
using surf::model::Tokenizer;

namespace {

std::string fixture_dir(const std::string& name) {
    return std::string(SURF_FIXTURES_DIR) + "/tokenizer/" + name;
}

json read_json(const std::string& path) {
    std::ifstream in(path);
    REQUIRE_MESSAGE(in.good(), "missing fixture " << path);
    return json::parse(in);
}

std::string show_ids(const std::vector<int32_t>& ids) {
    std::ostringstream out;
    for (size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
    return out.str();
}

// GPT-2's printable stand-in for a byte: printable Latin-1 stands for itself, the rest take U+0100.. in
// order.
std::string byte_stand_in(uint8_t byte) {
    auto visible = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); };
    uint32_t cp = byte;
    if (!visible(byte)) {
        cp = 256;
        for (int b = 0; b < byte; ++b) cp += visible(b) ? 0 : 1;
    }
    std::string out;
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    return out;
}

bool valid_utf8(const std::string& s) {
    for (size_t i = 0; i < s.size();) {
        auto c = static_cast<uint8_t>(s[i]);
        int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (n == 0 || i + n > s.size()) return false;
        for (int k = 1; k < n; ++k) {
            if ((static_cast<uint8_t>(s[i + k]) & 0xC0) != 0x80) return false;
        }
        i += n;
    }
    return true;
}

// Every encode / decode case of one fixture; returns the number of encode strings checked.
size_t check_parity(const std::string& name) {
    Tokenizer tok = Tokenizer::load(fixture_dir(name) + "/tokenizer.json");
    json cases = read_json(fixture_dir(name) + "/cases.json");
    CHECK(tok.vocab_size() == cases["vocab_size"].get<int32_t>());
    size_t failures = 0;
    for (const auto& c : cases["encode"]) {
        const std::string text = c["text"];
        const auto want = c["ids"].get<std::vector<int32_t>>();
        const auto want_plain = c["ids_no_special"].get<std::vector<int32_t>>();
        const auto got = tok.encode(text);
        const auto got_plain = tok.encode(text, /*parse_special=*/false);
        const std::string decoded = tok.decode(want);
        const std::string decoded_skip = tok.decode(want, /*skip_special=*/true);
        bool ok = got == want && got_plain == want_plain && decoded == c["decoded"].get<std::string>() &&
                  decoded_skip == c["decoded_skip_special"].get<std::string>();
        if (!ok && ++failures <= 5) {
            MESSAGE(name << " mismatch on " << json(text).dump() << "\n  want " << show_ids(want)
                         << "\n  got  " << show_ids(got) << "\n  plain want " << show_ids(want_plain)
                         << "\n  plain got  " << show_ids(got_plain) << "\n  decoded " << json(decoded).dump()
                         << " want " << c["decoded"].dump() << "\n  skip " << json(decoded_skip).dump()
                         << " want " << c["decoded_skip_special"].dump());
        }
    }
    for (const auto& c : cases["decode"]) {
        const auto ids = c["ids"].get<std::vector<int32_t>>();
        bool ok = tok.decode(ids) == c["decoded"].get<std::string>() &&
                  tok.decode(ids, true) == c["decoded_skip_special"].get<std::string>();
        if (!ok && ++failures <= 5) {
            MESSAGE(name << " decode mismatch on " << show_ids(ids) << ": " << json(tok.decode(ids)).dump()
                         << " want " << c["decoded"].dump());
        }
    }
    CHECK_MESSAGE(failures == 0, failures << " mismatching cases in " << name);
    return cases["encode"].size();
}

std::string stream_all(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special,
                       bool* pieces_ok) {
    StreamDecoder stream(tok, skip_special);
    std::string out;
    *pieces_ok = true;
    for (int32_t id : ids) {
        std::string piece = stream.push(id);
        *pieces_ok = *pieces_ok && valid_utf8(piece);
        out += piece;
    }
    std::string rest = stream.flush();
    *pieces_ok = *pieces_ok && valid_utf8(rest);
    return out + rest;
}

struct TempDir {
    std::filesystem::path path;
    TempDir() {
        path = std::filesystem::temp_directory_path() /
               ("surf_tok_test_" + std::to_string(std::random_device{}()));
        std::filesystem::create_directories(path);
    }
    ~TempDir() { std::filesystem::remove_all(path); }
    std::string write(const std::string& name, const std::string& text) const {
        std::ofstream(path / name, std::ios::binary) << text;
        return (path / name).string();
    }
};

// A valid minimal tokenizer.json with one field replaced, for the bad-input tests.
json minimal_tokenizer() {
    return json::parse(R"({
      "version": "1.0", "added_tokens": [], "normalizer": null,
      "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
      "decoder": {"type": "ByteLevel"},
      "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]]}
    })");
}

template <typename Fn>
void check_error(Fn&& fn, ErrorKind kind, const std::vector<std::string>& words) {
    try {
        fn();
        FAIL("no error thrown; expected one mentioning " << words.front());
    } catch (const Error& e) {
        CHECK(e.kind() == kind);
        const std::string message = e.what();
        for (const auto& w : words) CHECK_MESSAGE(message.find(w) != std::string::npos, message);
    }
}

}  // namespace

TEST_CASE("tokenizer: exact parity with HF on the Tekken-style tokenizer (>= 2000 strings)") {
    CHECK(check_parity("tekken_like") >= 2000);
}

TEST_CASE(
    "tokenizer: parity with HF for ByteLevel regex, ignore_merges, string merges and added-token flags") {
    check_parity("gpt2_like");
}

TEST_CASE("tokenizer: parity with HF for char-level BPE with byte fallback, unk and Replace/Strip decoders") {
    check_parity("fallback_like");
}

TEST_CASE("tokenizer: special and added tokens, token bytes") {
    Tokenizer tok = Tokenizer::load(fixture_dir("tekken_like"));  // a folder works too
    REQUIRE(tok.token_id("<image>").has_value());
    const int32_t image = *tok.token_id("<image>");
    CHECK(tok.is_special(image));
    CHECK(tok.is_special(*tok.token_id("<SPECIAL_12>")));
    CHECK(*tok.token_id("<SPECIAL_12>") == 12);
    CHECK(*tok.token_id("</s>") == 2);
    CHECK_FALSE(tok.is_special(*tok.token_id("<think>")));
    CHECK_FALSE(tok.token_id("no-such-token-xyz").has_value());
    CHECK_FALSE(tok.is_special(-1));
    CHECK_FALSE(tok.is_special(tok.vocab_size()));

    std::string prompt = "<img>";
    for (int i = 0; i < 256; ++i) prompt += "<image>";
    prompt += "</img>";
    auto ids = tok.encode(prompt);
    REQUIRE(ids.size() == 258);
    CHECK(std::count(ids.begin(), ids.end(), image) == 256);

    // Byte-level tokens stand for raw bytes, which may be a fragment of a character.
    CHECK(tok.token_bytes(*tok.token_id("\xC3\x83")) == "\xC3");  // "Ã" is the stand-in for byte 0xC3
    CHECK(tok.token_bytes(*tok.token_id("\xC4\xA0")) == " ");     // "Ġ" is the stand-in for a space
    CHECK(tok.token_bytes(image) == "<image>");
    CHECK(tok.token_bytes(-5).empty());
    CHECK(tok.decode({-5, 1 << 30}).empty());  // unknown ids are dropped, as HF does

    // Invalid UTF-8 input reads as U+FFFD.
    CHECK(tok.encode("a\xFF"
                     "b\xE4\xB8") == tok.encode("a\xEF\xBF\xBD"
                                                "b\xEF\xBF\xBD"));
}

TEST_CASE("tokenizer: StreamDecoder never splits a character and matches decode") {
    Tokenizer tok = Tokenizer::load(fixture_dir("tekken_like") + "/tokenizer.json");
    const int32_t c3 = *tok.token_id("\xC3\x83");  // byte 0xC3
    const int32_t a9 = *tok.token_id("\xC2\xA9");  // byte 0xA9 ("©" stands for itself)
    const int32_t letter_a = *tok.token_id("a");
    StreamDecoder stream(tok);
    CHECK(stream.push(c3).empty());  // first byte of "é" is held
    CHECK(stream.push(a9) == "\xC3\xA9");
    CHECK(stream.push(c3).empty());
    CHECK(stream.push(letter_a) ==
          "\xEF\xBF\xBD"
          "a");  // the sequence broke: U+FFFD, like decode
    CHECK(stream.push(c3).empty());
    CHECK(stream.flush() == "\xEF\xBF\xBD");

    // Every corpus string, token by token, and the same with 4-byte emoji split byte by byte.
    json cases = read_json(fixture_dir("tekken_like") + "/cases.json");
    size_t failures = 0;
    for (const auto& c : cases["encode"]) {
        const auto ids = c["ids"].get<std::vector<int32_t>>();
        bool pieces_ok;
        std::string streamed = stream_all(tok, ids, false, &pieces_ok);
        bool ok = pieces_ok && streamed == c["decoded"].get<std::string>();
        std::string skipped = stream_all(tok, ids, true, &pieces_ok);
        ok = ok && pieces_ok && skipped == c["decoded_skip_special"].get<std::string>();
        if (!ok && ++failures <= 3)
            MESSAGE("stream mismatch on " << c["text"].dump() << ": " << json(streamed).dump());
    }
    for (const auto& c : cases["decode"]) {  // random ids: broken UTF-8 everywhere
        bool pieces_ok;
        std::string streamed = stream_all(tok, c["ids"].get<std::vector<int32_t>>(), false, &pieces_ok);
        if (!(pieces_ok && streamed == c["decoded"].get<std::string>()) && ++failures <= 3) {
            MESSAGE("stream mismatch on ids " << c["ids"].dump());
        }
    }
    CHECK(failures == 0);

    std::string emoji = "\xF0\x9F\x98\x80";  // U+1F600
    std::vector<int32_t> bytes;
    for (char b : emoji) bytes.push_back(*tok.token_id(byte_stand_in(static_cast<uint8_t>(b))));
    StreamDecoder split(tok);
    CHECK(split.push(bytes[0]).empty());
    CHECK(split.push(bytes[1]).empty());
    CHECK(split.push(bytes[2]).empty());
    CHECK(split.push(bytes[3]) == emoji);
    CHECK(split.flush().empty());
}

TEST_CASE("tokenizer: concurrent encodes share the word cache safely") {
    Tokenizer tok = Tokenizer::load(fixture_dir("tekken_like") + "/tokenizer.json");
    json cases = read_json(fixture_dir("tekken_like") + "/cases.json");
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            for (size_t i = t; i < cases["encode"].size(); i += 2) {  // overlapping halves
                const auto& c = cases["encode"][i];
                if (tok.encode(c["text"].get<std::string>()) != c["ids"].get<std::vector<int32_t>>())
                    ++failures;
            }
        });
    }
    for (auto& thread : threads) thread.join();
    CHECK(failures.load() == 0);
}

TEST_CASE("tokenizer: long and pathological inputs round-trip without crashing") {
    Tokenizer tok = Tokenizer::load(fixture_dir("tekken_like") + "/tokenizer.json");
    for (const std::string& text : {std::string(200000, 'a'), std::string(100000, ' '),
                                    std::string(50000, '\n'), std::string(30000, '<')}) {
        CHECK(tok.decode(tok.encode(text)) == text);
    }
    std::string mixed;
    std::mt19937 rng(3);
    for (int i = 0; i < 20000; ++i) mixed.push_back(static_cast<char>(rng() % 96 + 32));
    CHECK(tok.decode(tok.encode(mixed)) == mixed);

    // Random byte strings (mostly invalid UTF-8, fragments of special tokens): byte-level BPE is lossless
    // on valid text, and invalid bytes read as U+FFFD, so the round trip is the lossy reading of the input.
    const std::string alphabet[] = {"a",          " ",        "\n",   "<",    ">",
                                    "s",          "/",        "\xC3", "\xA9", "\xE4\xB8\xAD",
                                    "\xF0\x9F",   "\x98\x80", "\xFF", "\x80", "<image>",
                                    "<SPECIAL_1", "1>",       "\t",   "\r",   std::string("\0", 1)};
    size_t mismatches = 0;
    for (int i = 0; i < 3000; ++i) {
        std::string text;
        for (int k = static_cast<int>(rng() % 24); k > 0; --k) text += alphabet[rng() % std::size(alphabet)];
        std::string lossy = tok.decode(tok.encode(text, false), false);
        if (valid_utf8(text) ? lossy != text : !valid_utf8(lossy)) ++mismatches;
        if (tok.decode(tok.encode(text)) != lossy) ++mismatches;
    }
    CHECK(mismatches == 0);
}

TEST_CASE("tokenizer: bad input gives errors naming the file and field") {
    TempDir dir;
    check_error([&] { Tokenizer::load((dir.path / "nope.json").string()); }, ErrorKind::kIo, {"nope.json"});
    check_error([&] { Tokenizer::load(dir.path.string()); }, ErrorKind::kIo, {"tokenizer.json"});

    std::string broken = dir.write("broken.json", "{\"model\": {\"vocab\": {\"a\": 0,");
    check_error([&] { Tokenizer::load(broken); }, ErrorKind::kFormat, {"broken.json", "JSON"});

    json unigram = minimal_tokenizer();
    unigram["model"]["type"] = "Unigram";
    std::string path = dir.write("unigram.json", unigram.dump());
    check_error([&] { Tokenizer::load(path); }, ErrorKind::kUnsupported,
                {"unigram.json", "model.type", "Unigram"});

    json meta = minimal_tokenizer();
    meta["pre_tokenizer"] = json::parse(R"({"type": "Sequence", "pretokenizers": [{"type": "Metaspace"}]})");
    check_error([&] { Tokenizer::from_json(meta.dump(), "meta.json"); }, ErrorKind::kUnsupported,
                {"meta.json", "pre_tokenizer.pretokenizers[0]", "Metaspace"});

    json nfc = minimal_tokenizer();
    nfc["normalizer"] = json::parse(R"({"type": "NFKC"})");
    check_error([&] { Tokenizer::from_json(nfc.dump(), "nfc.json"); }, ErrorKind::kUnsupported, {"NFKC"});

    json wordpiece_decoder = minimal_tokenizer();
    wordpiece_decoder["decoder"] = json::parse(R"({"type": "WordPiece", "prefix": "##"})");
    check_error([&] { Tokenizer::from_json(wordpiece_decoder.dump(), "d.json"); }, ErrorKind::kUnsupported,
                {"decoder", "WordPiece"});

    json bad_merge = minimal_tokenizer();
    bad_merge["model"]["merges"] = json::parse(R"([["a", "zz"]])");
    check_error([&] { Tokenizer::from_json(bad_merge.dump(), "m.json"); }, ErrorKind::kFormat,
                {"m.json", "model.merges[0]"});

    json bad_merge_string = minimal_tokenizer();
    bad_merge_string["model"]["merges"] = json::parse(R"(["ab"])");
    check_error([&] { Tokenizer::from_json(bad_merge_string.dump(), "m.json"); }, ErrorKind::kFormat,
                {"model.merges[0]"});

    json no_model = minimal_tokenizer();
    no_model.erase("model");
    check_error([&] { Tokenizer::from_json(no_model.dump(), "x.json"); }, ErrorKind::kFormat,
                {"x.json", "model"});

    json bad_vocab = minimal_tokenizer();
    bad_vocab["model"]["vocab"]["c"] = "three";
    check_error([&] { Tokenizer::from_json(bad_vocab.dump(), "v.json"); }, ErrorKind::kFormat,
                {"model.vocab['c']"});

    json bad_regex = minimal_tokenizer();
    bad_regex["pre_tokenizer"] = json::parse(
        R"({"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated", "invert": false})");
    check_error([&] { Tokenizer::from_json(bad_regex.dump(), "r.json"); }, ErrorKind::kFormat,
                {"r.json", "pre_tokenizer.pattern", "(unclosed"});

    json bad_unk = minimal_tokenizer();
    bad_unk["model"]["unk_token"] = "<unk>";
    check_error([&] { Tokenizer::from_json(bad_unk.dump(), "u.json"); }, ErrorKind::kFormat,
                {"model.unk_token"});

    // The minimal file itself loads and merges.
    Tokenizer tok = Tokenizer::from_json(minimal_tokenizer().dump(), "minimal");
    CHECK(tok.encode("ab") == std::vector<int32_t>{2});
    CHECK(tok.vocab_size() == 3);
}
