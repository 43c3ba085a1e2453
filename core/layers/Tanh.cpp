// Tanh: hyperbolic tangent, element-wise, any shape.
#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

class TanhType : public LayerType {
public:
    std::string name() const override { return "Tanh"; }
    std::string category() const override { return "Activation"; }
    std::string description() const override {
        return "Hyperbolic tangent, element-wise; squashes values into (-1, 1).";
    }
    std::vector<ParamSpec> paramSpecs() const override { return {}; }
    Shape inferShape(const Json&, const std::vector<Shape>& inputs) const override {
        expectInputCount(name(), {"in"}, inputs);
        return inputs[0];
    }
    std::unique_ptr<Layer> create(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return makeActivationLayer(Activation::Tanh, 0.0f);
    }
    LayerCost cost(const Json&, const std::vector<Shape>& inputs, const Shape& output) const override {
        return elementwiseCost(inputs, output);
    }
    CompressibleWeight compressibleWeight() const override { return {}; }
    ChannelFacts channelFacts(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return perChannelFacts();
    }
    std::optional<Activation> activation() const override { return Activation::Tanh; }
};

}  // namespace

std::unique_ptr<LayerType> makeTanh() { return std::make_unique<TanhType>(); }

}  // namespace strata::layers
