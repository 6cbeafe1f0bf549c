#include "agent/prompt_renderer.h"

#include <vector>

#include "base/error.h"
#include "base/file_text.h"

namespace surf::agent {

namespace {
bool name_char(char c, bool first) {
    return (c >= 'a' && c <= 'z') || c == '_' || (!first && c >= '0' && c <= '9');
}
}  // namespace

PromptTemplate::PromptTemplate(std::string text, std::string origin) : origin_(std::move(origin)) {
    std::string literal;
    int line = 1;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '\n') ++line;
        if (c == '{' && i + 1 < text.size() && text[i + 1] == '{') {
            literal += '{';
            ++i;
        } else if (c == '}' && i + 1 < text.size() && text[i + 1] == '}') {
            literal += '}';
            ++i;
        } else if (c == '{') {
            const size_t close = text.find('}', i + 1);
            if (close == std::string::npos) {
                throw Error(ErrorKind::kConfig, origin_ + ":" + std::to_string(line) +
                                                    ": unclosed '{' (write '{{' for a literal brace)");
            }
            const std::string name = text.substr(i + 1, close - i - 1);
            bool ok = !name.empty();
            for (size_t k = 0; k < name.size() && ok; ++k) ok = name_char(name[k], k == 0);
            if (!ok) {
                throw Error(ErrorKind::kConfig,
                            origin_ + ":" + std::to_string(line) + ": bad placeholder '{" + name +
                                "}' (names are [a-z_][a-z0-9_]*; write '{{' for a literal brace)");
            }
            if (!literal.empty()) pieces_.push_back({false, std::move(literal)});
            literal.clear();
            pieces_.push_back({true, name});
            names_.insert(name);
            i = close;
        } else if (c == '}') {
            throw Error(ErrorKind::kConfig, origin_ + ":" + std::to_string(line) +
                                                ": stray '}' (write '}}' for a literal brace)");
        } else {
            literal += c;
        }
    }
    if (!literal.empty()) pieces_.push_back({false, std::move(literal)});
}

PromptTemplate PromptTemplate::load(const std::string& path) {
    return PromptTemplate(surf::read_text_file(path), path);
}

std::string PromptTemplate::render(const std::map<std::string, std::string>& values) const {
    for (const auto& [name, value] : values) {
        if (!names_.count(name)) {
            throw Error(ErrorKind::kConfig, origin_ + ": a value is given for {" + name +
                                                "} but the prompt has no such placeholder");
        }
    }
    std::string out;
    for (const Piece& p : pieces_) {
        if (!p.is_placeholder) {
            out += p.text;
            continue;
        }
        auto it = values.find(p.text);
        if (it == values.end())
            throw Error(ErrorKind::kConfig, origin_ + ": no value for placeholder {" + p.text + "}");
        out += it->second;
    }
    return out;
}

std::string PromptTemplate::render(const std::map<std::string, std::string>& values,
                                   const std::map<std::string, std::string>& optional) const {
    std::map<std::string, std::string> all = values;
    for (const auto& [name, value] : optional)
        if (names_.count(name)) all.emplace(name, value);
    return render(all);
}

}  // namespace surf::agent
