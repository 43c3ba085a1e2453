// MultiHeadSelfAttention: scaled dot-product self-attention over a sequence, [T, D] -> [T, D], with `heads`
// heads of width D / heads (the Transformer encoder's attention, PyTorch's nn.MultiheadAttention with
// batch_first and query = key = value):
//   [Q K V] = x W_in^T + b_in                 (W_in [3D, D], b_in [3D]; PyTorch's in_proj layout)
//   A_h = softmax(Q_h K_h^T / sqrt(D / heads)) over the keys, padding keys excluded (masked)
//   y = concat_h(dropout(A_h) V_h) W_out^T + b_out   (W_out [D, D], b_out [D])
// With "masked", the second input holds each sample's token ids and keys whose id is 0 (padding) get
// attention weight exactly 0 (Backend::maskedSoftmaxForward), so what stands at padding positions never moves
// the outputs at the others. The products are strided-batched GEMMs: one call per head over the batch.
#include <cmath>

#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

class AttentionLayer : public Layer, public ProjectingLayer {
public:
    AttentionLayer(const Shape& in, int heads, float dropout, bool masked, bool bias)
        : m_t(toInt(in[0], "in", "length")),
          m_d(toInt(in[1], "in", "width")),
          m_h(heads),
          m_dh(m_d / heads),
          m_dropout(dropout),
          m_masked(masked),
          m_bias(bias) {}

    void forward(LayerContext& ctx, const std::vector<const Tensor*>& in, Tensor& out) override {
        Backend& be = ctx.backend;
        const Tensor& x = *in[0];
        const int n = batch(x), rows = toInt(int64_t(n) * m_t, "in", "batch x length");
        float* qkv = projection(be, n);
        be.gemm(false, true, rows, 3 * m_d, m_d, 1.0f, x.f32(), m_d, weight(0), m_d, 0.0f, qkv, 3 * m_d);
        if (m_bias) be.addBiasRows(qkv, weight(1), rows, 3 * m_d);
        forwardFromProjection(ctx, in, out);
    }

    float* projection(Backend& be, int64_t batch) override {
        ensureBuffer(be, m_qkv, Shape{batch, m_t, 3 * int64_t(m_d)});
        return m_qkv.f32();
    }

    void forwardFromProjection(LayerContext& ctx, const std::vector<const Tensor*>& in, Tensor& out) override {
        Backend& be = ctx.backend;
        const int rows = batch(*in[0]) * m_t;
        const Tensor& context = innerFromProjection(ctx, in);
        be.gemm(false, true, rows, m_d, m_d, 1.0f, context.f32(), m_d, weight(outWeight()), m_d, 0.0f, out.f32(), m_d);
        if (m_bias) be.addBiasRows(out.f32(), weight(3), rows, m_d);
    }

    const Tensor& innerFromProjection(LayerContext& ctx, const std::vector<const Tensor*>& in) override {
        Backend& be = ctx.backend;
        const int n = batch(*in[0]);
        const int64_t T = m_t, D = m_d, H = m_h, perSample = H * T * T;
        ensureBuffer(be, m_scores, Shape{n, H, T, T});
        ensureBuffer(be, m_probs, Shape{n, H, T, T});
        ensureBuffer(be, m_context, Shape{n, T, D});
        ctx.innerTensor("qkv", m_qkv);
        const float* qkv = m_qkv.f32();
        // scores[b, h] = Q_bh K_bh^T / sqrt(dh), for each head over the whole batch
        for (int h = 0; h < m_h; ++h)
            be.gemmStridedBatched(false, true, m_t, m_t, m_dh, scale(), qkv + h * m_dh, 3 * m_d, T * 3 * D,
                                  qkv + D + h * m_dh, 3 * m_d, T * 3 * D, 0.0f, m_scores.f32() + h * T * T, m_t,
                                  perSample, n);
        if (m_masked)
            be.maskedSoftmaxForward(m_probs.f32(), m_scores.f32(), in[1]->f32(), n, m_h * m_t, m_t);
        else
            be.softmaxForward(m_probs.f32(), m_scores.f32(), toInt(int64_t(n) * perSample / T, "in", "rows"), m_t);
        ctx.innerTensor("probs", m_probs);
        m_dropActive = ctx.training && m_dropout > 0.0f;
        m_seed = ctx.seed;
        m_first = static_cast<uint64_t>(ctx.firstSample * perSample);
        const float* attn = m_probs.f32();
        if (m_dropActive) {
            ensureBuffer(be, m_dropped, Shape{n, H, T, T});
            be.dropoutForward(m_dropped.f32(), m_probs.f32(), int64_t(n) * perSample, m_dropout, m_seed, m_first);
            attn = m_dropped.f32();
        }
        // context[b, :, head h] = A_bh V_bh
        for (int h = 0; h < m_h; ++h)
            be.gemmStridedBatched(false, false, m_t, m_dh, m_t, 1.0f, attn + h * T * T, m_t, perSample,
                                  qkv + 2 * D + h * m_dh, 3 * m_d, T * 3 * D, 0.0f, m_context.f32() + h * m_dh, m_d,
                                  T * D, n);
        ctx.innerTensor("context", m_context);
        return m_context;
    }

