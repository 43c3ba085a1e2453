// MemoryEstimate: the peak memory a training run will take, predicted from the graph, the training
// settings and the batch size before anything is allocated, so that a model too big for the device is
// refused with numbers instead of growing until the kernel kills the process.
//
// The prediction mirrors what compile(), the Optimizer, the BatchStager and the Trainer allocate through
// the Backend: parameters (each allocated once by compile, then packed: both exist for a moment),
// gradients, optimizer state (SGD with momentum: one slot; Adam/AdamW: two), every layer's output and
// output gradient for the batch (a ReLU fused into its producer shares its buffer; one absorbed by the max
// pooling after it has no gradient), the two staged input and label buffers and the loss buffers. Storage
// is float32 in every precision (bf16/fp16 round copies of gemm inputs, outside the Backend's memory; the CPU's
// native bf16 counts its copies in lowPrecisionHostBytes).
// tests/test_memory_estimate compares it with the CPU backend's measured peak on the example projects.
// For a CUDA device (training.device "cuda:N") every allocation is sized as CudaAllocator's size classes
// size it (up to 25% more for large blocks), and a graph with a convolution adds cuDNN's workspace bound;
// test_gpu_device compares that with CudaBackend's measured peak where a GPU is found.
//
// Besides the device's memory a run needs host memory for the loader's batches (three buffers on its
// worker thread, one with the consumer); on the CPU the two add up.
#pragma once

#include <cstdint>
#include <string>

#include "core/backend/CudaMemoryClasses.h"  // cudaAllocationClass, kCudaConvWorkspaceLimit
#include "core/graph/Graph.h"
#include "core/graph/Settings.h"

namespace strata {

struct MemoryEstimate {
    int64_t batch = 0;
    uint64_t parameters = 0;       // values, trainable and not
    uint64_t gradients = 0;        // of the trainable parameters
    uint64_t optimizerState = 0;   // momentum / Adam moments
    uint64_t activations = 0;      // layer outputs and output gradients for the batch (kept for backward)
    uint64_t buffers = 0;          // staged batches, loss buffers, layers' own scratch
    uint64_t workspace = 0;        // CUDA with a convolution: cuDNN's workspace, its upper bound
    uint64_t compilePeak = 0;      // while compile packs the parameters
    uint64_t trainingPeak = 0;     // during a step
    uint64_t deviceBytes = 0;      // the device's peak: max(compilePeak, trainingPeak)
    uint64_t loaderHostBytes = 0;  // the loader's batches in host memory
    // CPU bf16: the bf16 copies of GEMM and convolution inputs, host memory outside the Backend's (0 otherwise).
    uint64_t lowPrecisionHostBytes = 0;
    // The layer with the largest output for the batch (what to shrink), and its output bytes.
    std::string largestLayer;
    uint64_t largestLayerBytes = 0;
    // The layer with the most parameters, and their bytes (values only).
    std::string largestParameterLayer;
    uint64_t largestParameterBytes = 0;
    // Bytes per sample of the batch-dependent part and the fixed part, on the device (for largestBatch).
    uint64_t perSampleBytes = 0, fixedBytes = 0;

    // deviceBytes plus the loader's host memory and the bf16 copies when the device is the CPU (they share one
    // memory).
    uint64_t totalOn(bool cpu) const { return deviceBytes + (cpu ? loaderHostBytes + lowPrecisionHostBytes : 0); }
};

// Throws GraphError (naming the node) when the graph is not valid. `batch` >= 1.
MemoryEstimate estimateTrainingMemory(const Graph& graph, const TrainingSettings& training, int64_t batch);

// The largest batch whose estimate fits in `availableBytes` (cpu: the host part counted too), up to
// `maxBatch`; 0 when not even a batch of one fits.
int64_t largestBatchThatFits(const Graph& graph, const TrainingSettings& training, uint64_t availableBytes, bool cpu,
                             int64_t maxBatch = 1 << 20);

// Throws std::runtime_error with the numbers and a suggestion when the estimate for the training settings'
// batch does not fit in `availableBytes` of `device` ("cpu", "cuda:0"); returns the estimate otherwise.
MemoryEstimate checkTrainingFits(const Graph& graph, const TrainingSettings& training, const std::string& device,
                                 uint64_t availableBytes);

// "3.1 GiB", "512 MiB", "12 KiB".
std::string formatBytes(uint64_t bytes);

}  // namespace strata
