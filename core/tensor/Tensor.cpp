#include "core/tensor/Tensor.h"

#include <stdexcept>
#include <string>

namespace strata {

size_t dtypeSize(DType t) {
    switch (t) {
        case DType::F32: return 4;
        case DType::BF16: return 2;
        case DType::F16: return 2;
        case DType::I32: return 4;
        case DType::U8: return 1;
    }
    return 0;
}

const char* dtypeName(DType t) {
    switch (t) {
        case DType::F32: return "f32";
        case DType::BF16: return "bf16";
        case DType::F16: return "f16";
        case DType::I32: return "i32";
        case DType::U8: return "u8";
    }
    return "?";
}

DType parseDType(const std::string& name) {
    for (DType t : {DType::F32, DType::BF16, DType::F16, DType::I32, DType::U8})
        if (name == dtypeName(t)) return t;
    throw std::invalid_argument("unknown dtype '" + name + "' (expected f32, bf16, f16, i32 or u8)");
}

int64_t Shape::numel() const { return product(0, rank()); }

int64_t Shape::product(int from, int to) const {
    int64_t p = 1;
    for (int i = from; i < to; ++i)
        if (__builtin_mul_overflow(p, m_dims[static_cast<size_t>(i)], &p))
            throw std::overflow_error("shape " + toString() + ": the dimensions multiply past 2^63 elements");
    return p;
}

Shape Shape::withBatch(int64_t n) const {
    std::vector<int64_t> d;
    d.reserve(m_dims.size() + 1);
    d.push_back(n);
    d.insert(d.end(), m_dims.begin(), m_dims.end());
    return Shape(std::move(d));
}

Shape Shape::dropFirst() const {
    if (m_dims.empty()) return {};
    return Shape(std::vector<int64_t>(m_dims.begin() + 1, m_dims.end()));
}

std::string Shape::toString() const {
    std::string s = "[";
    for (size_t i = 0; i < m_dims.size(); ++i) {
        if (i) s += ", ";
        s += std::to_string(m_dims[i]);
    }
    return s + "]";
}

Device Device::parse(const std::string& text) {
    if (text == "cpu") return cpu();
    if (text == "cuda") return cuda(0);
    if (text.rfind("cuda:", 0) == 0) {
        const std::string idx = text.substr(5);
        // At most 4 digits: "cuda:99999999999" is an out-of-range index, not an exception from stoi.
        if (!idx.empty() && idx.find_first_not_of("0123456789") == std::string::npos) {
            if (idx.size() <= 4) return cuda(std::stoi(idx));
            throw std::invalid_argument("device '" + (text.size() > 40 ? text.substr(0, 40) + "..." : text) +
                                        "': the GPU index is out of range (0 to 9999)");
        }
    }
    throw std::invalid_argument("unknown device '" + (text.size() > 200 ? text.substr(0, 200) + "..." : text) +
                                "' (expected cpu, cuda or cuda:N)");
}

std::vector<Device> Device::parseList(const std::string& text) {
    const std::string shown = text.size() > 200 ? text.substr(0, 200) + "..." : text;
    std::vector<Device> out;
    size_t at = 0;
    while (true) {
        const size_t comma = text.find(',', at);
        const std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        if (item.empty())
            throw std::invalid_argument("device list '" + shown + "': an empty entry (write e.g. cuda:0,cuda:1)");
        const Device d = parse(item);
        for (const Device& seen : out)
            if (seen == d && !d.isCpu())
                throw std::invalid_argument("device list '" + shown + "': " + d.toString() + " is named twice");
        out.push_back(d);
        if (comma == std::string::npos) break;
        at = comma + 1;
    }
    return out;
}

std::string Device::toString() const { return type == DeviceType::Cpu ? "cpu" : "cuda:" + std::to_string(index); }

Storage::~Storage() {
    if (m_release && m_ptr) m_release(m_backend, m_ptr, m_bytes);
}

Device Tensor::device() const { return m_storage ? m_storage->device() : Device::cpu(); }

float* Tensor::f32() const {
    if (m_dtype != DType::F32) throw std::logic_error(std::string("tensor is ") + dtypeName(m_dtype) + ", not f32");
    return static_cast<float*>(raw());
}

int32_t* Tensor::i32() const {
    if (m_dtype != DType::I32) throw std::logic_error(std::string("tensor is ") + dtypeName(m_dtype) + ", not i32");
    return static_cast<int32_t*>(raw());
}

Tensor Tensor::reshaped(const Shape& shape) const {
    if (shape.numel() != numel())
        throw std::invalid_argument("cannot reshape " + m_shape.toString() + " to " + shape.toString());
    return Tensor(shape, m_dtype, m_storage, m_offset);
}

Tensor Tensor::view(const Shape& shape) const {
    if (m_offset + static_cast<size_t>(shape.numel()) * dtypeSize(m_dtype) > (m_storage ? m_storage->bytes() : 0))
        throw std::invalid_argument("view " + shape.toString() + " is larger than the storage of " +
                                    m_shape.toString());
    return Tensor(shape, m_dtype, m_storage, m_offset);
}

Tensor Tensor::slice(int64_t elementOffset, const Shape& shape) const {
    const size_t begin = m_offset + static_cast<size_t>(elementOffset) * dtypeSize(m_dtype);
    if (elementOffset < 0 ||
        begin + static_cast<size_t>(shape.numel()) * dtypeSize(m_dtype) > (m_storage ? m_storage->bytes() : 0))
        throw std::invalid_argument("slice " + shape.toString() + " at element " + std::to_string(elementOffset) +
                                    " does not fit in the storage of " + m_shape.toString());
    return Tensor(shape, m_dtype, m_storage, begin);
}

}  // namespace strata
