// Flatten: any per-sample shape to one dimension [numel] (the usual step
// between convolutions and Dense layers).
#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

// A copy; from a blocked input (a [C, H, W] tensor the layers before it keep in the backend's blocked layout,
// Layer::LayoutRule) the copy puts it in NCHW order, so those layers need not reorder it themselves.
class FlattenLayer : public Layer {
public:
    explicit FlattenLayer(const Shape& in)
        : m_c(in.rank() == 3 ? static_cast<int>(in[0]) : 1), m_inner(in.numel() / std::max<int64_t>(1, m_c)) {}
    void forward(LayerContext& ctx, const std::vector<const Tensor*>& in, Tensor& out) override {
        if (m_block == 0) return ctx.backend.copy(out.raw(), in[0]->raw(), out.bytes());
        ctx.backend.reblock(out.f32(), 0, in[0]->f32(), m_block, static_cast<int>(batchOf(out)), m_c, m_inner, false);
    }
    void backward(LayerContext& ctx, const std::vector<const Tensor*>&, const Tensor&, const Tensor& dOut,
                  const std::vector<Tensor*>& dIn) override {
        if (!dIn[0]) return;
        if (m_block == 0) return ctx.backend.axpy(dIn[0]->f32(), 1.0f, dOut.f32(), dOut.numel());
        ctx.backend.reblock(dIn[0]->f32(), m_block, dOut.f32(), 0, static_cast<int>(batchOf(dOut)), m_c, m_inner, true);
    }
    LayoutRule layoutRule() const override { return LayoutRule::Any; }
    void setLayouts(const std::vector<int>& inputBlocks, int) override { m_block = inputBlocks.at(0); }

private:
    int m_c;
    int64_t m_inner;
    int m_block = 0;
};

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
    std::unique_ptr<Layer> create(const Json&, const std::vector<Shape>& inputs, const Shape&) const override {
        return std::make_unique<FlattenLayer>(inputs.at(0));
    }
    // A view: no arithmetic.
    LayerCost cost(const Json&, const std::vector<Shape>& inputs, const Shape& output) const override {
        return streamingCost(inputs, output, 0, 0);
    }
    CompressibleWeight compressibleWeight() const override { return {}; }
    ChannelFacts channelFacts(const Json&, const std::vector<Shape>&, const Shape&) const override {
        ChannelFacts f;
        f.input = ChannelFacts::Input::Flattens;
        return f;
    }
    bool keepsInputValues() const override { return true; }
};

}  // namespace

std::unique_ptr<LayerType> makeFlatten() { return std::make_unique<FlattenType>(); }

}  // namespace strata::layers
