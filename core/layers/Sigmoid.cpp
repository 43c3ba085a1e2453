// Sigmoid: 1 / (1 + exp(-x)), element-wise, any shape.
#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

class SigmoidType : public LayerType {
public:
    std::string name() const override { return "Sigmoid"; }
    std::string category() const override { return "Activation"; }
    std::string description() const override {
        return "Logistic sigmoid: 1 / (1 + exp(-x)), element-wise; squashes values into (0, 1).";
    }
    std::vector<ParamSpec> paramSpecs() const override { return {}; }
    Shape inferShape(const Json&, const std::vector<Shape>& inputs) const override {
        expectInputCount(name(), {"in"}, inputs);
        return inputs[0];
    }
    std::unique_ptr<Layer> create(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return makeActivationLayer(Activation::Sigmoid, 0.0f);
    }
    LayerCost cost(const Json&, const std::vector<Shape>& inputs, const Shape& output) const override {
        return elementwiseCost(inputs, output);
    }
    CompressibleWeight compressibleWeight() const override { return {}; }
    ChannelFacts channelFacts(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return perChannelFacts();
    }
    std::optional<Activation> activation() const override { return Activation::Sigmoid; }
};

}  // namespace

std::unique_ptr<LayerType> makeSigmoid() { return std::make_unique<SigmoidType>(); }

}  // namespace strata::layers
