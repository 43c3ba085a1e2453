// CpuBackend: the CPU's fast paths. OpenBLAS GEMM, oneDNN or im2col+GEMM
// convolution, and OpenMP-parallel element-wise, normalization and optimizer
// loops (CpuFast.h). Every fast path is tested against CpuReferenceBackend,
// the plain loops (tests/test_backend_ops.cpp). The "cpu" device of the
// registry. Memory and the bf16 / fp16 rounding: CpuMemoryBackend.
#pragma once

#include <cstdint>
#include <memory>

#include "core/backend/CpuMemoryBackend.h"

namespace strata {

namespace cpu {
class Workspace;  // per-thread scratch buffers of the fast paths (CpuFast.cpp)
}

class CpuBackend : public CpuMemoryBackend {
public:
    // options.threads <= 0: one per hardware thread.
    explicit CpuBackend(const BackendOptions& options = {});
    ~CpuBackend() override;

    // Fast-path convolutions through oneDNN (on by default when this build has it; otherwise
    // im2col + OpenBLAS). Shapes oneDNN cannot run use im2col either way.
    static bool oneDnnAvailable();
    void setOneDnn(bool on);
    bool oneDnn() const;
    // Winograd F(4x4, 3x3) for 3x3 stride-1 convolutions on blocked tensors (cpu::winogradApplies), where the CPU
    // runs it for the activation block (16 channels: AVX-512; 8: AVX2 and FMA); on by default there, unless
    // STRATA_WINOGRAD=0 (for comparisons). winogradRuns: whether this backend
    // runs this descriptor that way.
    static bool winogradAvailable();
    // Whether a bf16 backend's Winograd multiplies in bf16 here (AVX-512 with AVX512-BF16; STRATA_WINOGRAD_BF16=0
    // turns it off).
    static bool winogradBf16Available();
    void setWinograd(bool on);
    bool winogradRuns(const ConvDesc& d) const;
    // Convolutions with one output channel by direct row loops (cpu::narrowConvApplies): on by default, unless
    // STRATA_NARROW_CONV=0 (for comparisons); narrowConvCalls counts the calls that ran there.
    void setNarrowConv(bool on);
    bool narrowConvRuns(const ConvDesc& d) const;
    int64_t narrowConvCalls() const;
    // Precision bf16 is native (CpuBf16.h): made only on a CPU with AVX512-BF16 or AMX, else BackendError.
    // oneDNN's block (cpu::dnnlPreferredBlock) in float32 and bf16, unless STRATA_BLOCKED_LAYOUT=0; the same with
    // oneDNN switched off (setOneDnn), whose im2col path takes blocked tensors through NCHW copies.
    int activationBlock() const override;
    // How many GEMM products and convolution calls ran as oneDNN bf16 primitives, how many convolution backward
    // calls ran by Winograd on rounded copies (the rest of a bf16 backend's GEMMs and convolutions ran on rounded
    // float32 copies too), and how many Winograd passes (forward or input gradient) ran the bf16 products' kernel.
    struct Bf16Runs {
        int64_t gemms = 0, convolutions = 0, winogradBackward = 0, winogradBf16 = 0;
        int64_t transposedOperands = 0;  // GEMM operands transposed into bf16 by CpuBf16's own copy
    };
    Bf16Runs bf16Runs() const;

protected:
    // Every op of BackendOps.def without a default: `Ret doName(parameters) override;`.
#include "core/backend/BackendOpOverrides.def"

    // The ops with a default in Backend that the CPU runs its own way (gatherRows: CpuMemoryBackend's).
    // Fused with float32 compute and native bf16; fp16 runs Backend's composition (rounded operands).
    void doConv2dForwardFused(float* y, const float* x, const float* w, const float* bias, bool relu,
                              const ConvDesc& d) override;
    void doConv2dBackwardFused(float* dx, float* dw, float* dbias, const float* dy, const float* x, const float* w,
                               const ConvDesc& d, bool overwriteDx) override;
    // One pass for 2x2 stride-2 windows without padding; Backend's composition for other shapes.
    void doMaxPool2dReLUBackward(float* dx, const float* dy, const float* x, const float* y, const PoolDesc& d,
                                 bool overwriteDx) override;

private:
    bool bf16Dnnl() const;  // convolutions through oneDNN's bf16 primitives
    void countBf16Conv();
    bool bf16Skipped(const ConvDesc& d) const;   // native bf16 runs this convolution in float32 (CpuBackend.cpp)
    bool bf16Winograd(const ConvDesc& d) const;  // a 3x3 convolution by Winograd with bf16 products

    std::unique_ptr<cpu::Workspace> m_workspace;
};

}  // namespace strata
