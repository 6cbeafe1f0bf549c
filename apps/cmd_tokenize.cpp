// `surf tokenize`: encode text to ids (or decode ids to text) with a checkpoint's tokenizer.json.
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "apps/cli.h"
#include "base/error.h"
#include "model/text/tokenizer.h"

namespace {

// Printable form of raw token bytes: escapes for control characters and bytes of unfinished characters.
std::string show_bytes(const std::string& bytes) {
    std::string out;
    for (size_t i = 0; i < bytes.size(); ++i) {
        auto c = static_cast<unsigned char>(bytes[i]);
        char buf[8];
        if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c < 0x20 || c == 0x7f) {
            std::snprintf(buf, sizeof(buf), "\\x%02x", c);
            out += buf;
        } else if (c < 0x80) {
            out.push_back(static_cast<char>(c));
        } else {
            // Keep complete UTF-8 characters, escape stray bytes.
            int n = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
            bool complete = n > 0 && i + n <= bytes.size();
            for (int k = 1; complete && k < n; ++k) {
                complete = (static_cast<unsigned char>(bytes[i + k]) & 0xC0) == 0x80;
            }
            if (complete) {
                out.append(bytes, i, n);
                i += n - 1;
            } else {
                std::snprintf(buf, sizeof(buf), "\\x%02x", c);
                out += buf;
            }
        }
    }
    return out;
}

std::vector<int32_t> parse_ids(const std::string& text) {
    std::vector<int32_t> ids;
    std::string word;
    std::istringstream in(text);
    while (in >> word) {
        for (char& c : word) {
            if (c == ',') c = ' ';
        }
        std::istringstream parts(word);
        std::string part;
        while (parts >> part) {
            char* end = nullptr;
            long long value = std::strtoll(part.c_str(), &end, 10);
            if (*end != '\0' || value < 0 || value > INT32_MAX) {
                throw surf::Error(surf::ErrorKind::kInvalidArgument,
                                  "--decode: '" + part + "' is not a token id");
            }
            ids.push_back(static_cast<int32_t>(value));
        }
    }
    return ids;
}

int run_tokenize(const surf::cli::Args& args) {
    const auto tokenizer = surf::model::Tokenizer::load(args.require("tokenizer"));
    const bool special = !args.has("no-special");
    const bool verbose = args.has("verbose");
    int sources = args.has("text") + args.has("file") + args.has("decode");
    if (sources != 1) {
        throw surf::Error(surf::ErrorKind::kInvalidArgument,
                          "give exactly one of --text, --file or --decode");
    }
    if (args.has("decode")) {
        const auto ids = parse_ids(args.get("decode"));
        for (int32_t id : ids) {
            if (id >= tokenizer.vocab_size()) {
                throw surf::Error(surf::ErrorKind::kInvalidArgument,
                                  "--decode: id " + std::to_string(id) + " is past the vocabulary (size " +
                                      std::to_string(tokenizer.vocab_size()) + ")");
            }
        }
        std::printf("%s\n", tokenizer.decode(ids, /*skip_special=*/!special).c_str());
        return 0;
    }
    std::string text = args.get("text");
    if (args.has("file")) {
        std::ifstream in(args.get("file"), std::ios::binary);
        if (!in) throw surf::Error(surf::ErrorKind::kIo, args.get("file") + ": cannot open");
        std::ostringstream content;
        content << in.rdbuf();
        text = content.str();
    }
    const auto ids = tokenizer.encode(text, special);
    if (verbose) {
        for (int32_t id : ids) {
            // Pad by characters, not bytes, so columns line up for non-ASCII token strings.
            std::string piece = tokenizer.token_string(id).value_or("?");
            size_t width = 0;
            for (char c : piece) width += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
            piece += std::string(width < 24 ? 24 - width : 1, ' ');
            std::printf("%8d  %s  \"%s\"%s\n", id, piece.c_str(),
                        show_bytes(tokenizer.token_bytes(id)).c_str(),
                        tokenizer.is_special(id) ? "  (special)" : "");
        }
        std::printf("%zu tokens, %zu bytes\n", ids.size(), text.size());
        return 0;
    }
    for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? " " : "", ids[i]);
    std::printf("\n");
    return 0;
}

SURF_COMMAND(surf::cli::Command{
    "tokenize",
    "Encode text to token ids, or decode ids to text, with a Hugging Face tokenizer.json.",
    "--tokenizer PATH (--text TEXT | --file F | --decode \"1 2 3\") [--no-special] [--verbose]",
    {
        {"tokenizer", "PATH", "tokenizer.json, or a checkpoint folder holding one"},
        {"text", "TEXT", "text to encode"},
        {"file", "F", "encode the contents of a file"},
        {"decode", "IDS", "decode these ids (separated by spaces or commas)"},
        {"no-special", "", "encode special tokens as plain text; when decoding, drop special tokens"},
        {"verbose", "", "print one token per line: id, token string, the bytes it stands for"},
    },
    run_tokenize});

}  // namespace