    void backward(LayerContext& ctx, const std::vector<const Tensor*>& in, const Tensor&, const Tensor& dOut,
                  const std::vector<Tensor*>& dIn) override {
        Backend& be = ctx.backend;
        const Tensor& x = *in[0];
        const int n = batch(x), rows = n * m_t;
        const int64_t T = m_t, D = m_d, H = m_h, perSample = H * T * T;
        ensureBuffer(be, m_dContext, Shape{n, T, D});
        ensureBuffer(be, m_dAttn, Shape{n, H, T, T});
        ensureBuffer(be, m_dQkv, Shape{n, T, 3 * D});
        const float* dy = dOut.f32();
        const float* qkv = m_qkv.f32();
        // Output projection.
        be.gemm(false, false, rows, m_d, m_d, 1.0f, dy, m_d, weight(outWeight()), m_d, 0.0f, m_dContext.f32(), m_d);
        if (float* dw = gradOf(m_params[outWeight()]))
            be.gemm(true, false, m_d, m_d, rows, 1.0f, dy, m_d, m_context.f32(), m_d, 1.0f, dw, m_d);
        if (m_bias)
            if (float* db = gradOf(m_params[3])) be.sumRows(db, dy, rows, m_d);
        const float* attn = m_dropActive ? m_dropped.f32() : m_probs.f32();
        float* dQkv = m_dQkv.f32();
        for (int h = 0; h < m_h; ++h) {
            // dA_bh = dC_bh V_bh^T and dV_bh = A_bh^T dC_bh
            be.gemmStridedBatched(false, true, m_t, m_t, m_dh, 1.0f, m_dContext.f32() + h * m_dh, m_d, T * D,
                                  qkv + 2 * D + h * m_dh, 3 * m_d, T * 3 * D, 0.0f, m_dAttn.f32() + h * T * T, m_t,
                                  perSample, n);
            be.gemmStridedBatched(true, false, m_t, m_dh, m_t, 1.0f, attn + h * T * T, m_t, perSample,
                                  m_dContext.f32() + h * m_dh, m_d, T * D, 0.0f, dQkv + 2 * D + h * m_dh, 3 * m_d,
                                  T * 3 * D, n);
        }
        // Through dropout and the softmax (both accumulate, into zeroed buffers); m_scores is free now.
        const int64_t count = int64_t(n) * perSample;
        const int softmaxRows = toInt(count / T, "in", "rows");
        float* dProbs = m_dAttn.f32();
        float* dScores = m_scores.f32();
        if (m_dropActive) {
            be.zero(m_scores.raw(), static_cast<size_t>(count) * sizeof(float));
            be.dropoutBackward(m_scores.f32(), m_dAttn.f32(), count, m_dropout, m_seed, m_first);
            dProbs = m_scores.f32();
            dScores = m_dAttn.f32();
        }
        be.zero(dScores, static_cast<size_t>(count) * sizeof(float));
        be.softmaxBackward(dScores, dProbs, m_probs.f32(), softmaxRows, m_t);
        for (int h = 0; h < m_h; ++h) {
            // dQ_bh = dS_bh K_bh / sqrt(dh) and dK_bh = dS_bh^T Q_bh / sqrt(dh)
            be.gemmStridedBatched(false, false, m_t, m_dh, m_t, scale(), dScores + h * T * T, m_t, perSample,
                                  qkv + D + h * m_dh, 3 * m_d, T * 3 * D, 0.0f, dQkv + h * m_dh, 3 * m_d, T * 3 * D, n);
            be.gemmStridedBatched(true, false, m_t, m_dh, m_t, scale(), dScores + h * T * T, m_t, perSample,
                                  qkv + h * m_dh, 3 * m_d, T * 3 * D, 0.0f, dQkv + D + h * m_dh, 3 * m_d, T * 3 * D, n);
        }
        // Input projection.
        if (float* dw = gradOf(m_params[0]))
            be.gemm(true, false, 3 * m_d, m_d, rows, 1.0f, dQkv, 3 * m_d, x.f32(), m_d, 1.0f, dw, m_d);
        if (m_bias)
            if (float* db = gradOf(m_params[1])) be.sumRows(db, dQkv, rows, 3 * m_d);
        if (dIn[0])
            be.gemm(false, false, rows, m_d, 3 * m_d, 1.0f, dQkv, 3 * m_d, weight(0), m_d, 1.0f, dIn[0]->f32(), m_d);
    }

