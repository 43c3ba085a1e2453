// The shared implementation of MaxPool2D and AvgPool2D (their files only
// name and describe them): 2-D pooling over per-sample [C, H, W].
#include <tuple>

#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

PoolDesc poolDesc(PoolMode mode, const Json& params, const Shape& in, int n) {
    PoolDesc d;
    d.mode = mode;
    d.n = n;
    d.c = toInt(in[0], "in", "channel count");
    d.h = toInt(in[1], "in", "height");
    d.w = toInt(in[2], "in", "width");
    std::tie(d.kernelH, d.kernelW) = pairParam(params, "kernel");
    std::tie(d.strideH, d.strideW) = pairParam(params, "stride", {d.kernelH, d.kernelW});
    std::tie(d.padH, d.padW) = pairParam(params, "padding", {0, 0});
    return d;
}

class Pool2DLayer : public Layer {
public:
    Pool2DLayer(PoolMode mode, Json params, Shape in)
        : m_mode(mode), m_params(std::move(params)), m_in(std::move(in)) {}
    void forward(LayerContext& ctx, const std::vector<const Tensor*>& in, Tensor& out) override {
        ctx.backend.pool2dForward(out.f32(), in[0]->f32(), desc(*in[0]));
    }
    void backward(LayerContext& ctx, const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dOut,
                  const std::vector<Tensor*>& dIn) override {
        if (!dIn[0]) return;
        const bool overwrite = ctx.overwritesInputGrad(0);
        if (m_reluBackward)
            ctx.backend.maxPool2dReLUBackward(dIn[0]->f32(), dOut.f32(), in[0]->f32(), out.f32(), desc(*in[0]),
                                              overwrite);
        else
            ctx.backend.pool2dBackward(dIn[0]->f32(), dOut.f32(), in[0]->f32(), out.f32(), desc(*in[0]), overwrite);
    }
    // The backend writes every element of dx when told to (the 2x2 windows without a zeroed buffer).
    bool overwritesInputGradient() override { return true; }
    bool absorbReLUBackward() override {
        m_reluBackward = m_mode == PoolMode::Max;
        return m_reluBackward;
    }
    // 2x2, stride-2 max pooling takes blocked tensors (output in its input's layout).
    LayoutRule layoutRule() const override {
        return poolDesc(m_mode, m_params, m_in, 1).isPlain2x2Max() ? LayoutRule::Elementwise : LayoutRule::NchwOnly;
    }
    void setLayouts(const std::vector<int>& inputBlocks, int) override { m_block = inputBlocks.at(0); }

private:
    PoolDesc desc(const Tensor& x) const {
        PoolDesc d = poolDesc(m_mode, m_params, m_in, static_cast<int>(batchOf(x)));
        d.block = m_block;
        return d;
    }
    PoolMode m_mode;
    Json m_params;
    Shape m_in;
    bool m_reluBackward = false;
    int m_block = 0;
};

class Pool2DType : public LayerType {
public:
    Pool2DType(PoolMode mode, std::string name, std::string description)
        : m_mode(mode), m_name(std::move(name)), m_description(std::move(description)) {}
    std::string name() const override { return m_name; }
    std::string category() const override { return "Convolution"; }
    std::string description() const override { return m_description; }
    std::vector<ParamSpec> paramSpecs() const override {
        return {intListParam("kernel", {2, 2}, 1, 2, 1, 64, "window size [height, width], or one number for both"),
                intListParam("stride", {}, 0, 2, 1, 64, "step between windows [height, width]; empty: the kernel size"),
                intListParam("padding", {0, 0}, 1, 2, 0, 32, "padding on each side, at most half the kernel")};
    }
    Shape inferShape(const Json& params, const std::vector<Shape>& inputs) const override {
        expectInputCount(name(), {"in"}, inputs);
        const Shape& s = inputs[0];
        if (s.rank() != 3)
            throwShapeError("in", name(), s, "a per-sample shape of rank 3 [channels, height, width]",
                            s.rank() == 1 ? "; add a Reshape before it" : "");
        const PoolDesc d = poolDesc(m_mode, params, s, 1);
        if (2 * d.padH > d.kernelH || 2 * d.padW > d.kernelW)
            throw ParamError("padding", "padding: " + params.at("padding").dump() + " is more than half the kernel " +
                                            params.at("kernel").dump());
        if (d.h + 2 * d.padH < d.kernelH || d.w + 2 * d.padW < d.kernelW)
            throwShapeError("in", name(), s,
                            "an image at least as large as the kernel (" + std::to_string(d.kernelH) + " x " +
                                std::to_string(d.kernelW) + " with padding " + std::to_string(d.padH) + ", " +
                                std::to_string(d.padW) + ")");
        return Shape{d.c, d.outH(), d.outW()};
    }
    std::unique_ptr<Layer> create(const Json& params, const std::vector<Shape>& inputs, const Shape&) const override {
        return std::make_unique<Pool2DLayer>(m_mode, params, inputs.at(0));
    }
    // One operation per window element of each output, forward and backward.
    LayerCost cost(const Json& params, const std::vector<Shape>& inputs, const Shape& output) const override {
        const auto [kh, kw] = pairParam(params, "kernel");
        const double flops = static_cast<double>(output.numel()) * kh * kw;
        return streamingCost(inputs, output, flops, flops);
    }
    CompressibleWeight compressibleWeight() const override { return {}; }
    ChannelFacts channelFacts(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return perChannelFacts();
    }
    // The maximum of a window is one of its values; the average is not.
    bool keepsInputValues() const override { return m_mode == PoolMode::Max; }

private:
    PoolMode m_mode;
    std::string m_name, m_description;
};

}  // namespace

std::unique_ptr<LayerType> makePool2DType(PoolMode mode, const std::string& name, const std::string& description) {
    return std::make_unique<Pool2DType>(mode, name, description);
}

}  // namespace strata::layers
