#include "eval/eval_results.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"

namespace surf::eval {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

ordered_json opt_bool(const std::optional<bool>& b) {
    return b ? ordered_json(*b) : ordered_json(nullptr);
}

std::optional<bool> read_opt_bool(const json& j, const char* key, const std::string& where) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return std::nullopt;
    if (!it->is_boolean())
        throw Error(ErrorKind::kFormat, where + ": field \"" + key + "\" must be a boolean");
    return it->get<bool>();
}

template <typename T>
T read(const json& j, const char* key, const T& fallback, const std::string& where) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return fallback;
    try {
        return it->get<T>();
    } catch (const json::exception&) {
        throw Error(ErrorKind::kFormat, where + ": field \"" + key + "\" has the wrong type: " + it->dump());
    }
}

void write_all(int fd, const std::string& data, const std::string& path) {
    size_t done = 0;
    while (done < data.size()) {
        const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw Error(ErrorKind::kIo, path + ": write failed: " + std::strerror(errno));
        done += static_cast<size_t>(n);
    }
}

void fsync_dir(const std::string& dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
    }
}

std::string read_whole(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return {};
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Parses the file's text; returns the records and the byte length of the good prefix.
std::vector<TaskRecord> parse_results(const std::string& text, const std::string& path, size_t* good_bytes) {
    std::vector<TaskRecord> out;
    size_t pos = 0;
    int number = 0;
    while (pos < text.size()) {
        const size_t nl = text.find('\n', pos);
        ++number;
        const bool last = nl == std::string::npos || nl + 1 == text.size();
        const std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
        const std::string where = path + ":" + std::to_string(number);
        if (nl == std::string::npos) break;  // no newline: a write that never finished
        if (line.find_first_not_of(" \t\r") != std::string::npos) {
            json j;
            try {
                j = json::parse(line);
            } catch (const json::exception& e) {
                if (last) break;  // a torn line that happens to end in a newline byte
                throw Error(ErrorKind::kFormat, where + ": not valid JSON: " + e.what());
            }
            out.push_back(record_from_json(j, where));
        }
        pos = nl + 1;
    }
    *good_bytes = pos;
    return out;
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& text) {
    const std::string tmp = path + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw Error(ErrorKind::kIo, tmp + ": cannot open for writing");
    size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n <= 0) {
            ::close(fd);
            throw Error(ErrorKind::kIo, tmp + ": write failed");
        }
        done += static_cast<size_t>(n);
    }
    ::fsync(fd);
    ::close(fd);
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) throw Error(ErrorKind::kIo, path + ": cannot replace: " + ec.message());
}

