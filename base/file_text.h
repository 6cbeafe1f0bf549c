// A whole file read as text (prompts, templates, schemas, YAML), with the error surf gives for every
// configuration file it cannot read: the path, then what failed.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "base/error.h"

namespace surf {

inline std::string read_text_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(ErrorKind::kIo, path.string() + ": cannot open");
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) throw Error(ErrorKind::kIo, path.string() + ": cannot read");
    return text.str();
}

}  // namespace surf
