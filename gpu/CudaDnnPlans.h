// Convolution plans: cuDNN descriptors and the algorithms chosen for one
// convolution shape, built on first use and cached (private to strata_gpu).
// A plan also holds what the fused forward (cudnnConvolutionBiasActivationForward)
// needs: the 1xKx1x1 bias descriptor, ReLU and identity activation descriptors,
// and whether cuDNN refused the fused call for this shape (then the plan's layer
// runs as separate GPU ops; see CudaBackend::conv2dForwardFused in CudaDnn.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <map>
#include <memory>

#include <cudnn.h>

namespace strata::gpu {

struct ConvAlgoChoice {
    bool chosen = false;
    int algo = 0;  // cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
    size_t workspace = 0;
};

struct ConvPlan {
    ConvPlan();
    ~ConvPlan();
    ConvPlan(const ConvPlan&) = delete;
    ConvPlan& operator=(const ConvPlan&) = delete;

    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    cudnnTensorDescriptor_t bias = nullptr;  // 1 x K x 1 x 1
    cudnnActivationDescriptor_t relu = nullptr, identity = nullptr;
    ConvAlgoChoice forward, backwardData, backwardFilter;
    // Set when cudnnConvolutionBiasActivationForward answered NOT_SUPPORTED for this plan's forward
    // algorithm with that activation; later calls go straight to the separate ops.
    bool fusedReluUnsupported = false;
    bool fusedIdentityUnsupported = false;

private:
    void destroy() noexcept;
};

struct ConvPlanCache {
    using Key = std::array<int, 15>;
    std::map<Key, std::unique_ptr<ConvPlan>> plans;
    void clear() { plans.clear(); }
};

}  // namespace strata::gpu
