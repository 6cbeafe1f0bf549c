// The built surf executable as a child process, for tests of the command line: exit code, stdout and stderr.
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace surf::test {

inline const std::string kSurf = SURF_BINARY_DIR "/surf";

struct Result {
    int code = -1;  // exit code; -1 if the child did not exit normally
    std::string out;
    std::string err;
};

inline std::string slurp(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream content;
    content << in.rdbuf();
    return content.str();
}

// Runs surf with args, stdout and stderr to temporary files (no pipe to drain while waiting), in the folder
// `cwd` when given.
inline Result run_surf(const std::vector<std::string>& args, const std::string& cwd = "") {
    const std::filesystem::path dir = std::filesystem::temp_directory_path();
    const std::string tag = "surf_test_cli_" + std::to_string(::getpid());
    const std::filesystem::path out_path = dir / (tag + ".out"), err_path = dir / (tag + ".err");
    std::vector<std::string> storage = {kSurf};
    storage.insert(storage.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& arg : storage) argv.push_back(arg.data());
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (out < 0 || err < 0) ::_exit(126);
        ::dup2(out, 1);
        ::dup2(err, 2);
        if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(125);
        ::execv(kSurf.c_str(), argv.data());
        ::_exit(127);
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    Result result;
    result.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    result.out = slurp(out_path);
    result.err = slurp(err_path);
    std::filesystem::remove(out_path);
    std::filesystem::remove(err_path);
    return result;
}

inline bool have_surf() {
    if (std::filesystem::exists(kSurf)) return true;
    MESSAGE("skipped: no surf executable at " << kSurf << " (build the surf target)");
    return false;
}

}  // namespace surf::test
