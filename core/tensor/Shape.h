// Shape: the dimensions of a tensor, outermost first (NCHW for images).
// Graph shapes are per sample (no batch dimension); executed tensors carry
// the batch as their first dimension.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace strata {

// The most values one sample may hold (input, synthetic data, data files): 2^28 floats, 1 GiB. Larger
// samples are refused with an error rather than attempted (a wrapped or absurd size would otherwise reach
// an allocation).
constexpr int64_t kMaxSampleElements = int64_t{1} << 28;

class Shape {
public:
    Shape() = default;
    Shape(std::initializer_list<int64_t> dims) : m_dims(dims) {}
    explicit Shape(std::vector<int64_t> dims) : m_dims(std::move(dims)) {}

    int rank() const { return static_cast<int>(m_dims.size()); }
    int64_t operator[](int i) const { return m_dims[static_cast<size_t>(i)]; }
    int64_t& operator[](int i) { return m_dims[static_cast<size_t>(i)]; }
    const std::vector<int64_t>& dims() const { return m_dims; }
    bool empty() const { return m_dims.empty(); }

    // Product of all dimensions (1 for a scalar shape). Throws std::overflow_error naming the shape when the
    // product does not fit in int64_t, so a size read from a file can never wrap to a small number.
    int64_t numel() const;
    // Product of dimensions [from, to); throws std::overflow_error as numel() does.
    int64_t product(int from, int to) const;

    // A new shape with `n` in front: the batched shape of a per-sample shape.
    Shape withBatch(int64_t n) const;
    // The shape without its first dimension.
    Shape dropFirst() const;

    // "[1, 28, 28]"
    std::string toString() const;

    bool operator==(const Shape& o) const { return m_dims == o.m_dims; }
    bool operator!=(const Shape& o) const { return m_dims != o.m_dims; }

private:
    std::vector<int64_t> m_dims;
};

}  // namespace strata
