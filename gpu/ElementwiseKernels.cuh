// Element-wise kernels, bias adds and block copies (host launchers only).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace strata::gpu {

void launchFill(cudaStream_t s, float* y, float value, int64_t n);
void launchScale(cudaStream_t s, float* y, float alpha, int64_t n);
void launchAxpy(cudaStream_t s, float* y, float alpha, const float* x, int64_t n);
void launchAdd(cudaStream_t s, float* y, const float* a, const float* b, int64_t n);
void launchMul(cudaStream_t s, float* y, const float* a, const float* b, int64_t n);
void launchAddBiasRows(cudaStream_t s, float* y, const float* bias, int rows, int cols);
void launchAddBiasChannels(cudaStream_t s, float* y, const float* bias, int n, int c, int inner);
// Rows of rowWords 4-byte words by int32 index; a bad index is reported through errorFlag (kGatherRowIndex)
// and its row is left unwritten.
void launchGatherRows(cudaStream_t s, void* dst, const void* src, int64_t srcRows, const int32_t* indices,
                      int64_t count, int64_t rowWords, int* errorFlag);
void launchCopyBlocks(cudaStream_t s, float* dst, int64_t dstStride, const float* src, int64_t srcStride,
                      int64_t blockLen, int64_t count, bool accumulate);
// Backend::reblock: an [n, c, inner] tensor between NCHW (block 0) and nChwBc.
void launchReblock(cudaStream_t s, float* dst, int dstBlock, const float* src, int srcBlock, int n, int c,
                   int64_t inner, bool accumulate);

}  // namespace strata::gpu
