#include "model/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/error.h"

namespace surf::model {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the format caps headers at 100 MB

Error format_error(const std::string& path, const std::string& what) {
    return Error(ErrorKind::kFormat, path + ": " + what);
}

}  // namespace

int64_t TensorInfo::numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

std::string TensorInfo::shape_string() const {
    std::ostringstream out;
    out << "[";
    for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
    out << "]";
    return out.str();
}

std::vector<TensorInfo> SafetensorsFile::parse(const uint8_t* bytes, size_t file_size,
                                               const std::string& path,
                                               std::map<std::string, std::string>* metadata) {
    if (file_size < 8)
        throw format_error(
            path, "file is " + std::to_string(file_size) + " bytes, too short for a safetensors header");
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];  // little-endian u64
    if (header_len > kMaxHeaderBytes || header_len > file_size - 8) {
        throw format_error(path, "header length " + std::to_string(header_len) + " exceeds the file size " +
                                     std::to_string(file_size) + " (truncated or not a safetensors file)");
    }
    const char* header_begin = reinterpret_cast<const char*>(bytes + 8);
    json header;
    try {
        header = json::parse(header_begin, header_begin + header_len);
    } catch (const json::exception& e) {
        throw format_error(path, std::string("header is not valid JSON: ") + e.what());
    }
    if (!header.is_object()) throw format_error(path, "header is not a JSON object");
    const uint64_t data_start = 8 + header_len;
    const uint64_t data_size = file_size - data_start;

    std::vector<TensorInfo> tensors;
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    for (auto it = header.begin(); it != header.end(); ++it) {
        const std::string& name = it.key();
        if (name == "__metadata__") {
            if (!it->is_object()) throw format_error(path, "__metadata__ is not an object");
            for (auto m = it->begin(); m != it->end(); ++m) {
                if (!m->is_string())
                    throw format_error(path, "__metadata__ value '" + m.key() + "' is not a string");
                if (metadata) (*metadata)[m.key()] = m->get<std::string>();
            }
            continue;
        }
        const json& entry = *it;
        auto bad = [&](const std::string& what) {
            return format_error(path, "tensor '" + name + "': " + what);
        };
        if (!entry.is_object()) throw bad("entry is not an object");
        if (!entry.contains("dtype") || !entry["dtype"].is_string())
            throw bad("missing string field 'dtype'");
        if (!entry.contains("shape") || !entry["shape"].is_array()) throw bad("missing array field 'shape'");
        if (!entry.contains("data_offsets") || !entry["data_offsets"].is_array() ||
            entry["data_offsets"].size() != 2) {
            throw bad("missing field 'data_offsets' [begin, end]");
        }
        TensorInfo info;
        info.name = name;
        info.file = path;
        const std::string dtype = entry["dtype"].get<std::string>();
        if (!parse_dtype(dtype, &info.dtype)) throw bad("unsupported dtype '" + dtype + "'");
        uint64_t numel = 1;
        bool overflow = false;
        for (const json& dim : entry["shape"]) {
            if (!dim.is_number_unsigned()) throw bad("shape has a non-integer or negative dimension");
            const uint64_t d = dim.get<uint64_t>();
            if (d > (uint64_t{1} << 40))
                throw bad("dimension " + std::to_string(d) + " is implausibly large");
            if (d != 0 && numel > std::numeric_limits<uint64_t>::max() / d) overflow = true;
            numel *= d;
            info.shape.push_back(static_cast<int64_t>(d));
        }
        const json& offsets = entry["data_offsets"];
        if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
            throw bad("data_offsets are not non-negative integers");
        const uint64_t begin = offsets[0].get<uint64_t>();
        const uint64_t end = offsets[1].get<uint64_t>();
        if (begin > end)
            throw bad("data_offsets begin " + std::to_string(begin) + " > end " + std::to_string(end));
        if (end > data_size) {
            throw bad("data_offsets end " + std::to_string(end) + " is past the data section (" +
                      std::to_string(data_size) + " bytes): the file is truncated or corrupt");
        }
        const uint64_t elem = dtype_size(info.dtype);
        if (overflow || numel > std::numeric_limits<uint64_t>::max() / elem || numel * elem != end - begin) {
            throw bad("dtype " + dtype + " x shape " + info.shape_string() + " does not match its " +
                      std::to_string(end - begin) + " bytes");
        }
        info.data = bytes + data_start + begin;
        info.n_bytes = end - begin;
        ranges.emplace_back(begin, end);
        tensors.push_back(std::move(info));
    }
    // Tensors must not overlap (zero-sized tensors may share an offset).
    std::vector<size_t> order(tensors.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ranges[a] < ranges[b]; });
    for (size_t k = 1; k < order.size(); ++k) {
        const auto& prev = ranges[order[k - 1]];
        const auto& cur = ranges[order[k]];
        if (cur.first < prev.second && cur.first != cur.second) {
            throw format_error(path, "tensors '" + tensors[order[k - 1]].name + "' and '" +
                                         tensors[order[k]].name + "' overlap");
        }
    }
    return tensors;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error(ErrorKind::kIo, path + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        ::close(fd);
        throw Error(ErrorKind::kIo, path + ": cannot stat");
    }
    mapping_size_ = static_cast<size_t>(st.st_size);
    if (mapping_size_ > 0) {
        mapping_ = ::mmap(nullptr, mapping_size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (mapping_ == MAP_FAILED) {
            mapping_ = nullptr;
            ::close(fd);
            throw Error(ErrorKind::kIo, path + ": mmap failed: " + std::strerror(errno));
        }
    }
    ::close(fd);
    try {
        tensors_ = parse(static_cast<const uint8_t*>(mapping_), mapping_size_, path, &metadata_);
    } catch (...) {
        if (mapping_) ::munmap(mapping_, mapping_size_);
        mapping_ = nullptr;
        throw;
    }
}

