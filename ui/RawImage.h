// RawImage: a model input's raw values (0..255 in [C, H, W] planes of 1 or 3 channels, or [H, W]) as a picture,
// for the docks that show samples (Predict, Projector). Display only: the values come from core as they are.
#pragma once

#include <QImage>

#include "core/tensor/Shape.h"

namespace strata::ui {

// Channels, height and width of an image-shaped input ([1 or 3, H, W], or [H, W] as one channel); false for
// other inputs.
bool imageDims(const Shape& s, int& c, int& h, int& w);
// The picture of one sample's raw values (each rounded and clamped to 0..255); null for a non-image shape.
QImage rawToImage(const float* x, const Shape& shape);

}  // namespace strata::ui