    const Tensor* attentionWeights() const override { return m_probs.defined() ? &m_probs : nullptr; }

private:
    static int batch(const Tensor& x) { return toInt(batchOf(x), "in", "batch size"); }
    float scale() const { return 1.0f / std::sqrt(static_cast<float>(m_dh)); }
    // Parameters: in_weight, [in_bias], out_weight, [out_bias].
    size_t outWeight() const { return m_bias ? 2 : 1; }
    const float* weight(size_t i) const { return m_params[i].value.f32(); }

    int m_t, m_d, m_h, m_dh;
    float m_dropout;
    bool m_masked, m_bias;
    bool m_dropActive = false;
    uint64_t m_seed = 0, m_first = 0;
    Tensor m_qkv, m_scores, m_probs, m_dropped, m_context;  // kept from forward for backward
    Tensor m_dContext, m_dAttn, m_dQkv;
};

class AttentionType : public LayerType {
public:
    std::string name() const override { return "MultiHeadSelfAttention"; }
    std::string category() const override { return "Text"; }
    std::string description() const override {
        return "Self-attention over a sequence [length, width] with several heads (scaled dot product, softmax "
               "over the positions); masked: padding tokens are never attended to.";
    }
    std::vector<ParamSpec> paramSpecs() const override {
        return {intParam("heads", 4, 1, 1024, "attention heads; the input width must be a multiple of it"),
                floatParam("dropout", 0.0, 0.0, 0.95, "dropout on the attention weights during training"),
                maskedParam(), boolParam("use_bias", true, "learn biases of the input and output projections")};
    }
    std::vector<std::string> inputPorts(const Json& params) const override { return maskedSequencePorts(params); }
    bool inputDifferentiable(int index) const override { return index == 0; }
    Shape inferShape(const Json& params, const std::vector<Shape>& inputs) const override {
        const Shape& s = expectMaskedSequence(name(), params, inputs, "width");
        const int64_t heads = params.at("heads").get<int64_t>();
        if (s[1] % heads != 0)
            throw ParamError("heads", "heads: the width " + std::to_string(s[1]) + " of 'in' is not a multiple of " +
                                          std::to_string(heads) + " heads");
        toInt(3 * s[1], "in", "3 x width");
        toInt(s[0] * s[0], "in", "length x length");
        return s;
    }
    std::vector<ParameterSpec> parameterSpecs(const Json& params, const std::vector<Shape>& inputs) const override {
        const int64_t d = inputs.at(0)[1];
        std::vector<ParameterSpec> specs{{"in_weight", Shape{3 * d, d}, Init::XavierUniform, d, 3 * d}};
        const bool bias = params.at("use_bias").get<bool>();
        if (bias) specs.push_back({"in_bias", Shape{3 * d}, Init::Zeros, d, 3 * d});
        specs.push_back({"out_weight", Shape{d, d}, Init::XavierUniform, d, d});
        if (bias) specs.push_back({"out_bias", Shape{d}, Init::Zeros, d, d});
        return specs;
    }
    std::unique_ptr<Layer> create(const Json& params, const std::vector<Shape>& inputs, const Shape&) const override {
        return std::make_unique<AttentionLayer>(inputs.at(0), params.at("heads").get<int>(),
                                                params.at("dropout").get<float>(), params.at("masked").get<bool>(),
                                                params.at("use_bias").get<bool>());
    }
    // The projections 8 T D^2 (Q, K and V, and the output), scores and weighted sum 4 T^2 D; backward twice
    // that. Kept per training step: qkv [T, 3D], scores and probabilities [H, T, T] (and the dropped ones
    // with attention dropout), the context [T, D], and in backward dContext, dAttention and dQkv.
    LayerCost cost(const Json& params, const std::vector<Shape>& inputs, const Shape& output) const override {
        const int64_t t = output[0], d = output[1], h = params.at("heads").get<int64_t>();
        const auto td = static_cast<double>(t), dd = static_cast<double>(d);
        const double f = 8.0 * td * dd * dd + 4.0 * td * td * dd;
        LayerCost c = streamingCost(inputs, output, f, 2.0 * f);
        const int64_t weights = h * t * t;
        c.scratchFloats = {t * 3 * d, weights, weights, t * d, t * d, weights, t * 3 * d};
        if (params.at("dropout").get<double>() > 0) c.scratchFloats.push_back(weights);
        return c;
    }
    CompressibleWeight compressibleWeight() const override { return {}; }
    CompressibleWeight int8Weight() const override { return {"in_weight", 0, "in_bias"}; }
    std::vector<InnerInt8Tensor> int8InnerTensors() const override {
        return {{"qkv", {}, true}, {"probs", {}, false}, {"context", {"out_weight", 0, "out_bias"}, false}};
    }
    ChannelFacts channelFacts(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return mixingFacts();
    }
};

}  // namespace

std::unique_ptr<LayerType> makeMultiHeadSelfAttention() { return std::make_unique<AttentionType>(); }

}  // namespace strata::layers
