// Softmax over the last axis of each sample (any rank >= 1). For training a
// classifier, leave it out: the cross-entropy loss applies its own softmax.
#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

class SoftmaxLayer : public Layer {
public:
    explicit SoftmaxLayer(int64_t cols) : m_cols(cols) {}
    void forward(LayerContext& ctx, const std::vector<const Tensor*>& in, Tensor& out) override {
        ctx.backend.softmaxForward(out.f32(), in[0]->f32(), rows(out), static_cast<int>(m_cols));
    }
    void backward(LayerContext& ctx, const std::vector<const Tensor*>&, const Tensor& out, const Tensor& dOut,
                  const std::vector<Tensor*>& dIn) override {
        if (dIn[0])
            ctx.backend.softmaxBackward(dIn[0]->f32(), dOut.f32(), out.f32(), rows(out), static_cast<int>(m_cols));
    }

private:
    int rows(const Tensor& t) const { return toInt(t.numel() / m_cols, "in", "row count"); }
    int64_t m_cols;
};

class SoftmaxType : public LayerType {
public:
    std::string name() const override { return "Softmax"; }
    std::string category() const override { return "Activation"; }
    std::string description() const override {
        return "Softmax over the last axis: exponentials normalized to sum to 1. Not needed before a "
               "cross-entropy loss, which includes it.";
    }
    std::vector<ParamSpec> paramSpecs() const override { return {}; }
    Shape inferShape(const Json&, const std::vector<Shape>& inputs) const override {
        expectInputCount(name(), {"in"}, inputs);
        if (inputs[0].rank() < 1) throwShapeError("in", name(), inputs[0], "a shape of rank 1 or more");
        toInt(inputs[0][inputs[0].rank() - 1], "in", "last dimension");
        return inputs[0];
    }
    std::unique_ptr<Layer> create(const Json&, const std::vector<Shape>& inputs, const Shape&) const override {
        return std::make_unique<SoftmaxLayer>(inputs.at(0)[inputs.at(0).rank() - 1]);
    }
    LayerCost cost(const Json&, const std::vector<Shape>& inputs, const Shape& output) const override {
        return elementwiseCost(inputs, output);
    }
    CompressibleWeight compressibleWeight() const override { return {}; }
    ChannelFacts channelFacts(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return mixingFacts();
    }
    bool outputsProbabilities() const override { return true; }
};

}  // namespace

std::unique_ptr<LayerType> makeSoftmax() { return std::make_unique<SoftmaxType>(); }

}  // namespace strata::layers
