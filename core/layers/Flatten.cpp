// Flatten: any per-sample shape to one dimension [numel] (the usual step
// between convolutions and Dense layers).
#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

class FlattenType : public LayerType {
public:
    std::string name() const override { return "Flatten"; }
    std::string category() const override { return "Core"; }
    std::string description() const override {
        return "Flattens each sample to one dimension, e.g. [64, 7, 7] to [3136].";
    }
    std::vector<ParamSpec> paramSpecs() const override { return {}; }
    Shape inferShape(const Json&, const std::vector<Shape>& inputs) const override {
        expectInputCount(name(), {"in"}, inputs);
        if (inputs[0].rank() < 1) throwShapeError("in", name(), inputs[0], "a shape of rank 1 or more");
        return Shape{inputs[0].numel()};
    }
    std::unique_ptr<Layer> create(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return makeCopyLayer();
    }
};

}  // namespace

std::unique_ptr<LayerType> makeFlatten() { return std::make_unique<FlattenType>(); }

}  // namespace strata::layers
