// MaxPool2D: the maximum of each window (implementation shared in Pool2D.cpp).
#include "core/layers/BuiltinLayers.h"

namespace strata::layers {

std::unique_ptr<LayerType> makeMaxPool2D() {
    return makePool2DType(PoolMode::Max, "MaxPool2D",
                          "2-D max pooling over images [channels, height, width]: the largest value of each "
                          "window; halves height and width with the default 2 x 2 kernel.");
}

}  // namespace strata::layers
