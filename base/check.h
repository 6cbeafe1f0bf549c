// Programmer invariants (tier one of the two error tiers, DESIGN.md §2 rule 8).
// A failed SURF_CHECK is a bug in surf, not bad input: it prints file, line, the condition and the
// values given, then aborts. Bad input is reported with surf::Error (error.h) instead.
#pragma once

#include <sstream>
#include <string>

namespace surf::detail {

[[noreturn]] void check_failed(const char* file, int line, const char* condition, const std::string& message);

inline void append_values(std::ostringstream&) {}
template <typename T, typename... Rest>
void append_values(std::ostringstream& out, const T& value, const Rest&... rest) {
    out << value;
    append_values(out, rest...);
}

template <typename... Args>
std::string format_values(const Args&... args) {
    std::ostringstream out;
    append_values(out, args...);
    return out.str();
}

}  // namespace surf::detail

// SURF_CHECK(cond, "what", value, ...): abort with file/line and the streamed values when cond is false.
#define SURF_CHECK(cond, ...)                                                                           \
    do {                                                                                                \
        if (!(cond)) [[unlikely]] {                                                                     \
            ::surf::detail::check_failed(__FILE__, __LINE__, #cond,                                     \
                                         ::surf::detail::format_values("" __VA_OPT__(, ) __VA_ARGS__)); \
        }                                                                                               \
    } while (0)
