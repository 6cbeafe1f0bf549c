// `surf record` as the training pipeline runs it (surf as a child, real Chromium): generated task pages
// (train/tasks/generate.py), the shipped surf-tiny model folder and profile, the pages' oracles answering.
// Every task is recorded with its policy, localizer and validator sessions.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/surf_process.h"

namespace fs = std::filesystem;
using surf::test::have_surf;
using surf::test::Result;
using surf::test::run_surf;
using surf::test::slurp;

TEST_CASE("surf record with the shipped surf-tiny profile records every task with all three roles") {
    if (!have_surf()) return;
    const fs::path dir = fs::temp_directory_path() / ("surf_test_cli_record_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    const std::string generate = "python3 " SURF_SOURCE_DIR
                                 "/train/tasks/generate.py --split train --seed 7 "
                                 "--count 1 --families click_button,type_submit --out " +
                                 (dir / "tasks").string() + " > /dev/null";
    REQUIRE(std::system(generate.c_str()) == 0);
    // The profile acts on listed elements without the localizer (listed_elements_only); a recording still
    // asks the localizer, whose calls are training data.
    const Result r =
        run_surf({"record", (dir / "tasks" / "tasks.jsonl").string(), "--model", "models/surf-tiny",
                  "--profile", "models/surf-tiny/surf_profile.json", "--out", (dir / "out").string()},
                 SURF_SOURCE_DIR);
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    CHECK(r.out.find("recorded 2 of 2 tasks (0 failed)") != std::string::npos);
    std::istringstream episodes(slurp(dir / "out" / "episodes.jsonl"));
    const std::set<std::string> all = {"policy", "localizer", "validator"};
    int count = 0;
    for (std::string line; std::getline(episodes, line);) {
        const auto ep = nlohmann::json::parse(line);
        std::set<std::string> roles;
        for (const auto& s : ep["sessions"]) roles.insert(s["role"].get<std::string>());
        CHECK_MESSAGE(roles == all, ep["id"]);
        ++count;
    }
    CHECK(count == 2);
    fs::remove_all(dir);
}
