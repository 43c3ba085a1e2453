// Clip: min(max(x, min), max) element-wise, any shape; ReLU6 (MobileNet's) is Clip(0, 6), the defaults.
#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

constexpr double kBound = 1e30;

class ClipLayer : public Layer {
public:
    ClipLayer(float lo, float hi) : m_lo(lo), m_hi(hi) {}
    void forward(LayerContext& ctx, const std::vector<const Tensor*>& in, Tensor& out) override {
        ctx.backend.clipForward(out.f32(), in[0]->f32(), out.numel(), m_lo, m_hi);
    }
    void backward(LayerContext& ctx, const std::vector<const Tensor*>& in, const Tensor&, const Tensor& dOut,
                  const std::vector<Tensor*>& dIn) override {
        if (dIn[0])
            ctx.backend.clipBackward(dIn[0]->f32(), dOut.f32(), in[0]->f32(), dOut.numel(), m_lo, m_hi,
                                     ctx.overwritesInputGrad(0));
    }
    bool overwritesInputGradient() override { return true; }
    LayoutRule layoutRule() const override { return LayoutRule::Elementwise; }

private:
    float m_lo, m_hi;
};

class ClipType : public LayerType {
public:
    std::string name() const override { return "Clip"; }
    std::string category() const override { return "Activation"; }
    std::string description() const override {
        return "Clamps each value to [min, max]; with the defaults 0 and 6 it is ReLU6 (MobileNet's activation).";
    }
    std::vector<ParamSpec> paramSpecs() const override {
        return {floatParam("min", 0.0, -kBound, kBound, "lower bound"),
                floatParam("max", 6.0, -kBound, kBound, "upper bound (at least min)")};
    }
    Shape inferShape(const Json& params, const std::vector<Shape>& inputs) const override {
        expectInputCount(name(), {"in"}, inputs);
        const double lo = params.at("min").get<double>(), hi = params.at("max").get<double>();
        if (!(lo <= hi))
            throw ParamError("max", "Clip: max (" + params.at("max").dump() + ") is below min (" +
                                        params.at("min").dump() + "); set max to at least min");
        return inputs[0];
    }
    std::unique_ptr<Layer> create(const Json& params, const std::vector<Shape>&, const Shape&) const override {
        return std::make_unique<ClipLayer>(params.at("min").get<float>(), params.at("max").get<float>());
    }
    LayerCost cost(const Json&, const std::vector<Shape>& inputs, const Shape& output) const override {
        return elementwiseCost(inputs, output);
    }
    CompressibleWeight compressibleWeight() const override { return {}; }
    ChannelFacts channelFacts(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return perChannelFacts();
    }
};

}  // namespace

std::unique_ptr<LayerType> makeClip() { return std::make_unique<ClipType>(); }

}  // namespace strata::layers
