#include "model/dump.h"

#include <cstdio>
#include <map>

#include "base/error.h"
#include "model/checkpoint/safetensors.h"

namespace surf::model {

Dumper::Dumper(const std::string& pattern, std::string path) : path_(std::move(path)) {
    try {
        regex_ = std::regex(pattern);
    } catch (const std::regex_error& e) {
        throw Error(ErrorKind::kInvalidArgument,
                    "SURF_DUMP: '" + pattern + "' is not a valid regular expression: " + e.what());
    }
}

Dumper::~Dumper() {
    try {
        write();
    } catch (const Error& e) {
        std::fprintf(stderr, "surf: could not write the dump: %s\n", e.what());
    }
}

void Dumper::offer(const std::string& name, const float* data, const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::string unique = name;
    int repeat = 0;
    for (const auto& e : entries_) {
        if (e.name == unique) unique = name + "." + std::to_string(++repeat);
    }
    entries_.push_back({unique, shape, std::vector<float>(data, data + n)});
    written_ = false;
}

void Dumper::write() {
    if (written_ || entries_.empty()) return;
    std::vector<TensorToWrite> tensors;
    for (const auto& e : entries_) tensors.push_back({e.name, DType::kF32, e.shape, e.data.data()});
    write_safetensors(path_, tensors, {{"producer", "surf SURF_DUMP"}});
    written_ = true;
}

}  // namespace surf::model
