// AvgPool2D: the mean of each window, padding excluded (implementation shared in Pool2D.cpp).
#include "core/layers/BuiltinLayers.h"

namespace strata::layers {

std::unique_ptr<LayerType> makeAvgPool2D() {
    return makePool2DType(PoolMode::Average, "AvgPool2D",
                          "2-D average pooling over images [channels, height, width]: the mean of each window "
                          "(padding not counted).");
}

}  // namespace strata::layers
