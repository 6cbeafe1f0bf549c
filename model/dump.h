// Named intermediates (DESIGN.md rule 10): a forward pass offers each intermediate to a Dumper under the
// name the reference uses ("embeds", "layers.7", "norm_f", "logits", "vision.features", …); the ones whose
// name matches the regex are written to one safetensors file, so a parity failure points at the first
// diverging layer. The CLI builds a Dumper from SURF_DUMP; model code never reads the environment.
#pragma once

#include <cstdint>
#include <regex>
#include <string>
#include <vector>

namespace surf::model {

class Dumper {
public:
    Dumper(const std::string& pattern, std::string path);
    ~Dumper();  // writes the file (errors are reported on stderr: a dump must not take the run down)

    bool wants(const std::string& name) const { return std::regex_search(name, regex_); }
    // Records a copy of `data` [shape] fp32 when the name matches; repeated names get a ".1", ".2" suffix.
    void offer(const std::string& name, const float* data, const std::vector<int64_t>& shape);
    void write();  // writes now (idempotent); throws surf::Error(kIo) naming the path
    const std::string& path() const { return path_; }
    size_t size() const { return entries_.size(); }
    // The recorded data of `name`, or null (for tests that compare intermediates in memory).
    const std::vector<float>* find(const std::string& name) const {
        for (const auto& e : entries_)
            if (e.name == name) return &e.data;
        return nullptr;
    }

private:
    struct Entry {
        std::string name;
        std::vector<int64_t> shape;
        std::vector<float> data;
    };
    std::regex regex_;
    std::string path_;
    std::vector<Entry> entries_;
    bool written_ = false;
};

// Offers to a dumper that may be null.
inline void dump(Dumper* dumper, const std::string& name, const float* data,
                 const std::vector<int64_t>& shape) {
    if (dumper && dumper->wants(name)) dumper->offer(name, data, shape);
}

}  // namespace surf::model
