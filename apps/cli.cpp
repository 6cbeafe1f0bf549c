#include "apps/cli.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include <filesystem>

#include "base/error.h"
#include "base/utf8.h"
#include "model/engine.h"

namespace surf::cli {

std::string model_flag(const Args& args) {
    if (args.has("model")) return args.get("model");
    const std::string dir = model::default_model_dir();
    const char* env = std::getenv("SURF_MODEL");
    namespace fs = std::filesystem;
    std::error_code ec;
    if ((!env || !*env) && !fs::exists(fs::path(dir) / "model.safetensors", ec) &&
        !fs::exists(fs::path(dir) / "model.safetensors.index.json", ec)) {
        throw Error(
            ErrorKind::kInvalidArgument,
            "no --model given, and the default model " + dir +
                " has no trained weights in this checkout (train/README.md builds them): pass --model DIR "
                "(a checkpoint folder, e.g. tests/fixtures/golden/tiny_fp32) or set SURF_MODEL");
    }
    return dir;
}

std::string backend_flag(const Args& args) {
    const std::string backend = args.get("backend", "cpu");
    if (backend != "cpu" && backend != "cuda")
        throw Error(ErrorKind::kInvalidArgument, "--backend \"" + backend + "\": expected cpu or cuda");
#ifndef SURF_HAVE_CUDA
    if (backend == "cuda") {
        throw Error(ErrorKind::kUnsupported,
                    "--backend cuda: this surf is built without the CUDA backend (surf version lists the "
                    "backends built in); use --backend cpu");
    }
#endif
    return backend;
}

namespace {

std::map<std::string, Command>& registry() {
    static std::map<std::string, Command> commands;
    return commands;
}

Error bad_flag(const std::string& message) {
    return Error(ErrorKind::kInvalidArgument, message);
}

}  // namespace

std::vector<std::string> comma_items(const std::string& text) {
    std::vector<std::string> items;
    std::stringstream ss(text);
    for (std::string item; std::getline(ss, item, ',');) {
        if (!item.empty()) items.push_back(item);
    }
    return items;
}

std::string closest(const std::string& word, const std::vector<std::string>& candidates) {
    return surf::closest_name(word, candidates);
}

Args::Args(const std::vector<std::string>& argv, const std::vector<FlagSpec>& specs) {
    std::map<std::string, const FlagSpec*> by_name;
    for (const auto& spec : specs) by_name[spec.name] = &spec;
    bool only_positional = false;
    for (size_t i = 0; i < argv.size(); ++i) {
        const std::string& arg = argv[i];
        if (only_positional || arg.size() < 3 || arg.rfind("--", 0) != 0) {
            if (arg == "--") {
                only_positional = true;
                continue;
            }
            positional_.push_back(arg);
            continue;
        }
        std::string name = arg.substr(2);
        std::optional<std::string> inline_value;
        if (auto eq = name.find('='); eq != std::string::npos) {
            inline_value = name.substr(eq + 1);
            name = name.substr(0, eq);
        }
        auto it = by_name.find(name);
        if (it == by_name.end()) {
            std::vector<std::string> names;
            for (const auto& spec : specs) names.push_back(spec.name);
            const std::string guess = closest(name, names);
            throw bad_flag("unknown flag --" + name +
                           (guess.empty() ? "" : " (did you mean --" + guess + "?)"));
        }
        const FlagSpec& spec = *it->second;
        std::string value;
        if (spec.value_name.empty()) {
            if (inline_value) throw bad_flag("flag --" + name + " takes no value");
            value = "1";
        } else if (inline_value) {
            value = *inline_value;
        } else {
            if (i + 1 >= argv.size()) throw bad_flag("flag --" + name + " needs a value " + spec.value_name);
            value = argv[++i];
        }
        auto& slot = values_[name];
        if (!slot.empty() && !spec.repeatable) throw bad_flag("flag --" + name + " given more than once");
        slot.push_back(value);
    }
}

bool Args::has(const std::string& name) const {
    return values_.count(name) > 0;
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
    auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second.back();
}

std::string Args::require(const std::string& name) const {
    auto it = values_.find(name);
    if (it == values_.end()) throw bad_flag("missing required flag --" + name);
    return it->second.back();
}

std::vector<std::string> Args::all(const std::string& name) const {
    auto it = values_.find(name);
    return it == values_.end() ? std::vector<std::string>{} : it->second;
}

long long Args::get_int(const std::string& name, long long fallback, long long lo, long long hi) const {
    if (!has(name)) return fallback;
    const std::string text = get(name);
    char* end = nullptr;
    errno = 0;
    const long long value = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0') throw bad_flag("flag --" + name + ": '" + text + "' is not an integer");
    if (errno == ERANGE || value < lo || value > hi) {
        throw bad_flag("flag --" + name + ": " + text + " is outside " + std::to_string(lo) + ".." +
                       std::to_string(hi));
    }
    return value;
}

bool Args::get_size(const std::string& name, int* width, int* height) const {
    if (!has(name)) return false;
    const std::string text = get(name);
    const size_t x = text.find('x');
    char* end = nullptr;
    const long w = x == std::string::npos ? 0 : std::strtol(text.c_str(), &end, 10);
    const bool w_ok = x != std::string::npos && end == text.c_str() + x;
    const long h = w_ok ? std::strtol(text.c_str() + x + 1, &end, 10) : 0;
    if (!w_ok || *end != '\0' || w <= 0 || h <= 0 || w > 16384 || h > 16384) {
        throw bad_flag("flag --" + name + ": '" + text + "' is not WIDTHxHEIGHT (e.g. 1280x720)");
    }
    *width = static_cast<int>(w);
    *height = static_cast<int>(h);
    return true;
}

double Args::get_double(const std::string& name, double fallback, double lo, double hi) const {
    if (!has(name)) return fallback;
    const std::string text = get(name);
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0') throw bad_flag("flag --" + name + ": '" + text + "' is not a number");
    if (!std::isfinite(value) || value < lo || value > hi) {
        std::ostringstream range;
        range << lo << ".." << hi;
        throw bad_flag("flag --" + name + ": " + text + " is outside " + range.str());
    }
    return value;
}

void Args::set_default(const std::string& name, std::vector<std::string> values) {
    if (!values_.count(name)) values_[name] = std::move(values);
}

void Args::set_default_positional(std::vector<std::string> values) {
    if (positional_.empty()) positional_ = std::move(values);
}

int register_command(Command command) {
    std::string name = command.name;
    registry()[name] = std::move(command);
    return 0;
}

const std::map<std::string, Command>& commands() {
    return registry();
}

std::string usage_text(const Command& command) {
    std::ostringstream out;
    out << "usage: surf " << command.name << " " << command.usage << "\n\n" << command.summary << "\n";
    if (!command.flags.empty()) out << "\nflags:\n";
    for (const auto& flag : command.flags) {
        std::string left = "  --" + flag.name + (flag.value_name.empty() ? "" : " " + flag.value_name);
        out << left << std::string(left.size() < 28 ? 28 - left.size() : 1, ' ') << flag.help
            << (flag.repeatable ? " (repeatable)" : "") << "\n";
    }
    return out.str();
}

}  // namespace surf::cli
