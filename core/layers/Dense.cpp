// Dense (fully connected): y = x W^T + b for per-sample input [features], or [length, features] where it
// acts on the last axis, every position alike (a sequence's tokens, as PyTorch's Linear does).
// The weight is [units, features] (PyTorch's Linear layout, so exports need no transpose).
#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

class DenseLayer : public Layer {
public:
    DenseLayer(int features, int units, bool useBias, int64_t rowsPerSample)
        : m_features(features), m_units(units), m_useBias(useBias), m_rowsPerSample(rowsPerSample) {}

    void forward(LayerContext& ctx, const std::vector<const Tensor*>& in, Tensor& out) override {
        Backend& b = ctx.backend;
        const int n = rows(*in[0]);
        // y[N,U] = x[N,F] * W[U,F]^T (N: samples x positions)
        b.gemm(false, true, n, m_units, m_features, 1.0f, in[0]->f32(), m_features, m_params[0].value.f32(), m_features,
               0.0f, out.f32(), m_units);
        if (m_useBias) b.addBiasRows(out.f32(), m_params[1].value.f32(), n, m_units);
    }

    void backward(LayerContext& ctx, const std::vector<const Tensor*>& in, const Tensor&, const Tensor& dOut,
                  const std::vector<Tensor*>& dIn) override {
        Backend& b = ctx.backend;
        const int n = rows(*in[0]);
        const float* w = m_params[0].value.f32();
        // dx[N,F] += dy[N,U] * W[U,F]
        if (dIn[0])
            b.gemm(false, false, n, m_features, m_units, 1.0f, dOut.f32(), m_units, w, m_features, 1.0f, dIn[0]->f32(),
                   m_features);
        // dW[U,F] += dy^T[U,N] * x[N,F]
        if (float* dw = gradOf(m_params[0]))
            b.gemm(true, false, m_units, m_features, n, 1.0f, dOut.f32(), m_units, in[0]->f32(), m_features, 1.0f, dw,
                   m_features);
        if (m_useBias)
            if (float* db = gradOf(m_params[1])) b.sumRows(db, dOut.f32(), n, m_units);
    }

private:
    int rows(const Tensor& x) const { return toInt(batchOf(x) * m_rowsPerSample, "in", "batch x length"); }
    int m_features, m_units;
    bool m_useBias;
    int64_t m_rowsPerSample;
};

class DenseType : public LayerType {
public:
    std::string name() const override { return "Dense"; }
    std::string category() const override { return "Core"; }
    std::string description() const override {
        return "Fully connected layer: every output unit is a weighted sum of all input features plus a bias; "
               "on a sequence [length, features], the same at every position.";
    }
    std::vector<ParamSpec> paramSpecs() const override {
        return {intParam("units", 128, 1, 1 << 20, "number of output features"),
                boolParam("use_bias", true, "add a learnable bias to each output"), weightInitParam()};
    }
    Shape inferShape(const Json& params, const std::vector<Shape>& inputs) const override {
        expectInputCount(name(), {"in"}, inputs);
        const Shape& s = inputs[0];
        if (s.rank() != 1 && s.rank() != 2)
            throwShapeError("in", name(), s, "a per-sample shape [features] or [length, features]",
                            s.rank() > 2 ? "; add a Flatten before it" : "");
        toInt(s[s.rank() - 1], "in", "feature count");
        std::vector<int64_t> out = s.dims();
        out.back() = params.at("units").get<int64_t>();
        return Shape(out);
    }
    std::vector<ParameterSpec> parameterSpecs(const Json& params, const std::vector<Shape>& inputs) const override {
        const int64_t f = inputs.at(0).dims().back(), u = params.at("units").get<int64_t>();
        std::vector<ParameterSpec> specs;
        specs.push_back({"weight", Shape{u, f}, weightInit(params), f, u});
        if (params.at("use_bias").get<bool>()) specs.push_back({"bias", Shape{u}, Init::Zeros, f, u});
        return specs;
    }
    std::unique_ptr<Layer> create(const Json& params, const std::vector<Shape>& inputs, const Shape&) const override {
        const Shape& in = inputs.at(0);
        return std::make_unique<DenseLayer>(static_cast<int>(in.dims().back()), params.at("units").get<int>(),
                                            params.at("use_bias").get<bool>(), in.rank() == 2 ? in[0] : 1);
    }
    // A dot product over the features per output value; backward computes the input and weight gradients,
    // twice the forward.
    LayerCost cost(const Json&, const std::vector<Shape>& inputs, const Shape& output) const override {
        const double f = 2.0 * static_cast<double>(output.numel()) * static_cast<double>(inputs.at(0).dims().back());
        return streamingCost(inputs, output, f, 2.0 * f);
    }
    CompressibleWeight compressibleWeight() const override { return {"weight", 0, "bias"}; }
    ChannelFacts channelFacts(const Json& params, const std::vector<Shape>&, const Shape& output) const override {
        ChannelFacts f;
        f.countParam = f.unitName = "units";
        f.weight = "weight";
        if (params.at("use_bias").get<bool>()) f.bias = "bias";
        if (output.rank() != 1)
            f.fixed = "a Dense over a sequence (its units are the last axis of " + output.toString() + ")";
        f.takesFoldedNormalization = output.rank() == 1;
        f.input = ChannelFacts::Input::Weighs;  // a row of [units, features] per unit
        return f;
    }
};

}  // namespace

std::unique_ptr<LayerType> makeDense() { return std::make_unique<DenseType>(); }

}  // namespace strata::layers
