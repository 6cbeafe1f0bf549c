// Strict prompt rendering (DESIGN.md rule 13): prompt files in prompts/ hold text with {placeholders}
// ([a-z_][a-z0-9_]*); "{{" and "}}" are literal braces. Rendering fails with Error(kConfig) naming the
// file and the placeholder when the template uses a name that has no value, or a value is given that the
// template never uses: a typo on either side is an error, never silently empty text.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

namespace surf::agent {

class PromptTemplate {
public:
    // Parses the text now, so a malformed template (an unclosed "{", a bad name) fails at load time.
    PromptTemplate(std::string text, std::string origin);
    static PromptTemplate load(const std::string& path);

    std::string render(const std::map<std::string, std::string>& values) const;
    // As render(values), with each of `optional` used only where the template has its placeholder: a profile
    // may leave the output schema out of a prompt (constrained decoding enforces it either way).
    std::string render(const std::map<std::string, std::string>& values,
                       const std::map<std::string, std::string>& optional) const;

    const std::set<std::string>& placeholders() const { return names_; }
    const std::string& origin() const { return origin_; }

private:
    struct Piece {
        bool is_placeholder = false;
        std::string text;  // literal text, or the placeholder's name
    };
    std::vector<Piece> pieces_;
    std::set<std::string> names_;
    std::string origin_;
};

}  // namespace surf::agent
