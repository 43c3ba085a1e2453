// Dropout: in training, zeroes each element with probability `rate` and
// scales the rest by 1/(1-rate); the identity in evaluation. The mask comes
// from ctx.seed through the backend's counter-based RNG, so backward
// recomputes it instead of storing it. Counters are global element indices (LayerContext::firstSample), so
// data-parallel replicas together draw exactly the mask of one process on the global batch.
#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

class DropoutLayer : public Layer {
public:
    explicit DropoutLayer(float rate) : m_rate(rate) {}
    void forward(LayerContext& ctx, const std::vector<const Tensor*>& in, Tensor& out) override {
        m_active = ctx.training && m_rate > 0.0f;
        m_seed = ctx.seed;
        // Counters by global element index: a replica's slice draws the mask the whole batch has there.
        const int64_t batch = batchOf(out);
        m_first = batch > 0 ? static_cast<uint64_t>(ctx.firstSample * (out.numel() / batch)) : 0;
        if (m_active)
            ctx.backend.dropoutForward(out.f32(), in[0]->f32(), out.numel(), m_rate, m_seed, m_first);
        else
            ctx.backend.copy(out.raw(), in[0]->raw(), out.bytes());
    }
    void backward(LayerContext& ctx, const std::vector<const Tensor*>&, const Tensor&, const Tensor& dOut,
                  const std::vector<Tensor*>& dIn) override {
        if (!dIn[0]) return;
        // The mode and seed of the forward pass, which the mask came from.
        if (m_active)
            ctx.backend.dropoutBackward(dIn[0]->f32(), dOut.f32(), dOut.numel(), m_rate, m_seed, m_first);
        else
            ctx.backend.axpy(dIn[0]->f32(), 1.0f, dOut.f32(), dOut.numel());
    }

private:
    float m_rate;
    bool m_active = false;
    uint64_t m_seed = 0;
    uint64_t m_first = 0;
};

class DropoutType : public LayerType {
public:
    std::string name() const override { return "Dropout"; }
    std::string category() const override { return "Normalization"; }
    std::string description() const override {
        return "During training, zeroes a random fraction `rate` of the values and scales the rest up; passes "
               "values through unchanged when evaluating.";
    }
    std::vector<ParamSpec> paramSpecs() const override {
        return {floatParam("rate", 0.5, 0.0, 0.95, "fraction of values dropped during training")};
    }
    Shape inferShape(const Json&, const std::vector<Shape>& inputs) const override {
        expectInputCount(name(), {"in"}, inputs);
        return inputs[0];
    }
    std::unique_ptr<Layer> create(const Json& params, const std::vector<Shape>&, const Shape&) const override {
        return std::make_unique<DropoutLayer>(params.at("rate").get<float>());
    }
    LayerCost cost(const Json&, const std::vector<Shape>& inputs, const Shape& output) const override {
        return elementwiseCost(inputs, output);
    }
    CompressibleWeight compressibleWeight() const override { return {}; }
    ChannelFacts channelFacts(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return perChannelFacts();
    }
    bool identityAtInference() const override { return true; }
};

}  // namespace

std::unique_ptr<LayerType> makeDropout() { return std::make_unique<DropoutType>(); }

}  // namespace strata::layers
