// The layer registry and the one explicit list of built-in layer types.
#include "core/layers/LayerRegistry.h"

#include <stdexcept>

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

// Every built-in type, in palette order: a new layer type adds one line here, X(Name) for the factory
// layers::makeName() that its own file defines.
#define STRATA_BUILTIN_LAYERS(X) \
    X(Input)                     \
    X(Dense)                     \
    X(Flatten)                   \
    X(Reshape)                   \
    X(Add)                       \
    X(Concat)                    \
    X(Conv2D)                    \
    X(ConvTranspose2D)           \
    X(Upsample2D)                \
    X(MaxPool2D)                 \
    X(AvgPool2D)                 \
    X(GlobalAvgPool)             \
    X(ReLU)                      \
    X(LeakyReLU)                 \
    X(GELU)                      \
    X(Sigmoid)                   \
    X(Tanh)                      \
    X(Clip)                      \
    X(HardSwish)                 \
    X(Softmax)                   \
    X(BatchNorm)                 \
    X(LayerNorm)                 \
    X(Dropout)                   \
    X(Embedding)                 \
    X(SequenceMeanPool)          \
    X(PositionalEmbedding)       \
    X(Conv1D)                    \
    X(SequenceMaxPool)           \
    X(MultiHeadSelfAttention)

namespace layers {
#define STRATA_DECLARE_LAYER(name) std::unique_ptr<LayerType> make##name();
STRATA_BUILTIN_LAYERS(STRATA_DECLARE_LAYER)
#undef STRATA_DECLARE_LAYER
}  // namespace layers

namespace {

void registerBuiltinLayers(LayerRegistry& r) {
#define STRATA_REGISTER_LAYER(name) r.add(layers::make##name());
    STRATA_BUILTIN_LAYERS(STRATA_REGISTER_LAYER)
#undef STRATA_REGISTER_LAYER
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
