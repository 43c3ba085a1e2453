// The one list of layer types. Types are registered explicitly in
// registerBuiltinLayers() (LayerRegistry.cpp), never by static initializers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/layers/Layer.h"

namespace strata {

class LayerRegistry {
public:
    void add(std::unique_ptr<LayerType> type);
    // nullptr when unknown.
    const LayerType* find(const std::string& name) const;
    const std::vector<std::unique_ptr<LayerType>>& all() const { return m_types; }
    std::vector<std::string> names() const;

private:
    std::vector<std::unique_ptr<LayerType>> m_types;
};

// The registry with every built-in layer type (built on first use).
const LayerRegistry& layerRegistry();

}  // namespace strata
