// GlobalAvgPool: the mean of each channel over the whole image, [C, H, W] -> [C].
#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

class GlobalAvgPoolLayer : public Layer {
public:
    explicit GlobalAvgPoolLayer(const Shape& in) : m_c(in[0]), m_hw(in[1] * in[2]) {}
    // NCHW: the mean of each (image, channel) row of H x W. Blocked by B ([N, C/B, H, W, B]): the mean over
    // positions of each (image, channel block) with B channels side by side, which lands [N, C] in order.
    void forward(LayerContext& ctx, const std::vector<const Tensor*>& in, Tensor& out) override {
        ctx.backend.meanPoolForward(out.f32(), in[0]->f32(), outer(*in[0]), static_cast<int>(m_hw), inner());
    }
    void backward(LayerContext& ctx, const std::vector<const Tensor*>& in, const Tensor&, const Tensor& dOut,
                  const std::vector<Tensor*>& dIn) override {
        if (dIn[0])
            ctx.backend.meanPoolBackward(dIn[0]->f32(), dOut.f32(), outer(*in[0]), static_cast<int>(m_hw), inner());
    }
    LayoutRule layoutRule() const override { return LayoutRule::Any; }
    void setLayouts(const std::vector<int>& inputBlocks, int) override { m_block = inputBlocks.at(0); }

private:
    int inner() const { return m_block > 0 ? m_block : 1; }
    int outer(const Tensor& x) const { return toInt(batchOf(x) * m_c / inner(), "in", "batch x channels"); }
    int64_t m_c, m_hw;
    int m_block = 0;
};

class GlobalAvgPoolType : public LayerType {
public:
    std::string name() const override { return "GlobalAvgPool"; }
    std::string category() const override { return "Convolution"; }
    std::string description() const override {
        return "Averages each channel over the whole image: [channels, height, width] to [channels].";
    }
    std::vector<ParamSpec> paramSpecs() const override { return {}; }
    Shape inferShape(const Json&, const std::vector<Shape>& inputs) const override {
        expectInputCount(name(), {"in"}, inputs);
        const Shape& s = inputs[0];
        if (s.rank() != 3) throwShapeError("in", name(), s, "a per-sample shape of rank 3 [channels, height, width]");
        toInt(s[1] * s[2], "in", "height x width");
        return Shape{s[0]};
    }
    std::unique_ptr<Layer> create(const Json&, const std::vector<Shape>& inputs, const Shape&) const override {
        return std::make_unique<GlobalAvgPoolLayer>(inputs.at(0));
    }
    // One addition per input value, forward and backward.
    LayerCost cost(const Json&, const std::vector<Shape>& inputs, const Shape& output) const override {
        const auto in = static_cast<double>(inputs.at(0).numel());
        return streamingCost(inputs, output, in, in);
    }
    CompressibleWeight compressibleWeight() const override { return {}; }
    ChannelFacts channelFacts(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return perChannelFacts();
    }
};

}  // namespace

std::unique_ptr<LayerType> makeGlobalAvgPool() { return std::make_unique<GlobalAvgPoolType>(); }

}  // namespace strata::layers
