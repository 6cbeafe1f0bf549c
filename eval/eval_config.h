// What an evaluation ran with, recorded in DIR/config.json (and in summary.json and report.html under "run"),
// so a results folder says which configuration, model, surf version, date and machine produced it, and a
// resumed run into the folder can be refused when its configuration differs:
//   {"config": {flag: value, ...},             the full resolved configuration, keyed like surf eval's flags
//    "model": {"path", "files", "bytes", "checksum", "checksum_method"}   (a remote model: {"url", "name"})
//    "surf_version": "...", "date": "...Z", "host": "..."}
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace surf::eval {

// A model's identity. A folder: its absolute path, its config.json and *.safetensors files (count, bytes) and
// a checksum, FNV-1a 64 over config.json's bytes and, for each weight file in name order, its name, its size
// and its first and last MiB: fast on a 24 GB checkpoint (2 MiB read per file), and changed by a re-export, a
// truncation or another set of shards, but not a hash of every byte. An http(s) URL (a remote model): {url,
// name}. Throws Error(kIo) for a folder it cannot read.
nlohmann::ordered_json model_fingerprint(const std::string& model, const std::string& served_name = "");

// The record for a run starting now: config, model, version, the UTC date and this machine's host name.
nlohmann::ordered_json make_run_record(nlohmann::ordered_json config, nlohmann::ordered_json model,
                                       const std::string& surf_version);

// How `now` differs from `before`, one entry per differing key of "config" (a key in only one counts) except
// `free_keys`, plus the model checksum: "max-steps (15 → 20)". Empty when they agree.
std::vector<std::string> run_differences(const nlohmann::ordered_json& before,
                                         const nlohmann::ordered_json& now,
                                         const std::vector<std::string>& free_keys);

// DIR/config.json, or nullopt when the folder has none. Throws Error(kFormat) for a file that does not parse.
std::optional<nlohmann::ordered_json> read_run_record(const std::string& dir);
// Writes DIR/config.json (temp file, rename). Throws Error(kIo).
void write_run_record(const std::string& dir, const nlohmann::ordered_json& record);

}  // namespace surf::eval
