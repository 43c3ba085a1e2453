// Profile: where a training step's time goes, layer by layer (strata-train profile, the workbench's Profile
// action). Runs real training steps of a project on a backend (the Trainer's TrainingStep with the project's
// data, model, loss, precision and optimizer) and reports, for every layer, forward and backward time, an
// estimate of FLOPs and bytes moved, the achieved GFLOP/s and GB/s, and the device's roofline: peak FLOP/s (a
// large GEMM) and bandwidth (a large copy), measured once per device and cached.
//
// Timing: steps alternate between timed steps, where Model's layer hook synchronizes the backend around
// each layer call (so a layer's time is its own on an asynchronous GPU) and the step's phase hook after each
// of its phases, and plain steps as the Trainer runs them.
// Medians over the steps. The plain step splits into data wait (next batch and its upload), compute
// (the layers, loss and optimizer, as the timed steps measured them) and framework overhead (the rest: the
// loop, launches, what the synchronizations hid). FLOPs and bytes are each layer type's estimate from the
// shapes (LayerType::cost: matmul and convolution layers 2 FLOPs per multiply-add, pooling one op per window
// element, most others one per output element); bytes count each input, output and parameter once (forward)
// and gradients once more (backward), so achieved bandwidth is a lower bound. The timed steps also time each
// matrix product and convolution (Backend::setProductClock): the report says how much of the step they are, so
// what a faster product precision can gain at most (formatProfile's "products" line).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/backend/Backend.h"
#include "core/graph/Project.h"

namespace strata {

struct Roofline {
    std::string device;  // the cache key: backend, device and its name
    double peakGflops = 0, peakGBps = 0;
    bool fromCache = false;
};

// Measures the roofline of `backend`'s device, or reads it from the cache file (JSON, one entry per device;
// empty path: defaultRooflineCachePath()). refresh measures again and rewrites the entry.
Roofline deviceRoofline(Backend& backend, const std::string& cachePath = {}, bool refresh = false);
std::string defaultRooflineCachePath();  // $XDG_CACHE_HOME (or ~/.cache)/strata/roofline.json

struct LayerProfile {
    int node = 0;
    std::string name, type, outputShape;  // per sample
    bool fused = false;                   // a ReLU run inside its producer: its forward time is the producer's
    bool absorbed = false;  // no backward call of its own (a ReLU done by the pooling after it or the layer
                            // before, the Input)
    double forwardMs = 0, backwardMs = 0;
    double forwardGflop = 0, backwardGflop = 0;  // per step
    double bytesMoved = 0;                       // forward + backward, per step
    double gflops = 0, gbps = 0;                 // achieved (FLOP and bytes over forward + backward time)
    double share = 0;                            // of the step's compute, 0..1
    double productMs = 0;                        // of forward + backward, in matrix products and convolutions
    int outputBlock = 0;                         // its output's layout: 0 NCHW, else blocked by it (Model)
};

struct ProfileOptions {
    int batch = 0;  // 0: the project's batch size
    int warmupSteps = 3;
    int steps = 10;  // timed steps, and as many plain steps
    std::string rooflineCache;
    bool measureRoofline = true;
};

struct ProfileReport {
    std::string device, deviceName;
    int batch = 0, steps = 0;
    // Every step's training loss, warm-up included: the same steps as a training run's first ones (the same
    // batches, dropout seeds and learning rates), so the same numbers.
    std::vector<double> losses;
    std::vector<LayerProfile> layers;    // topological order, Input left out
    double lossMs = 0, optimizerMs = 0;  // the loss (and its read-back) and the optimizer (zero, unscale, update)
    double betweenLayersMs = 0;          // forward and backward besides their layers' calls
    double layersMs = 0;                 // the layers' calls alone
    double computeMs = 0;                // the layers, between them, loss and optimizer
    double stepMs = 0;                   // a plain step, whole
    double dataWaitMs = 0, overheadMs = 0;
    double plainComputeMs = 0;  // a plain step without its data wait: what computeMs should add up to
    // The fastest step of each kind: on a busy machine the least disturbed, the fairest comparison of the
    // timed rows' sum with a plain step.
    double fastestComputeMs = 0, fastestPlainComputeMs = 0;
    // A timed step's matrix products and convolutions (Backend::setProductClock), wherever they run (layers,
    // loss, optimizer): the part of computeMs that a compute precision (bf16, fp16) changes.
    double productMs = 0;
    Roofline roofline;
};

// Throws (DataError, GraphError, BackendError ...) as a training run would, naming what is wrong.
ProfileReport profileProject(const Project& project, const std::string& projectPath, Backend& backend,
                             const ProfileOptions& options = {});
Json profileToJson(const ProfileReport& report);
std::string formatProfile(const ProfileReport& report);  // the table strata-train prints

}  // namespace strata
