#include "core/backend/Backend.h"

#include <string>
#include <vector>

namespace strata {

const char* computePrecisionName(ComputePrecision p) {
    switch (p) {
        case ComputePrecision::BF16: return "bf16";
        case ComputePrecision::F16: return "fp16";
        case ComputePrecision::F32: break;
    }
    return "fp32";
}

ComputePrecision parseComputePrecision(const std::string& text) {
    if (text == "fp32" || text == "f32") return ComputePrecision::F32;
    if (text == "bf16") return ComputePrecision::BF16;
    if (text == "fp16") return ComputePrecision::F16;
    throw std::invalid_argument("unknown precision '" + text + "' (expected fp32, bf16 or fp16)");
}

void Backend::setComputePrecision(ComputePrecision precision) {
    if (precision != ComputePrecision::F32)
        throw BackendError("the " + name() + " backend cannot compute gemm and convolutions in " +
                           computePrecisionName(precision) + "; use fp32");
}

Backend::UploadTicket Backend::uploadAsync(void* dst, const void* hostSrc, size_t bytes) {
    copyFromHost(dst, hostSrc, bytes);
    return 0;
}

Backend::StepMetrics Backend::stepMetrics(const float* losses, const float* logits, const int32_t* labels, int rows,
                                          int cols) {
    StepMetrics m;
    if (rows <= 0) return m;
    m.lossSum = sum(losses, rows);
    if (labels) m.correct = countCorrect(logits, labels, rows, cols);
    return m;
}

void Backend::gatherRows(void* dst, const void* src, int64_t srcRows, const int32_t* indices, int64_t count,
                         int64_t rowWords) {
    if (count <= 0 || rowWords <= 0) return;
    std::vector<int32_t> host(static_cast<size_t>(count));
    copyToHost(host.data(), indices, host.size() * sizeof(int32_t));
    const size_t rowBytes = static_cast<size_t>(rowWords) * 4;
    for (int64_t i = 0; i < count; ++i) {
        const int32_t r = host[static_cast<size_t>(i)];
        if (r < 0 || r >= srcRows)
            throw BackendError("gatherRows: index " + std::to_string(r) + " at position " + std::to_string(i) +
                               " is outside [0, " + std::to_string(srcRows) + ")");
        copy(static_cast<char*>(dst) + static_cast<size_t>(i) * rowBytes,
             static_cast<const char*>(src) + static_cast<size_t>(r) * rowBytes, rowBytes);
    }
}

void Backend::conv2dForwardFused(float* y, const float* x, const float* w, const float* bias, bool relu,
                                 const ConvDesc& d) {
    conv2dForward(y, x, w, d);
    const int inner = d.outH() * d.outW();
    if (bias) addBiasChannels(y, bias, d.n, d.k, inner);
    if (relu) activationForward(y, y, static_cast<int64_t>(d.n) * d.k * inner, Activation::ReLU, 0.0f);
}

void Backend::conv2dBackwardFused(float* dx, float* dw, float* dbias, const float* dy, const float* x,
                                  const float* w, const ConvDesc& d) {
    if (dx) conv2dBackwardData(dx, dy, w, d);
    if (dw) conv2dBackwardFilter(dw, dy, x, d);
    if (dbias) sumChannels(dbias, dy, d.n, d.k, d.outH() * d.outW());
}

void Backend::maxPool2dReLUBackward(float* dx, const float* dy, const float* x, const float* y, const PoolDesc& d) {
    if (d.mode != PoolMode::Max) throw BackendError("maxPool2dReLUBackward: the pooling must be max pooling");
    const int64_t n = static_cast<int64_t>(d.n) * d.c * d.h * d.w;
    Tensor routed = zeros(Shape{n});
    pool2dBackward(routed.f32(), dy, x, y, d);
    activationBackward(dx, routed.f32(), x, nullptr, n, Activation::ReLU, 0.0f);
}

Tensor Backend::empty(const Shape& shape, DType dtype) {
    const size_t bytes = static_cast<size_t>(shape.numel()) * dtypeSize(dtype);
    void* p = allocate(bytes == 0 ? 4 : bytes);
    const auto release = [](Backend* owner, void* ptr, size_t size) { owner->deallocate(ptr, size); };
    return Tensor(shape, dtype, std::make_shared<Storage>(this, device(), p, bytes == 0 ? 4 : bytes, release));
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
