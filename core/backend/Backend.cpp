#include "core/backend/Backend.h"

namespace strata {

Tensor Backend::empty(const Shape& shape, DType dtype) {
    const size_t bytes = static_cast<size_t>(shape.numel()) * dtypeSize(dtype);
    void* p = allocate(bytes == 0 ? 4 : bytes);
    return Tensor(shape, dtype, std::make_shared<Storage>(this, p, bytes == 0 ? 4 : bytes));
}

Tensor Backend::zeros(const Shape& shape, DType dtype) {
    Tensor t = empty(shape, dtype);
    zero(t.raw(), t.bytes());
    return t;
}

Tensor Backend::fromHost(const Shape& shape, const float* hostData) {
    Tensor t = empty(shape, DType::F32);
    copyFromHost(t.raw(), hostData, t.bytes());
    return t;
}

void Backend::toHost(const Tensor& t, float* hostDst) { copyToHost(hostDst, t.raw(), t.bytes()); }

}  // namespace strata
