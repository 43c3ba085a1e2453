// GELU: x * Phi(x) (the exact erf form), element-wise, any shape.
#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

class GELUType : public LayerType {
public:
    std::string name() const override { return "GELU"; }
    std::string category() const override { return "Activation"; }
    std::string description() const override {
        return "Gaussian error linear unit: x times the standard normal CDF of x (exact erf form), element-wise.";
    }
    std::vector<ParamSpec> paramSpecs() const override { return {}; }
    Shape inferShape(const Json&, const std::vector<Shape>& inputs) const override {
        expectInputCount(name(), {"in"}, inputs);
        return inputs[0];
    }
    std::unique_ptr<Layer> create(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return makeActivationLayer(Activation::GELU, 0.0f);
    }
    LayerCost cost(const Json&, const std::vector<Shape>& inputs, const Shape& output) const override {
        return elementwiseCost(inputs, output);
    }
    CompressibleWeight compressibleWeight() const override { return {}; }
    ChannelFacts channelFacts(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return perChannelFacts();
    }
    std::optional<Activation> activation() const override { return Activation::GELU; }
};

}  // namespace

std::unique_ptr<LayerType> makeGELU() { return std::make_unique<GELUType>(); }

}  // namespace strata::layers
