// LayerHealthOverlay: the per-layer verdicts of the weight and gradient histograms (core/train/
// ParameterHistograms: assessLayers) as badges on the canvas: a small round mark at a node's top-right corner,
// red "!" for an exploding gradient or a dead ReLU, blue "v" for a vanishing gradient, its tooltip the verdict and
// what to try. Badges are child items of the nodes (NodeItem is left as it is) and are replaced as each sample
// arrives; a node whose layer is well carries none.
#pragma once

#include <QString>
#include <utility>
#include <vector>

#include "core/train/ParameterHistograms.h"

namespace strata::ui {

class GraphScene;

// Replaces every badge of the scene with those of `health` (the layers with a verdict).
void applyLayerHealth(GraphScene* scene, const std::vector<LayerHealth>& health);
void clearLayerHealth(GraphScene* scene);
// The badges shown, by node id, their tooltip (tests).
std::vector<std::pair<int, QString>> layerHealthBadges(GraphScene* scene);

}  // namespace strata::ui