SafetensorsFile::~SafetensorsFile() {
    if (mapping_) ::munmap(mapping_, mapping_size_);
}

Checkpoint Checkpoint::open(const std::string& path) {
    Checkpoint ckpt;
    ckpt.path_ = path;
    std::vector<std::string> files;
    std::map<std::string, std::string> expected_file;  // tensor -> shard, from the index
    if (fs::is_directory(path)) {
        const fs::path dir(path);
        const fs::path index = dir / "model.safetensors.index.json";
        if (fs::exists(index)) {
            std::ifstream in(index);
            json j;
            try {
                j = json::parse(in);
            } catch (const json::exception& e) {
                throw Error(ErrorKind::kFormat, index.string() + ": not valid JSON: " + e.what());
            }
            if (!j.contains("weight_map") || !j["weight_map"].is_object()) {
                throw Error(ErrorKind::kFormat, index.string() + ": missing object field 'weight_map'");
            }
            std::set<std::string> shards;
            for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
                if (!it->is_string())
                    throw Error(ErrorKind::kFormat,
                                index.string() + ": weight_map['" + it.key() + "'] is not a string");
                const std::string shard = it->get<std::string>();
                if (shard.find('/') != std::string::npos || shard.find("..") != std::string::npos) {
                    throw Error(ErrorKind::kFormat,
                                index.string() + ": shard name '" + shard + "' leaves the folder");
                }
                shards.insert(shard);
                expected_file[it.key()] = (dir / shard).string();
            }
            for (const auto& shard : shards) files.push_back((dir / shard).string());
        } else if (fs::exists(dir / "model.safetensors")) {
            files.push_back((dir / "model.safetensors").string());
        } else {
            throw Error(ErrorKind::kIo,
                        path + ": no model.safetensors or model.safetensors.index.json in this folder");
        }
    } else if (fs::exists(path)) {
        files.push_back(path);
    } else {
        throw Error(ErrorKind::kIo, path + ": no such file or folder");
    }
    for (const auto& file : files) {
        auto mapped = std::make_shared<SafetensorsFile>(file);
        for (const auto& info : mapped->tensors()) {
            if (ckpt.by_name_.count(info.name)) {
                throw Error(ErrorKind::kFormat, file + ": tensor '" + info.name + "' also appears in " +
                                                    ckpt.by_name_[info.name]->file);
            }
            auto want = expected_file.find(info.name);
            if (!expected_file.empty() && (want == expected_file.end() || want->second != file)) {
                throw Error(ErrorKind::kFormat,
                            file + ": tensor '" + info.name +
                                "' is not listed for this shard in model.safetensors.index.json");
            }
            ckpt.by_name_[info.name] = &info;
        }
        ckpt.files_.push_back(std::move(mapped));
    }
    for (const auto& [name, file] : expected_file) {
        if (!ckpt.by_name_.count(name)) {
            throw Error(ErrorKind::kFormat,
                        file + ": tensor '" + name +
                            "' is listed in model.safetensors.index.json but missing from the shard");
        }
    }
    return ckpt;
}

