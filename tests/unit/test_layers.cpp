// The layers' dependency rule (DESIGN.md §1): apps → eval → agent → tools → model → kernels, each folder
// including only itself and the folders below it. Include paths are not scoped per target, so this test reads
// every source file of the layers and fails on an include that points up, naming the file, line and include.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

// Layer rank by top-level folder, lowest first.
const std::map<std::string, int> kRank = {{"kernels", 0}, {"model", 1}, {"tools", 2},
                                          {"agent", 3},   {"eval", 4},  {"apps", 5}};

// The first path component of a quoted include ("eval/eval_tasks.h" → "eval"), "" for a local include.
std::string include_layer(const std::string& line) {
    const std::string prefix = "#include \"";
    if (line.rfind(prefix, 0) != 0) return "";
    const size_t slash = line.find('/', prefix.size());
    if (slash == std::string::npos) return "";
    return line.substr(prefix.size(), slash - prefix.size());
}

bool is_source(const fs::path& p) {
    const std::string ext = p.extension().string();
    return ext == ".h" || ext == ".cpp" || ext == ".cu" || ext == ".cuh";
}

// Every include under `root`'s layer folders that points to a higher layer, as "path:line: include".
std::vector<std::string> upward_includes(const fs::path& root, size_t* files) {
    std::vector<std::string> violations;
    for (const auto& [folder, rank] : kRank) {
        if (!fs::exists(root / folder)) continue;
        for (const auto& entry : fs::recursive_directory_iterator(root / folder)) {
            if (!entry.is_regular_file() || !is_source(entry.path())) continue;
            ++*files;
            std::ifstream in(entry.path());
            std::string line;
            for (int number = 1; std::getline(in, line); ++number) {
                auto it = kRank.find(include_layer(line));
                if (it != kRank.end() && it->second > rank) {
                    violations.push_back(fs::relative(entry.path(), root).string() + ":" +
                                         std::to_string(number) + ": " + line);
                }
            }
        }
    }
    return violations;
}

}  // namespace

TEST_CASE("the include parser names the top folder of quoted includes only") {
    CHECK(include_layer("#include \"eval/eval_tasks.h\"") == "eval");
    CHECK(include_layer("#include \"local.h\"") == "");
    CHECK(include_layer("#include <nlohmann/json.hpp>") == "");
}

TEST_CASE("an upward include is found and named; downward and same-layer includes are not") {
    const fs::path root = fs::temp_directory_path() / "surf_test_layers";
    fs::remove_all(root);
    fs::create_directories(root / "agent");
    fs::create_directories(root / "eval");
    std::ofstream(root / "agent" / "a.h") << "#pragma once\n#include \"tools/t.h\"\n#include \"eval/e.h\"\n";
    std::ofstream(root / "eval" / "e.h") << "#include \"agent/a.h\"\n#include \"eval/f.h\"\n";
    size_t files = 0;
    const auto v = upward_includes(root, &files);
    CHECK(files == 2);
    REQUIRE(v.size() == 1);
    CHECK(v[0] == "agent/a.h:3: #include \"eval/e.h\"");
    fs::remove_all(root);
}

TEST_CASE("no layer of the source tree includes a layer above it (agent never includes eval)") {
    size_t files = 0;
    const auto violations = upward_includes(SURF_SOURCE_DIR, &files);
    CHECK(files > 100);  // the walk found the sources
    for (const std::string& v : violations) FAIL_CHECK("include points up a layer: " << v);
}
