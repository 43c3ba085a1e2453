// PositionalEmbedding: adds a learned vector per position to a sequence, [T, D] -> [T, D] (the learned
// positional embedding of BERT and GPT-2): y[t] = x[t] + P[t]. P is [T, D], one row per position, trained
// like any weight; the gradient passes to x unchanged.
#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

class PositionalEmbeddingLayer : public Layer {
public:
    explicit PositionalEmbeddingLayer(const Shape& in) : m_per(toInt(in.numel(), "in", "length x features")) {}
    void forward(LayerContext& ctx, const std::vector<const Tensor*>& in, Tensor& out) override {
        Backend& b = ctx.backend;
        b.copy(out.raw(), in[0]->raw(), in[0]->bytes());
        b.addBiasRows(out.f32(), m_params[0].value.f32(), batch(*in[0]), m_per);
    }
    void backward(LayerContext& ctx, const std::vector<const Tensor*>& in, const Tensor&, const Tensor& dOut,
                  const std::vector<Tensor*>& dIn) override {
        Backend& b = ctx.backend;
        if (dIn[0]) b.axpy(dIn[0]->f32(), 1.0f, dOut.f32(), dOut.numel());
        if (float* dp = gradOf(m_params[0])) b.sumRows(dp, dOut.f32(), batch(*in[0]), m_per);
    }

private:
    static int batch(const Tensor& x) { return toInt(batchOf(x), "in", "batch size"); }
    int m_per;
};

class PositionalEmbeddingType : public LayerType {
public:
    std::string name() const override { return "PositionalEmbedding"; }
    std::string category() const override { return "Text"; }
    std::string description() const override {
        return "Adds a learned vector for each position to a sequence [length, features] (learned positional "
               "embedding), so later layers can tell positions apart.";
    }
    std::vector<ParamSpec> paramSpecs() const override { return {}; }
    Shape inferShape(const Json&, const std::vector<Shape>& inputs) const override {
        return expectSequence(name(), inputs, "features");
    }
    std::vector<ParameterSpec> parameterSpecs(const Json&, const std::vector<Shape>& inputs) const override {
        const Shape& s = inputs.at(0);
        ParameterSpec p{"weight", s, Init::Normal, s[1], s[1]};
        p.std = 0.02f;  // BERT's and GPT-2's initialization of position embeddings
        return {p};
    }
    std::unique_ptr<Layer> create(const Json&, const std::vector<Shape>& inputs, const Shape&) const override {
        return std::make_unique<PositionalEmbeddingLayer>(inputs.at(0));
    }
    // One addition per value; backward sums the gradient over the batch into the table.
    LayerCost cost(const Json&, const std::vector<Shape>& inputs, const Shape& output) const override {
        const auto in = static_cast<double>(inputs.at(0).numel());
        return streamingCost(inputs, output, in, in);
    }
    CompressibleWeight compressibleWeight() const override { return {}; }
    ChannelFacts channelFacts(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return mixingFacts();
    }
};

}  // namespace

std::unique_ptr<LayerType> makePositionalEmbedding() { return std::make_unique<PositionalEmbeddingType>(); }

}  // namespace strata::layers
