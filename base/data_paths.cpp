#include "base/data_paths.h"

#include <cstdlib>
#include <filesystem>

#include "base/error.h"

#ifndef SURF_SOURCE_DATA_DIR
#define SURF_SOURCE_DATA_DIR ""
#endif
#ifndef SURF_INSTALL_DATA_DIR
#define SURF_INSTALL_DATA_DIR ""
#endif

namespace surf {

namespace fs = std::filesystem;

fs::path program_dir() {
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    return ec ? fs::path() : exe.parent_path();
}

std::vector<std::string> data_dir_candidates(const std::string& name, const char* env_var) {
    std::vector<std::string> out;
    if (const char* env = env_var ? std::getenv(env_var) : nullptr; env && *env) out.emplace_back(env);
    if (const fs::path dir = program_dir(); !dir.empty())
        out.push_back((dir.parent_path() / "share" / "surf" / name).lexically_normal().string());
    if (*SURF_SOURCE_DATA_DIR) out.push_back((fs::path(SURF_SOURCE_DATA_DIR) / name).string());
    if (*SURF_INSTALL_DATA_DIR) out.push_back((fs::path(SURF_INSTALL_DATA_DIR) / name).string());
    return out;
}

std::string data_dir(const std::string& name, const char* env_var) {
    const std::vector<std::string> candidates = data_dir_candidates(name, env_var);
    std::error_code ec;
    if (const char* env = env_var ? std::getenv(env_var) : nullptr; env && *env) {
        if (!fs::is_directory(env, ec))
            throw Error(ErrorKind::kIo, std::string("$") + env_var + "=" + env + ": not a folder");
        return env;
    }
    for (const std::string& dir : candidates) {
        if (fs::is_directory(dir, ec)) return dir;
    }
    std::string tried;
    for (const std::string& dir : candidates) tried += (tried.empty() ? "" : ", ") + dir;
    throw Error(ErrorKind::kIo, "surf's " + name + " folder is not installed: looked in " + tried +
                                    (env_var ? std::string(" (set $") + env_var + " to name it)" : ""));
}

}  // namespace surf
