// Safetensors checkpoints: memory-mapped, header-validated, single file or sharded through
// model.safetensors.index.json. Every tensor's bytes are checked to lie inside its file, to not overlap
// another tensor, and to match dtype × shape, so a corrupt file gives an error naming the file and the
// tensor instead of an out-of-bounds read.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/checkpoint/dtype.h"

namespace surf::model {

struct TensorInfo {
    std::string name;
    DType dtype = DType::kF32;
    std::vector<int64_t> shape;
    const uint8_t* data = nullptr;  // points into the mapped file
    size_t n_bytes = 0;
    std::string file;  // the file it lives in, for messages

    int64_t numel() const;
    std::string shape_string() const;  // "[a, b, c]"
};

// One mapped .safetensors file. Throws surf::Error(kIo / kFormat) naming the file (and tensor).
class SafetensorsFile {
public:
    explicit SafetensorsFile(const std::string& path);
    ~SafetensorsFile();
    SafetensorsFile(const SafetensorsFile&) = delete;
    SafetensorsFile& operator=(const SafetensorsFile&) = delete;

    // Parses a header from memory (no file): used by the fuzz test. `file_size` is the size of the whole
    // buffer (8-byte length + header + data).
    static std::vector<TensorInfo> parse(const uint8_t* bytes, size_t file_size, const std::string& path,
                                         std::map<std::string, std::string>* metadata = nullptr);

    const std::string& path() const { return path_; }
    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const std::map<std::string, std::string>& metadata() const { return metadata_; }

private:
    std::string path_;
    void* mapping_ = nullptr;
    size_t mapping_size_ = 0;
    std::vector<TensorInfo> tensors_;
    std::map<std::string, std::string> metadata_;
};

// All tensors of a checkpoint folder (or of one file).
class Checkpoint {
public:
    // `path` is a directory holding model.safetensors or model.safetensors.index.json (+ shards), or a file.
    static Checkpoint open(const std::string& path);

    bool has(std::string_view name) const;
    const TensorInfo& get(std::string_view name) const;  // throws kFormat naming the missing tensor
    const TensorInfo* find(std::string_view name) const;
    std::vector<std::string> names() const;
    size_t size() const { return by_name_.size(); }
    const std::string& path() const { return path_; }

    // Copies a tensor to fp32 (any float dtype), checking its element count.
    std::vector<float> to_f32(std::string_view name) const;
    std::vector<int64_t> to_i64(std::string_view name) const;

private:
    std::string path_;
    std::vector<std::shared_ptr<SafetensorsFile>> files_;
    std::map<std::string, const TensorInfo*, std::less<>> by_name_;
};

// A tensor to write: `data` holds numel × dtype_size bytes.
struct TensorToWrite {
    std::string name;
    DType dtype = DType::kF32;
    std::vector<int64_t> shape;
    const void* data = nullptr;
};

// Writes a safetensors file (used by SURF_DUMP and tests). Throws kIo naming the path.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Serialises to memory (same bytes write_safetensors writes).
std::string serialize_safetensors(const std::vector<TensorToWrite>& tensors,
                                  const std::map<std::string, std::string>& metadata = {});

}  // namespace surf::model
