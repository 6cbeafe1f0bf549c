// A host fp32 tensor: the CPU backend's storage for weights and activations.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace surf::model {

struct Tensor {
    std::vector<float> data;
    std::vector<int64_t> shape;

    Tensor() = default;
    explicit Tensor(std::vector<int64_t> dims) : shape(std::move(dims)) {
        data.assign(static_cast<size_t>(numel()), 0.0f);
    }

    int64_t numel() const {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        return n;
    }
    int64_t dim(size_t i) const { return shape.at(i); }
    bool empty() const { return data.empty(); }
    float* ptr() { return data.data(); }
    const float* ptr() const { return data.data(); }
};

}  // namespace surf::model
