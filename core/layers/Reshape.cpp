// Reshape: each sample to a new shape with the same element count; one
// dimension may be -1 and is then inferred.
#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

class ReshapeType : public LayerType {
public:
    std::string name() const override { return "Reshape"; }
    std::string category() const override { return "Core"; }
    std::string description() const override {
        return "Gives each sample a new shape with the same number of elements; one dimension may be -1 "
               "(inferred), e.g. [784] to [1, 28, 28].";
    }
    std::vector<ParamSpec> paramSpecs() const override {
        return {intListParam("shape", {-1}, 1, 8, -1, 1 << 24,
                             "per-sample target shape; at most one -1, which is inferred; no 0")};
    }
    Shape inferShape(const Json& params, const std::vector<Shape>& inputs) const override {
        expectInputCount(name(), {"in"}, inputs);
        std::vector<int64_t> dims = params.at("shape").get<std::vector<int64_t>>();
        const std::string text = Shape(dims).toString();
        int inferred = -1;
        int64_t known = 1;
        for (size_t i = 0; i < dims.size(); ++i) {
            if (dims[i] == 0)
                throw ParamError("shape", "shape: " + text +
                                              " has a 0 dimension (each item must be "
                                              "at least 1, or -1 to infer it)");
            if (dims[i] == -1) {
                if (inferred >= 0)
                    throw ParamError("shape", "shape: " + text +
                                                  " has more than one -1 (at most one "
                                                  "dimension can be inferred)");
                inferred = static_cast<int>(i);
            } else {
                known *= dims[i];
            }
        }
        const int64_t total = inputs[0].numel();
        if (inferred >= 0) {
            if (total % known != 0)
                throwShapeError("in", name(), inputs[0],
                                "an element count divisible by " + std::to_string(known) + " to fill " + text,
                                " (" + std::to_string(total) + " elements)");
            dims[static_cast<size_t>(inferred)] = total / known;
        } else if (known != total) {
            throwShapeError("in", name(), inputs[0], std::to_string(known) + " elements per sample to fill " + text,
                            " (" + std::to_string(total) + " elements)");
        }
        return Shape(std::move(dims));
    }
    std::unique_ptr<Layer> create(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return makeCopyLayer();
    }
    // A view: no arithmetic.
    LayerCost cost(const Json&, const std::vector<Shape>& inputs, const Shape& output) const override {
        return streamingCost(inputs, output, 0, 0);
    }
    CompressibleWeight compressibleWeight() const override { return {}; }
    ChannelFacts channelFacts(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return mixingFacts();
    }
    bool keepsInputValues() const override { return true; }
};

}  // namespace

std::unique_ptr<LayerType> makeReshape() { return std::make_unique<ReshapeType>(); }

}  // namespace strata::layers
