// HardSwish: x * relu6(x + 3) / 6 element-wise, any shape (MobileNetV3's activation).
#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

class HardSwishType : public LayerType {
public:
    std::string name() const override { return "HardSwish"; }
    std::string category() const override { return "Activation"; }
    std::string description() const override {
        return "Hard swish: x * min(max(x + 3, 0), 6) / 6, element-wise; a cheap swish (MobileNetV3).";
    }
    std::vector<ParamSpec> paramSpecs() const override { return {}; }
    Shape inferShape(const Json&, const std::vector<Shape>& inputs) const override {
        expectInputCount(name(), {"in"}, inputs);
        return inputs[0];
    }
    std::unique_ptr<Layer> create(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return makeActivationLayer(Activation::HardSwish, 0.0f);
    }
    LayerCost cost(const Json&, const std::vector<Shape>& inputs, const Shape& output) const override {
        return elementwiseCost(inputs, output);
    }
    CompressibleWeight compressibleWeight() const override { return {}; }
    ChannelFacts channelFacts(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return perChannelFacts();
    }
    std::optional<Activation> activation() const override { return Activation::HardSwish; }
};

}  // namespace

std::unique_ptr<LayerType> makeHardSwish() { return std::make_unique<HardSwishType>(); }

}  // namespace strata::layers
