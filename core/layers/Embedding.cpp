// Embedding: token ids [T] (float32 holding integers in [0, vocab)) to rows
// of a learnable table, [T] -> [T, dim]. The ids carry no gradient.
#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

class EmbeddingLayer : public Layer {
public:
    EmbeddingLayer(int vocab, int dim) : m_vocab(vocab), m_dim(dim) {}
    void forward(LayerContext& ctx, const std::vector<const Tensor*>& in, Tensor& out) override {
        ctx.backend.embeddingForward(out.f32(), m_params[0].value.f32(), in[0]->f32(), in[0]->numel(), m_dim, m_vocab);
    }
    void backward(LayerContext& ctx, const std::vector<const Tensor*>& in, const Tensor&, const Tensor& dOut,
                  const std::vector<Tensor*>&) override {
        if (float* dw = gradOf(m_params[0]))
            ctx.backend.embeddingBackward(dw, dOut.f32(), in[0]->f32(), in[0]->numel(), m_dim, m_vocab);
    }

private:
    int m_vocab, m_dim;
};

class EmbeddingType : public LayerType {
public:
    std::string name() const override { return "Embedding"; }
    std::string category() const override { return "Text"; }
    std::string description() const override {
        return "Looks up a learnable vector for each token id: [length] ids to [length, dim].";
    }
    std::vector<ParamSpec> paramSpecs() const override {
        return {intParam("vocab", 10000, 1, 1 << 24, "number of distinct token ids (ids are 0 to vocab - 1)"),
                intParam("dim", 64, 1, 65536, "size of each embedding vector")};
    }
    bool inputDifferentiable(int) const override { return false; }
    Shape inferShape(const Json& params, const std::vector<Shape>& inputs) const override {
        expectInputCount(name(), {"in"}, inputs);
        const Shape& s = inputs[0];
        if (s.rank() != 1) throwShapeError("in", name(), s, "a per-sample shape of rank 1 [length] (token ids)");
        return Shape{s[0], params.at("dim").get<int64_t>()};
    }
    std::vector<ParameterSpec> parameterSpecs(const Json& params, const std::vector<Shape>&) const override {
        const int64_t v = params.at("vocab").get<int64_t>(), d = params.at("dim").get<int64_t>();
        ParameterSpec w{"weight", Shape{v, d}, Init::Normal, v, d};
        w.std = 0.1f;
        return {w};
    }
    std::unique_ptr<Layer> create(const Json& params, const std::vector<Shape>&, const Shape&) const override {
        return std::make_unique<EmbeddingLayer>(params.at("vocab").get<int>(), params.at("dim").get<int>());
    }
    // Forward gathers rows (no arithmetic); backward adds each output gradient into its row.
    LayerCost cost(const Json&, const std::vector<Shape>& inputs, const Shape& output) const override {
        return streamingCost(inputs, output, 0, static_cast<double>(output.numel()));
    }
    CompressibleWeight compressibleWeight() const override { return {}; }
    ChannelFacts channelFacts(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return mixingFacts();
    }
    std::string vocabularyParam() const override { return "vocab"; }
};

}  // namespace

std::unique_ptr<LayerType> makeEmbedding() { return std::make_unique<EmbeddingType>(); }

}  // namespace strata::layers
