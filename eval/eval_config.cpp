#include "eval/eval_config.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "base/error.h"
#include "eval/eval_results.h"

namespace surf::eval {

namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

constexpr size_t kMiB = size_t{1} << 20;

struct Fnv {
    uint64_t h = 1469598103934665603ull;
    void add(const char* p, size_t n) {
        for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<unsigned char>(p[i])) * 1099511628211ull;
    }
    void add(const std::string& s) {
        add(s.data(), s.size() + 1);
    }  // with the terminator: "ab"+"c" ≠ "a"+"bc"
};

// Adds [offset, offset + n) of the file to the hash.
void add_range(Fnv& fnv, std::ifstream& in, uint64_t offset, size_t n, const fs::path& path) {
    std::string buf(n, '\0');
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(buf.data(), static_cast<std::streamsize>(n));
    if (static_cast<size_t>(in.gcount()) != n) throw Error(ErrorKind::kIo, path.string() + ": cannot read");
    fnv.add(buf.data(), n);
}

std::string host_name() {
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0) return "";
    return buf;
}

}  // namespace

ordered_json model_fingerprint(const std::string& model, const std::string& served_name) {
    ordered_json out;
    if (model.rfind("http://", 0) == 0 || model.rfind("https://", 0) == 0) {
        out["url"] = model;
        out["name"] = served_name;
        return out;
    }
    const fs::path dir = fs::absolute(model).lexically_normal();
    std::vector<fs::path> files;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (entry.is_regular_file() && (name == "config.json" || entry.path().extension() == ".safetensors"))
            files.push_back(entry.path());
    }
    if (ec) throw Error(ErrorKind::kIo, dir.string() + ": cannot list the model folder: " + ec.message());
    std::sort(files.begin(), files.end());
    Fnv fnv;
    uint64_t bytes = 0;
    for (const fs::path& f : files) {
        const uint64_t size = fs::file_size(f);
        std::ifstream in(f, std::ios::binary);
        if (!in) throw Error(ErrorKind::kIo, f.string() + ": cannot open");
        fnv.add(f.filename().string());
        fnv.add(std::to_string(size));
        if (f.filename() == "config.json") {
            add_range(fnv, in, 0, size, f);
        } else {
            const size_t head = static_cast<size_t>(std::min<uint64_t>(size, kMiB));
            add_range(fnv, in, 0, head, f);
            if (size > kMiB) {
                const size_t tail = static_cast<size_t>(std::min<uint64_t>(size - kMiB, kMiB));
                add_range(fnv, in, size - tail, tail, f);
            }
        }
        bytes += size;
    }
    char hex[32];
    std::snprintf(hex, sizeof hex, "fnv1a64:%016llx", static_cast<unsigned long long>(fnv.h));
    out["path"] = dir.string();
    out["files"] = files.size();
    out["bytes"] = bytes;
    out["checksum"] = hex;
    out["checksum_method"] =
        "FNV-1a 64 over config.json and each *.safetensors file's name, size, first and last MiB";
    return out;
}

ordered_json make_run_record(ordered_json config, ordered_json model, const std::string& surf_version) {
    ordered_json r;
    r["config"] = std::move(config);
    r["model"] = std::move(model);
    r["surf_version"] = surf_version;
    r["date"] = utc_now_iso();
    r["host"] = host_name();
    return r;
}

std::vector<std::string> run_differences(const ordered_json& before, const ordered_json& now,
                                         const std::vector<std::string>& free_keys) {
    std::vector<std::string> out;
    const std::set<std::string> free(free_keys.begin(), free_keys.end());
    const ordered_json empty = ordered_json::object();
    const ordered_json& a = before.contains("config") ? before["config"] : empty;
    const ordered_json& b = now.contains("config") ? now["config"] : empty;
    const auto text = [](const ordered_json& c, const std::string& key) {
        return c.contains(key) ? c[key].dump() : std::string("(absent)");
    };
    std::vector<std::string> keys;
    for (const auto& c : {&a, &b}) {
        for (auto it = c->begin(); it != c->end(); ++it) {
            if (std::find(keys.begin(), keys.end(), it.key()) == keys.end()) keys.push_back(it.key());
        }
    }
    for (const std::string& key : keys) {
        if (free.count(key) || text(a, key) == text(b, key)) continue;
        out.push_back(key + " (" + text(a, key) + " → " + text(b, key) + ")");
    }
    const auto checksum = [](const ordered_json& r) {
        return r.contains("model") && r["model"].contains("checksum") ? r["model"]["checksum"].dump() : "";
    };
    if (!checksum(before).empty() && !checksum(now).empty() && checksum(before) != checksum(now))
        out.push_back("model checksum (" + checksum(before) + " → " + checksum(now) + ")");
    return out;
}

std::optional<ordered_json> read_run_record(const std::string& dir) {
    const fs::path path = fs::path(dir) / "config.json";
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    std::stringstream ss;
    ss << in.rdbuf();
    try {
        ordered_json j = ordered_json::parse(ss.str());
        if (!j.is_object()) throw Error(ErrorKind::kFormat, path.string() + ": expected a JSON object");
        return j;
    } catch (const nlohmann::json::parse_error& e) {
        throw Error(ErrorKind::kFormat, path.string() + ": not valid JSON: " + e.what());
    }
}

void write_run_record(const std::string& dir, const ordered_json& record) {
    write_file_atomic((fs::path(dir) / "config.json").string(), record.dump(2) + "\n");
}

}  // namespace surf::eval
