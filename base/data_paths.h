// Where surf's data folders (prompts/, models/) are at run time, so that a built or installed surf can be
// moved and a product that links surf finds them: the environment variable first, then the installed layout
// beside the running program (<program's folder>/../share/surf/NAME), then the source tree surf was built
// from
// (<source>/NAME), then the install prefix it was configured with (<prefix>/share/surf/NAME).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace surf {

// The running program's folder (Linux: /proc/self/exe), or "" when it cannot be read.
std::filesystem::path program_dir();

// The places data_dir looks for the folder NAME ("prompts", "models"), in order; the environment variable's
// value comes first when it is set and not empty.
std::vector<std::string> data_dir_candidates(const std::string& name, const char* env_var);

// The first candidate that is a folder. Throws Error(kIo) listing every place it looked when none is; a set
// environment variable that names no folder is an error too (it is never passed over silently).
std::string data_dir(const std::string& name, const char* env_var);

}  // namespace surf
