// Convolution plans: cuDNN descriptors and the algorithms chosen for one
// convolution shape, built on first use and cached (private to strata_gpu).
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
    ConvAlgoChoice forward, backwardData, backwardFilter;
};

struct ConvPlanCache {
    using Key = std::array<int, 15>;
    std::map<Key, std::unique_ptr<ConvPlan>> plans;
    void clear() { plans.clear(); }
};

}  // namespace strata::gpu