bool Checkpoint::has(std::string_view name) const {
    return by_name_.find(name) != by_name_.end();
}

const TensorInfo* Checkpoint::find(std::string_view name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second;
}

const TensorInfo& Checkpoint::get(std::string_view name) const {
    const TensorInfo* info = find(name);
    if (!info) throw Error(ErrorKind::kFormat, path_ + ": missing tensor '" + std::string(name) + "'");
    return *info;
}

std::vector<std::string> Checkpoint::names() const {
    std::vector<std::string> out;
    for (const auto& [name, info] : by_name_) out.push_back(name);
    return out;
}

std::vector<float> Checkpoint::to_f32(std::string_view name) const {
    const TensorInfo& info = get(name);
    switch (info.dtype) {
        case DType::kF32:
        case DType::kF16:
        case DType::kBF16:
        case DType::kF8E4M3: break;
        default:
            throw Error(ErrorKind::kFormat, info.file + ": tensor '" + info.name + "' has dtype " +
                                                dtype_name(info.dtype) + ", expected a float type");
    }
    std::vector<float> out(static_cast<size_t>(info.numel()));
    convert_to_f32(info.dtype, info.data, out.size(), out.data());
    return out;
}

std::vector<int64_t> Checkpoint::to_i64(std::string_view name) const {
    const TensorInfo& info = get(name);
    std::vector<int64_t> out(static_cast<size_t>(info.numel()));
    if (info.dtype == DType::kI64) {
        std::memcpy(out.data(), info.data, info.n_bytes);
    } else if (info.dtype == DType::kI32) {
        for (size_t i = 0; i < out.size(); ++i) {
            int32_t v;
            std::memcpy(&v, info.data + 4 * i, 4);
            out[i] = v;
        }
    } else {
        throw Error(ErrorKind::kFormat, info.file + ": tensor '" + info.name + "' has dtype " +
                                            dtype_name(info.dtype) + ", expected I64 or I32");
    }
    return out;
}

std::string serialize_safetensors(const std::vector<TensorToWrite>& tensors,
                                  const std::map<std::string, std::string>& metadata) {
    json header = json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    uint64_t offset = 0;
    std::vector<uint64_t> sizes;
    for (const auto& t : tensors) {
        uint64_t numel = 1;
        for (int64_t d : t.shape) numel *= static_cast<uint64_t>(d);
        const uint64_t bytes = numel * dtype_size(t.dtype);
        header[t.name] = {
            {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
        sizes.push_back(bytes);
        offset += bytes;
    }
    std::string text = header.dump();
    while ((text.size() + 8) % 8 != 0) text.push_back(' ');  // align the data section to 8 bytes
    std::string out(8, '\0');
    const uint64_t len = text.size();
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((len >> (8 * i)) & 0xff);
    out += text;
    // The header's JSON object is key-sorted, but offsets follow the input order: write in input order.
    for (size_t i = 0; i < tensors.size(); ++i)
        out.append(static_cast<const char*>(tensors[i].data), sizes[i]);
    return out;
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
    const std::string bytes = serialize_safetensors(tensors, metadata);
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw Error(ErrorKind::kIo, path + ": cannot open for writing");
        out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        if (!out) throw Error(ErrorKind::kIo, path + ": write failed");
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) throw Error(ErrorKind::kIo, path + ": cannot rename from " + tmp + ": " + ec.message());
}

}  // namespace surf::model
