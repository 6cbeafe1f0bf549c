// Argument binding and Python string operations shared by the Jinja builtins (jinja_builtins.cpp,
// jinja_filters.cpp). Internal to model/jinja*.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/text/jinja_value.h"

namespace surf::model::jinja {

// Binds a call's positional and keyword arguments to Python-style parameters; finish() rejects
// arguments nobody asked for, so a typo in a template is an error rather than silently ignored.
class Args {
public:
    Args(CallArgs& call, std::string function) : call_(call), function_(std::move(function)) {}

    Value required(size_t index, const char* name);
    Value optional(size_t index, const char* name, Value fallback);
    int64_t integer(size_t index, const char* name, int64_t fallback);
    bool flag(size_t index, const char* name, bool fallback);
    std::string string(size_t index, const char* name);  // required str
    void finish() const;

private:
    const Value* find(size_t index, const char* name);

    CallArgs& call_;
    std::string function_;
    size_t positional_seen_ = 0;
    std::vector<std::string> keywords_seen_;
};

// str.split / str.rsplit (sep None = runs of whitespace).
Value split_string(const std::string& s, const Value& sep, int64_t maxsplit, bool from_right);
// str.strip family (chars None = whitespace).
std::string strip_string(const std::string& s, const Value& chars, bool left, bool right);
std::string replace_string(const std::string& s, const std::string& old_text, const std::string& new_text,
                           int64_t count);
std::vector<std::string> split_lines(const std::string& s);
std::string upper_string(std::string s);
std::string lower_string(std::string s);
std::string title_string(const std::string& s);       // str.title
std::string jinja_title(const std::string& s);        // jinja2's title filter
std::string capitalize_string(const std::string& s);  // str.capitalize
bool all_chars(const std::string& s, int (*pred)(int));
// printf-style `fmt % args` (%s %r %d %i %f %x %%, with flags, width and precision).
std::string percent_format(const std::string& fmt, const Value& args);

}  // namespace surf::model::jinja
