// Small helpers shared by the test files.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "kernels/base/error.h"

namespace surf::test {

// The message of the surf::Error `fn` throws, or "" when it throws none.
inline std::string error_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const surf::Error& e) {
        return e.what();
    }
    return "";
}

// A fresh, empty temporary folder unique to this process and name.
inline std::string temp_dir(const std::string& name) {
    namespace fs = std::filesystem;
    fs::path dir = fs::temp_directory_path() / ("surf_test_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir.string();
}

inline void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace surf::test
