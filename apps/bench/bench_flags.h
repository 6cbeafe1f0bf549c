// Table-driven command-line flags for the benchmark programs: each Flag names where its value goes, and
// parse_flags applies argv to them in order.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace surf::bench {

// One flag: `--name VALUE` (apply gets VALUE) or a switch `--name` (apply gets nullptr).
struct Flag {
    const char* name;
    bool takes_value;
    std::function<void(const char*)> apply;
};

inline Flag text_flag(const char* name, std::string& to) {
    return {name, true, [&to](const char* v) { to = v; }};
}

// VALUE read by std::atoi.
inline Flag int_flag(const char* name, int& to) {
    return {name, true, [&to](const char* v) { to = std::atoi(v); }};
}

// VALUE read by std::atoll.
inline Flag int64_flag(const char* name, int64_t& to) {
    return {name, true, [&to](const char* v) { to = std::atoll(v); }};
}

// A switch: `--name` stores `value`.
template <typename T>
Flag switch_flag(const char* name, T& to, T value) {
    return {name, false, [&to, value](const char*) { to = value; }};
}

// Applies argv[1..] through `flags`, in order. A flag the table lacks prints `usage` to stderr and exits with
// 2; a flag whose value is missing prints "PROGRAM: FLAG needs a value" and exits with 2.
inline void parse_flags(int argc, char** argv, const std::vector<Flag>& flags, const char* program,
                        const char* usage) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const Flag* flag = nullptr;
        for (const Flag& f : flags) {
            if (a == f.name) {
                flag = &f;
                break;
            }
        }
        if (!flag) {
            std::fputs(usage, stderr);
            std::exit(2);
        }
        if (!flag->takes_value) {
            flag->apply(nullptr);
            continue;
        }
        if (i + 1 >= argc) {
            std::fprintf(stderr, "%s: %s needs a value\n", program, a.c_str());
            std::exit(2);
        }
        flag->apply(argv[++i]);
    }
}

}  // namespace surf::bench
