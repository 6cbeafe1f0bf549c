// Tokenizer throughput: MB/s of text encoded (and decoded) on one core.
//
//   bench_tokenizer TOKENIZER_JSON [TEXT_FILE] [--mb N] [--repeat R]
//
// Without TEXT_FILE it generates N MB (default 8) of English-like prose from a fixed seed. The first pass
// starts with an empty word cache ("cold"); later passes show the steady state of a long-running engine.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/text/tokenizer.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The words of generate_text's prose, most frequent first (their weights fall as 1/rank).
constexpr const char* kProseWords =
    "the of and to a in is it you that he was for on are with as his they be at one have this from "
    "or had by not word but what some we can out other were all there when up use your how said an "
    "each she which do their time if will way about many then them write would like so these her "
    "long make thing see him two has look more day could go come did number sound no most people my "
    "over know water than call first who may down side been now find browser page click button "
    "search results website information government international development understanding "
    "responsibility approximately screenshot navigation application configuration performance "
    "significantly environment particularly organization technology relationship experience";

// kProseWords split at the spaces.
std::vector<std::string> prose_words() {
    std::vector<std::string> words;
    std::istringstream in(kProseWords);
    for (std::string w; in >> w;) words.push_back(w);
    return words;
}

// English-like prose: common words with a Zipf-like frequency, capitals, punctuation, numbers, paragraphs.
std::string generate_text(size_t bytes) {
    const std::vector<std::string> words = prose_words();
    const size_t n = words.size();
    std::mt19937 rng(12345);
    std::vector<double> weights(n);
    for (size_t i = 0; i < n; ++i) weights[i] = 1.0 / static_cast<double>(i + 1);
    std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
    std::uniform_int_distribution<int> sentence_len(4, 24), percent(0, 99), number(0, 9999);
    std::string text;
    text.reserve(bytes + 256);
    while (text.size() < bytes) {
        int len = sentence_len(rng);
        for (int w = 0; w < len; ++w) {
            std::string word = words[pick(rng)];
            if (w == 0) word[0] = static_cast<char>(word[0] - 'a' + 'A');
            if (percent(rng) < 3) word = std::to_string(number(rng));
            text += word;
            int p = percent(rng);
            text += w + 1 == len ? (p < 80 ? ". " : p < 90 ? "? " : "! ") : (p < 8 ? ", " : " ");
        }
        if (percent(rng) < 15) text += "\n\n";
    }
    return text;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> positional;
    double megabytes = 8.0;
    int repeat = 3;
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg == "--mb" && i + 1 < argc) {
            megabytes = std::atof(argv[++i]);
        } else if (arg == "--repeat" && i + 1 < argc) {
            repeat = std::max(1, std::atoi(argv[++i]));
        } else {
            positional.push_back(arg);
        }
    }
    if (positional.empty() || positional.size() > 2) {
        std::fprintf(stderr, "usage: bench_tokenizer TOKENIZER_JSON [TEXT_FILE] [--mb N] [--repeat R]\n");
        return 2;
    }
    try {
        auto start = std::chrono::steady_clock::now();
        const auto tokenizer = surf::model::Tokenizer::load(positional[0]);
        std::printf("load: %.3f s, vocab %d\n", seconds_since(start), tokenizer.vocab_size());

        std::string text;
        if (positional.size() == 2) {
            std::ifstream in(positional[1], std::ios::binary);
            if (!in) throw surf::Error(surf::ErrorKind::kIo, positional[1] + ": cannot open");
            std::ostringstream content;
            content << in.rdbuf();
            text = content.str();
            std::printf("text: %s, %.2f MB\n", positional[1].c_str(), text.size() / 1e6);
        } else {
            text = generate_text(static_cast<size_t>(megabytes * 1e6));
            std::printf("text: generated English-like prose, %.2f MB\n", text.size() / 1e6);
        }
        // Encode in paragraph-sized requests, as prompts arrive, rather than one giant string.
        std::vector<std::string_view> chunks;
        for (size_t pos = 0; pos < text.size();) {
            size_t end = std::min(text.size(), pos + 4096);
            size_t nl = text.find('\n', end);
            end = nl == std::string::npos ? text.size() : nl + 1;
            chunks.emplace_back(text.data() + pos, end - pos);
            pos = end;
        }
        double best = 0;
        std::vector<int32_t> all_ids;
        for (int r = 0; r < repeat; ++r) {
            size_t tokens = 0;
            start = std::chrono::steady_clock::now();
            for (auto chunk : chunks) {
                auto ids = tokenizer.encode(chunk);
                tokens += ids.size();
                if (r == 0) all_ids.insert(all_ids.end(), ids.begin(), ids.end());
            }
            double s = seconds_since(start);
            double mbs = text.size() / 1e6 / s;
            best = std::max(best, mbs);
            std::printf("encode pass %d%s: %.2f MB/s, %.2f M tokens/s, %zu tokens (%.2f bytes/token)\n",
                        r + 1, r == 0 ? " (cold cache)" : "", mbs, tokens / 1e6 / s, tokens,
                        static_cast<double>(text.size()) / static_cast<double>(tokens));
        }
        start = std::chrono::steady_clock::now();
        std::string decoded = tokenizer.decode(all_ids);
        double s = seconds_since(start);
        std::printf("decode: %.2f MB/s, round trip %s\n", decoded.size() / 1e6 / s,
                    decoded == text ? "exact" : "DIFFERS");
        std::printf("encode best: %.2f MB/s (one core)\n", best);
        return decoded == text ? 0 : 1;
    } catch (const surf::Error& e) {
        std::fprintf(stderr, "bench_tokenizer: %s\n", e.what());
        return 2;
    }
}
