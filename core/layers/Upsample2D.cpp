// Upsample2D: enlarges per-sample [C, H, W] images by whole factors, nearest or bilinear, with PyTorch's
// definitions (torch.nn.Upsample, align_corners for bilinear); no parameters.
#include <tuple>

#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

UpsampleDesc describe(const Json& params, const Shape& in, int n) {
    UpsampleDesc d;
    d.n = n;
    d.c = toInt(in[0], "in", "channel count");
    d.h = toInt(in[1], "in", "height");
    d.w = toInt(in[2], "in", "width");
    std::tie(d.scaleH, d.scaleW) = pairParam(params, "scale", {2, 2});
    d.bilinear = params.at("mode").get<std::string>() == "bilinear";
    d.alignCorners = d.bilinear && params.at("align_corners").get<bool>();
    return d;
}

class Upsample2DLayer : public Layer {
public:
    explicit Upsample2DLayer(UpsampleDesc d) : m_d(d) {}
    void forward(LayerContext& ctx, const std::vector<const Tensor*>& in, Tensor& out) override {
        UpsampleDesc d = m_d;
        d.n = static_cast<int>(batchOf(*in[0]));
        ctx.backend.upsample2dForward(out.f32(), in[0]->f32(), d);
    }
    void backward(LayerContext& ctx, const std::vector<const Tensor*>& in, const Tensor&, const Tensor& dOut,
                  const std::vector<Tensor*>& dIn) override {
        if (!dIn[0]) return;
        UpsampleDesc d = m_d;
        d.n = static_cast<int>(batchOf(*in[0]));
        ctx.backend.upsample2dBackward(dIn[0]->f32(), dOut.f32(), d, ctx.overwritesInputGrad(0));
    }
    bool overwritesInputGradient() override { return true; }

private:
    UpsampleDesc m_d;
};

class Upsample2DType : public LayerType {
public:
    std::string name() const override { return "Upsample2D"; }
    std::string category() const override { return "Convolution"; }
    std::string description() const override {
        return "Enlarges images [channels, height, width] by whole factors, repeating pixels (nearest) or "
               "interpolating between them (bilinear).";
    }
    std::vector<ParamSpec> paramSpecs() const override {
        return {intListParam("scale", {2, 2}, 1, 2, 1, 64, "enlargement [height, width], or one number for both"),
                choiceParam("mode", "nearest", {"nearest", "bilinear"}, "how new pixels are made"),
                boolParam("align_corners", false,
                          "bilinear: the corner pixels of input and output coincide (PyTorch's align_corners)")};
    }
    Shape inferShape(const Json& params, const std::vector<Shape>& inputs) const override {
        expectInputCount(name(), {"in"}, inputs);
        const Shape& s = inputs[0];
        if (s.rank() != 3)
            throwShapeError("in", name(), s, "a per-sample shape of rank 3 [channels, height, width]",
                            s.rank() == 1 ? "; add a Reshape before it" : "");
        const UpsampleDesc d = describe(params, s, 1);
        return Shape{s[0], toInt(int64_t(d.h) * d.scaleH, "in", "output height"),
                     toInt(int64_t(d.w) * d.scaleW, "in", "output width")};
    }
    std::unique_ptr<Layer> create(const Json& params, const std::vector<Shape>& inputs, const Shape&) const override {
        return std::make_unique<Upsample2DLayer>(describe(params, inputs.at(0), 1));
    }
    // Nearest copies (no arithmetic); bilinear mixes four values per output (7 operations), and its backward
    // spreads each output gradient over them (8).
    LayerCost cost(const Json& params, const std::vector<Shape>& inputs, const Shape& output) const override {
        const double n = params.at("mode").get<std::string>() == "bilinear" ? static_cast<double>(output.numel()) : 0;
        return streamingCost(inputs, output, 7 * n, 8 * n);
    }
    CompressibleWeight compressibleWeight() const override { return {}; }
    ChannelFacts channelFacts(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return perChannelFacts();
    }
    // Nearest only repeats its input's values (int8 gives it its input's grid); bilinear makes new ones, and a
    // fact cannot depend on params here, so neither claims it.
};

}  // namespace

std::unique_ptr<LayerType> makeUpsample2D() { return std::make_unique<Upsample2DType>(); }

}  // namespace strata::layers
