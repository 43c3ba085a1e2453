// Structured pruning: removes whole Conv2D filters and Dense units, the ones whose weights have the smallest
// L1 or L2 norm, together with everything they feed (the bias entry, the BatchNorm channel and its running
// statistics on the way, the next Conv2D's input channel or the next Dense's input columns, a block of
// height x width columns after a Flatten). The graph is rewritten with the smaller sizes, so the result is an
// ordinary project and weights that every exporter and the Trainer take as they are, and that run faster.
//
// A layer is pruned when each path from its output reaches Conv2D or Dense layers through layers that keep
// channels apart (activations, Dropout, pooling, BatchNorm, GlobalAvgPool, Flatten). Others are left as they
// are and the result says why: the graph's output layer (its size is the number of classes), grouped
// convolutions, and layers feeding Add, Concat, Reshape, LayerNorm, Softmax or the graph's output. Which
// layer does what with channels is its type's fact (LayerType::channelFacts), never its name.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/graph/Project.h"

namespace strata {

enum class FilterNorm { L1, L2 };
const char* filterNormName(FilterNorm norm);  // "l1", "l2"
FilterNorm parseFilterNorm(const std::string& text);

struct StructuredPruneOptions {
    double fraction = 0.5;  // of each prunable layer's filters or units removed, in (0, 1)
    FilterNorm norm = FilterNorm::L1;
};

struct PrunedLayer {
    std::string node, type;         // "conv1", "Conv2D"
    std::string unit;               // what its channels are called: "filters", "units"
    int64_t before = 0, after = 0;  // filters or units
    std::string skipped;            // why the layer was left as it is; empty when pruned
};

struct StructuredPruneResult {
    Project project;                                    // the graph with the smaller layer sizes
    std::map<std::string, std::vector<float>> weights;  // every parameter, sliced to the new sizes
    std::vector<PrunedLayer> layers;                    // every layer with filters or units, pruned or not
    int64_t parametersBefore = 0, parametersAfter = 0;  // values of every parameter and state tensor
};

// `weights` holds every parameter of `project.graph` by "<node>.<param>" (a checkpoint's). Throws
// std::invalid_argument for a fraction outside (0, 1) or when no layer can be pruned, std::runtime_error
// naming the tensor when a weight is missing or mis-sized.
StructuredPruneResult pruneStructured(const Project& project, const std::map<std::string, std::vector<float>>& weights,
                                      const StructuredPruneOptions& options);

}  // namespace strata
