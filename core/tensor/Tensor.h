// Tensor: a shape, an element type and a reference to storage owned by a
// Backend. Copies share storage (like a handle); use Backend::copy for data.
#pragma once

#include <cstddef>
#include <memory>

#include "core/tensor/DType.h"
#include "core/tensor/Device.h"
#include "core/tensor/Shape.h"

namespace strata {

class Backend;

// A block of backend memory; freed through its backend when the last Tensor goes. The backend frees it
// through `release`, so this folder needs no Backend definition (tensor/ sits below backend/).
class Storage {
public:
    using Release = void (*)(Backend* backend, void* ptr, size_t bytes);
    Storage(Backend* backend, Device device, void* ptr, size_t bytes, Release release)
        : m_backend(backend), m_device(device), m_ptr(ptr), m_bytes(bytes), m_release(release) {}
    ~Storage();
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;

    void* data() const { return m_ptr; }
    size_t bytes() const { return m_bytes; }
    Backend* backend() const { return m_backend; }
    Device device() const { return m_device; }

private:
    Backend* m_backend;
    Device m_device;
    void* m_ptr;
    size_t m_bytes;
    Release m_release;
};

class Tensor {
public:
    Tensor() = default;
    Tensor(Shape shape, DType dtype, std::shared_ptr<Storage> storage, size_t byteOffset = 0)
        : m_shape(std::move(shape)), m_dtype(dtype), m_storage(std::move(storage)), m_offset(byteOffset) {}

    bool defined() const { return m_storage != nullptr; }
    const Shape& shape() const { return m_shape; }
    DType dtype() const { return m_dtype; }
    int64_t numel() const { return m_shape.numel(); }
    size_t bytes() const { return static_cast<size_t>(numel()) * dtypeSize(m_dtype); }
    Backend* backend() const { return m_storage ? m_storage->backend() : nullptr; }
    Device device() const;

    // Raw pointers into backend memory (device pointers on a GPU backend).
    void* raw() const { return m_storage ? static_cast<char*>(m_storage->data()) + m_offset : nullptr; }
    float* f32() const;  // checks dtype == F32
    int32_t* i32() const;

    // Same storage, new shape with the same element count (throws otherwise).
    Tensor reshaped(const Shape& shape) const;
    // Same storage, a shape with at most as many elements: the first samples of a larger batch buffer.
    Tensor view(const Shape& shape) const;
    // Same storage, `shape` starting `elementOffset` elements into this tensor (parameters packed in one
    // block); throws when it does not fit in the storage.
    Tensor slice(int64_t elementOffset, const Shape& shape) const;
    const std::shared_ptr<Storage>& storageHandle() const { return m_storage; }

private:
    Shape m_shape;
    DType m_dtype = DType::F32;
    std::shared_ptr<Storage> m_storage;
    size_t m_offset = 0;  // bytes from the storage's start
};

}  // namespace strata