std::string utc_now_iso() {
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

ordered_json record_to_json(const TaskRecord& r) {
    ordered_json j;
    j["id"] = r.id;
    j["site"] = r.site;
    j["question"] = r.question;
    j["start_url"] = r.start_url;
    j["status"] = r.status;
    j["success"] = opt_bool(r.success);
    j["answer"] = r.answer;
    j["validated"] = r.validated;
    j["forced"] = r.forced;
    j["attempts"] = r.attempts;
    j["steps"] = r.steps;
    j["model_calls"] = r.model_calls;
    j["step_errors"] = r.step_errors;
    j["prompt_tokens"] = r.prompt_tokens;
    j["image_tokens"] = r.image_tokens;
    j["output_tokens"] = r.output_tokens;
    j["model_s"] = r.model_seconds;
    j["browser_s"] = r.browser_seconds;
    j["wall_s"] = r.wall_seconds;
    j["error"] = r.error;
    ordered_json judge;
    judge["name"] = r.judge;
    judge["success"] = opt_bool(r.judge_success);
    judge["reason"] = r.judge_reason;
    judge["tokens"] = r.judge_tokens;
    judge["seconds"] = r.judge_seconds;
    j["judge"] = r.judge.empty() ? ordered_json(nullptr) : judge;
    if (r.check_success || !r.check_reason.empty()) {
        ordered_json check;
        check["success"] = opt_bool(r.check_success);
        check["reason"] = r.check_reason;
        j["check"] = check;
    } else {
        j["check"] = nullptr;
    }
    if (r.references.empty()) {
        j["match"] = nullptr;
    } else {
        ordered_json m;
        m["references"] = r.references;
        m["type"] = r.reference_type;
        m["exact"] = opt_bool(r.exact_match);
        m["normalized"] = opt_bool(r.normalized_match);
        m["contains"] = opt_bool(r.contains_match);
        j["match"] = m;
    }
    j["trace"] = r.trace;
    j["started_at"] = r.started_at;
    j["finished_at"] = r.finished_at;
    j["shard"] = r.shard;
    if (!r.task_fields.empty()) j["task_fields"] = r.task_fields;
    return j;
}

TaskRecord record_from_json(const json& j, const std::string& where) {
    if (!j.is_object()) throw Error(ErrorKind::kFormat, where + ": expected a JSON object");
    TaskRecord r;
    r.id = read<std::string>(j, "id", "", where);
    if (r.id.empty()) throw Error(ErrorKind::kFormat, where + ": missing field \"id\"");
    r.site = read<std::string>(j, "site", "", where);
    r.question = read<std::string>(j, "question", "", where);
    r.start_url = read<std::string>(j, "start_url", "", where);
    r.status = read<std::string>(j, "status", "", where);
    if (r.status.empty()) throw Error(ErrorKind::kFormat, where + ": missing field \"status\"");
    r.success = read_opt_bool(j, "success", where);
    r.answer = read<std::string>(j, "answer", "", where);
    r.validated = read<bool>(j, "validated", false, where);
    r.forced = read<bool>(j, "forced", false, where);
    r.attempts = read<int>(j, "attempts", 0, where);
    r.steps = read<int>(j, "steps", 0, where);
    r.model_calls = read<int>(j, "model_calls", 0, where);
    r.step_errors = read<int>(j, "step_errors", 0, where);
    r.prompt_tokens = read<int64_t>(j, "prompt_tokens", 0, where);
    r.image_tokens = read<int64_t>(j, "image_tokens", 0, where);
    r.output_tokens = read<int64_t>(j, "output_tokens", 0, where);
    r.model_seconds = read<double>(j, "model_s", 0, where);
    r.browser_seconds = read<double>(j, "browser_s", 0, where);
    r.wall_seconds = read<double>(j, "wall_s", 0, where);
    r.error = read<std::string>(j, "error", "", where);
    if (auto it = j.find("judge"); it != j.end() && it->is_object()) {
        const std::string w = where + " judge";
        r.judge = read<std::string>(*it, "name", "", w);
        r.judge_success = read_opt_bool(*it, "success", w);
        r.judge_reason = read<std::string>(*it, "reason", "", w);
        r.judge_tokens = read<int64_t>(*it, "tokens", 0, w);
        r.judge_seconds = read<double>(*it, "seconds", 0, w);
    }
    if (auto it = j.find("check"); it != j.end() && it->is_object()) {
        r.check_success = read_opt_bool(*it, "success", where + " check");
        r.check_reason = read<std::string>(*it, "reason", "", where + " check");
    }
    if (auto it = j.find("match"); it != j.end() && it->is_object()) {
        const std::string w = where + " match";
        r.references = read<std::vector<std::string>>(*it, "references", {}, w);
        r.reference_type = read<std::string>(*it, "type", "", w);
        r.exact_match = read_opt_bool(*it, "exact", w);
        r.normalized_match = read_opt_bool(*it, "normalized", w);
        r.contains_match = read_opt_bool(*it, "contains", w);
    }
    r.trace = read<std::string>(j, "trace", "", where);
    r.started_at = read<std::string>(j, "started_at", "", where);
    r.finished_at = read<std::string>(j, "finished_at", "", where);
    r.shard = read<std::string>(j, "shard", "", where);
    if (auto it = j.find("task_fields"); it != j.end()) {
        if (!it->is_object())
            throw Error(ErrorKind::kFormat, where + ": field \"task_fields\" must be an object");
        r.task_fields = ordered_json(*it);
    }
    return r;
}

std::vector<TaskRecord> read_results(const std::string& path, size_t* torn_bytes) {
    if (!std::filesystem::exists(path)) throw Error(ErrorKind::kIo, path + ": no such results file");
    const std::string text = read_whole(path);
    size_t good = 0;
    std::vector<TaskRecord> out = parse_results(text, path, &good);
    if (torn_bytes) *torn_bytes = text.size() - good;
    return out;
}

ResultsFile::ResultsFile(const std::string& dir, bool drop_errors) : dir_(dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw Error(ErrorKind::kIo, dir + ": cannot create the results folder: " + ec.message());
    const std::string lock_path = (std::filesystem::path(dir) / ".lock").string();
    lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock_fd_ < 0) throw Error(ErrorKind::kIo, lock_path + ": cannot open: " + std::strerror(errno));
    if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
        ::close(lock_fd_);
        lock_fd_ = -1;
        throw Error(ErrorKind::kInvalidArgument,
                    dir + ": another surf eval is writing this folder (" + lock_path + " is locked)");
    }
    path_ = (std::filesystem::path(dir) / "results.jsonl").string();
    try {
        const std::string text = read_whole(path_);
        size_t good = 0;
        existing_ = parse_results(text, path_, &good);
        torn_ = text.size() - good;
        if (drop_errors) {
            std::vector<TaskRecord> kept;
            std::string body;
            for (TaskRecord& r : existing_) {
                if (r.status == "error") {
                    ++errors_dropped_;
                    continue;
                }
                body += record_to_json(r).dump() + "\n";
                kept.push_back(std::move(r));
            }
            existing_ = std::move(kept);
            if (errors_dropped_ > 0 || torn_ > 0) {
                // Rewrite atomically: a crash leaves either the old file or the new one.
                const std::string tmp = path_ + ".tmp";
                const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                if (fd < 0) throw Error(ErrorKind::kIo, tmp + ": cannot open: " + std::strerror(errno));
                write_all(fd, body, tmp);
                ::fsync(fd);
                ::close(fd);
                if (::rename(tmp.c_str(), path_.c_str()) != 0)
                    throw Error(ErrorKind::kIo, path_ + ": cannot replace: " + std::strerror(errno));
                fsync_dir(dir);
                good = body.size();
            }
        }
        for (const TaskRecord& r : existing_) {
            if (!ids_.insert(r.id).second) {
                throw Error(ErrorKind::kFormat, path_ + ": task \"" + r.id + "\" is recorded twice");
            }
        }
        fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd_ < 0) throw Error(ErrorKind::kIo, path_ + ": cannot open: " + std::strerror(errno));
        // Drop a torn tail (kill -9 mid-write) so the next line starts clean.
        if (::ftruncate(fd_, static_cast<off_t>(good)) != 0)
            throw Error(ErrorKind::kIo,
                        path_ + ": cannot truncate the torn last line: " + std::strerror(errno));
        ::fsync(fd_);
        ::close(fd_);
        fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
        if (fd_ < 0) throw Error(ErrorKind::kIo, path_ + ": cannot open: " + std::strerror(errno));
        fsync_dir(dir);
    } catch (...) {
        if (fd_ >= 0) ::close(fd_);
        ::close(lock_fd_);
        throw;
    }
}

ResultsFile::~ResultsFile() {
    if (fd_ >= 0) ::close(fd_);
    if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

std::set<std::string> ResultsFile::finished_ids() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return ids_;
}

void ResultsFile::append(const TaskRecord& record) {
    const std::string line = record_to_json(record).dump() + "\n";
    std::lock_guard<std::mutex> lock(mutex_);
    if (ids_.count(record.id))
        throw Error(ErrorKind::kInvalidArgument, path_ + ": task \"" + record.id + "\" is already recorded");
    // One write() of the whole line on O_APPEND: no interleaving, and a crash tears only this line.
    write_all(fd_, line, path_);
    if (::fsync(fd_) != 0) throw Error(ErrorKind::kIo, path_ + ": fsync failed: " + std::strerror(errno));
    ids_.insert(record.id);
    appended_.push_back(record);
}

std::vector<TaskRecord> ResultsFile::all() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<TaskRecord> out = existing_;
    out.insert(out.end(), appended_.begin(), appended_.end());
    return out;
}

}  // namespace surf::eval
