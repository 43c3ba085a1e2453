// ReLU: max(x, 0), element-wise, any shape.
#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

class ReLUType : public LayerType {
public:
    std::string name() const override { return "ReLU"; }
    std::string category() const override { return "Activation"; }
    std::string description() const override { return "Rectified linear unit: max(x, 0), element-wise."; }
    std::vector<ParamSpec> paramSpecs() const override { return {}; }
    Shape inferShape(const Json&, const std::vector<Shape>& inputs) const override {
        expectInputCount(name(), {"in"}, inputs);
        return inputs[0];
    }
    std::unique_ptr<Layer> create(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return makeActivationLayer(Activation::ReLU, 0.0f);
    }
    LayerCost cost(const Json&, const std::vector<Shape>& inputs, const Shape& output) const override {
        return elementwiseCost(inputs, output);
    }
    CompressibleWeight compressibleWeight() const override { return {}; }
    ChannelFacts channelFacts(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return perChannelFacts();
    }
    std::optional<Activation> activation() const override { return Activation::ReLU; }
};

}  // namespace

std::unique_ptr<LayerType> makeReLU() { return std::make_unique<ReLUType>(); }

}  // namespace strata::layers
