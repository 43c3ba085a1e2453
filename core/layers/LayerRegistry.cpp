// The layer registry and the one explicit list of built-in layer types.
#include "core/layers/LayerRegistry.h"

#include <stdexcept>

#include "core/layers/BuiltinLayers.h"

namespace strata {

void LayerRegistry::add(std::unique_ptr<LayerType> type) {
    if (!type) throw std::invalid_argument("LayerRegistry::add: null layer type");
    if (find(type->name())) throw std::logic_error("layer type '" + type->name() + "' is registered twice");
    m_types.push_back(std::move(type));
}

const LayerType* LayerRegistry::find(const std::string& name) const {
    for (const auto& t : m_types)
        if (t->name() == name) return t.get();
    return nullptr;
}

std::vector<std::string> LayerRegistry::names() const {
    std::vector<std::string> out;
    out.reserve(m_types.size());
    for (const auto& t : m_types) out.push_back(t->name());
    return out;
}

namespace {

// Every built-in type, in palette order. A new layer type adds one line here.
void registerBuiltinLayers(LayerRegistry& r) {
    using namespace layers;
    r.add(makeInput());
    r.add(makeDense());
    r.add(makeFlatten());
    r.add(makeReshape());
    r.add(makeAdd());
    r.add(makeConcat());
    r.add(makeConv2D());
    r.add(makeMaxPool2D());
    r.add(makeAvgPool2D());
    r.add(makeGlobalAvgPool());
    r.add(makeReLU());
    r.add(makeLeakyReLU());
    r.add(makeGELU());
    r.add(makeSigmoid());
    r.add(makeTanh());
    r.add(makeSoftmax());
    r.add(makeBatchNorm());
    r.add(makeLayerNorm());
    r.add(makeDropout());
    r.add(makeEmbedding());
    r.add(makeSequenceMeanPool());
    r.add(makePositionalEmbedding());
    r.add(makeConv1D());
    r.add(makeSequenceMaxPool());
    r.add(makeMultiHeadSelfAttention());
}

}  // namespace

const LayerRegistry& layerRegistry() {
    // A function-local static: built on first use, thread-safe, and immune to static-library
    // link order (the registration list is code called from here, not static initializers).
    static const LayerRegistry registry = [] {
        LayerRegistry r;
        registerBuiltinLayers(r);
        return r;
    }();
    return registry;
}

}  // namespace strata
