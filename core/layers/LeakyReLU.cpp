// LeakyReLU: x for x > 0, alpha * x otherwise; element-wise, any shape.
#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

class LeakyReLUType : public LayerType {
public:
    std::string name() const override { return "LeakyReLU"; }
    std::string category() const override { return "Activation"; }
    std::string description() const override {
        return "Leaky rectified linear unit: x where x > 0, alpha * x elsewhere, element-wise.";
    }
    std::vector<ParamSpec> paramSpecs() const override {
        return {floatParam("alpha", 0.01, 0.0, 1.0, "slope for negative inputs")};
    }
    Shape inferShape(const Json&, const std::vector<Shape>& inputs) const override {
        expectInputCount(name(), {"in"}, inputs);
        return inputs[0];
    }
    std::unique_ptr<Layer> create(const Json& params, const std::vector<Shape>&, const Shape&) const override {
        return makeActivationLayer(Activation::LeakyReLU, params.at("alpha").get<float>());
    }
    LayerCost cost(const Json&, const std::vector<Shape>& inputs, const Shape& output) const override {
        return elementwiseCost(inputs, output);
    }
    CompressibleWeight compressibleWeight() const override { return {}; }
    ChannelFacts channelFacts(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return perChannelFacts();
    }
    std::optional<Activation> activation() const override { return Activation::LeakyReLU; }
};

}  // namespace

std::unique_ptr<LayerType> makeLeakyReLU() { return std::make_unique<LeakyReLUType>(); }

}  // namespace strata::layers
