// LayerNorm: normalizes each sample over its last axis, then scales by gamma
// and shifts by beta (both [last dim]).
#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

class LayerNormLayer : public Layer {
public:
    LayerNormLayer(int cols, float eps) : m_cols(cols), m_eps(eps) {}
    void forward(LayerContext& ctx, const std::vector<const Tensor*>& in, Tensor& out) override {
        const int rows = toInt(out.numel() / m_cols, "in", "row count");
        // Allocated once per batch size, reused by every later step.
        ensureBuffer(ctx.backend, m_mean, Shape{rows});
        ensureBuffer(ctx.backend, m_rstd, Shape{rows});
        ctx.backend.layerNormForward(out.f32(), m_mean.f32(), m_rstd.f32(), in[0]->f32(), m_params[0].value.f32(),
                                     m_params[1].value.f32(), rows, m_cols, m_eps);
    }
    void backward(LayerContext& ctx, const std::vector<const Tensor*>& in, const Tensor&, const Tensor& dOut,
                  const std::vector<Tensor*>& dIn) override {
        const int rows = static_cast<int>(dOut.numel() / m_cols);
        Backend& b = ctx.backend;
        float* dgamma = gradOf(m_params[0]);
        float* dbeta = gradOf(m_params[1]);
        // The op writes all three gradients; route the ones nobody wants into scratch.
        float* dx = dIn[0] ? dIn[0]->f32() : scratch(b, m_dxScratch, dOut.shape());
        if (!dgamma) dgamma = scratch(b, m_dgScratch, Shape{m_cols});
        if (!dbeta) dbeta = scratch(b, m_dbScratch, Shape{m_cols});
        b.layerNormBackward(dx, dgamma, dbeta, dOut.f32(), in[0]->f32(), m_params[0].value.f32(), m_mean.f32(),
                            m_rstd.f32(), rows, m_cols);
    }

private:
    // A zeroed buffer for a gradient nobody wants (the backend ops accumulate into it).
    static float* scratch(Backend& b, Tensor& t, const Shape& s) {
        ensureBuffer(b, t, s);
        b.zero(t.raw(), t.bytes());
        return t.f32();
    }
    int m_cols;
    float m_eps;
    Tensor m_mean, m_rstd, m_dxScratch, m_dgScratch, m_dbScratch;
};

class LayerNormType : public LayerType {
public:
    std::string name() const override { return "LayerNorm"; }
    std::string category() const override { return "Normalization"; }
    std::string description() const override {
        return "Normalizes each sample over its last axis to zero mean and unit variance, then applies a "
               "learnable scale and shift.";
    }
    std::vector<ParamSpec> paramSpecs() const override {
        return {floatParam("eps", 1e-5, 1e-12, 1.0, "added to the variance for numerical stability")};
    }
    Shape inferShape(const Json&, const std::vector<Shape>& inputs) const override {
        expectInputCount(name(), {"in"}, inputs);
        const Shape& s = inputs[0];
        if (s.rank() < 1) throwShapeError("in", name(), s, "a shape of rank 1 or more");
        toInt(s[s.rank() - 1], "in", "last dimension");
        return s;
    }
    std::vector<ParameterSpec> parameterSpecs(const Json&, const std::vector<Shape>& inputs) const override {
        const Shape& s = inputs.at(0);
        const int64_t d = s[s.rank() - 1];
        return {{"gamma", Shape{d}, Init::Ones, d, d}, {"beta", Shape{d}, Init::Zeros, d, d}};
    }
    std::unique_ptr<Layer> create(const Json& params, const std::vector<Shape>& inputs, const Shape&) const override {
        const Shape& s = inputs.at(0);
        return std::make_unique<LayerNormLayer>(static_cast<int>(s[s.rank() - 1]), params.at("eps").get<float>());
    }
    LayerCost cost(const Json&, const std::vector<Shape>& inputs, const Shape& output) const override {
        return elementwiseCost(inputs, output);
    }
    CompressibleWeight compressibleWeight() const override { return {}; }
    ChannelFacts channelFacts(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return mixingFacts();
    }
};

}  // namespace

std::unique_ptr<LayerType> makeLayerNorm() { return std::make_unique<LayerNormType>(); }

}  // namespace strata::layers
