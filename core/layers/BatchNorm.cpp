// BatchNorm: normalizes each channel (dim 0 of the per-sample shape: [C],
// [C, L] or [C, H, W]) with batch statistics in training and running
// statistics in evaluation, then applies gamma and beta. running_mean and
// running_var are non-trainable state kept in checkpoints and exports.
//
// Data parallel (LayerContext::replicas set): training uses the statistics of the GLOBAL batch. The
// per-channel sums, then the sums of squared deviations, and in backward the sums of dy and dy * xhat are
// summed over the replicas, so every replica computes exactly what one process on the global batch would,
// and the running statistics stay identical on every replica (which also makes averaging them at the end
// of an epoch unnecessary). That path runs on the host in double, like CpuReference.
#include <cmath>

#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

class BatchNormLayer : public Layer {
public:
    BatchNormLayer(int c, int inner, float momentum, float eps)
        : m_c(c), m_inner(inner), m_momentum(momentum), m_eps(eps) {}

    void forward(LayerContext& ctx, const std::vector<const Tensor*>& in, Tensor& out) override {
        Backend& b = ctx.backend;
        const int n = toInt(batchOf(*in[0]), "in", "batch size");
        m_trainingForward = ctx.training;
        if (ctx.training && ctx.replicas) {
            forwardSynced(ctx, in[0], &out, n);
        } else if (ctx.training) {
            // Per channel, so allocated once and reused whatever the batch size.
            ensureBuffer(b, m_saveMean, Shape{m_c});
            ensureBuffer(b, m_saveInvStd, Shape{m_c});
            b.batchNormForwardTraining(out.f32(), m_saveMean.f32(), m_saveInvStd.f32(), p(2), p(3), in[0]->f32(), p(0),
                                       p(1), n, m_c, m_inner, m_momentum, m_eps, m_fusedReLU, m_block);
        } else {
            b.batchNormForwardInference(out.f32(), in[0]->f32(), p(0), p(1), p(2), p(3), n, m_c, m_inner, m_eps,
                                        m_fusedReLU, m_block);
        }
        if (m_fusedReLU && ctx.training && ctx.replicas)
            b.activationForward(out.f32(), out.f32(), out.numel(), Activation::ReLU, 0.0f);
    }

    // The backward reads the input, gamma and the saved statistics, never the output: the ReLU after a
    // BatchNorm runs in place on its output (no buffer of its own), in the normalization's own pass.
    bool fuseReLU() override {
        m_fusedReLU = true;
        return true;
    }
    // And its backward: dOut is then the ReLU's output gradient, gated by the output (the ReLU's) in the
    // passes that read dOut anyway.
    bool absorbFusedReLUBackward() override {
        m_reluBackward = true;
        return true;
    }
    // Its dx pass writes every element: it can write the input gradient instead of adding to it.
    bool overwritesInputGradient() override { return true; }
    // Per channel, in any layout: input, output and gradients share the block compile picks.
    LayoutRule layoutRule() const override { return LayoutRule::Elementwise; }
    void setLayouts(const std::vector<int>& inputBlocks, int) override { m_block = inputBlocks.at(0); }

    void backward(LayerContext& ctx, const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dOutput,
                  const std::vector<Tensor*>& dIn) override {
        Backend& b = ctx.backend;
        const float* gate = m_reluBackward ? out.f32() : nullptr;
        // The paths below the fast one take dOut already gated (into a buffer of this layer's).
        const bool fastPath = m_trainingForward && !ctx.replicas;
        const Tensor& dOut = gate && !fastPath ? gated(b, out, dOutput) : dOutput;
        // Told to overwrite its input gradient: the fast path writes it; the others add to it zeroed here.
        if (ctx.overwritesInputGrad(0) && dIn[0] && !fastPath) b.zero(dIn[0]->raw(), dIn[0]->bytes());
        const int n = static_cast<int>(batchOf(*in[0]));
        float* dgamma = gradOf(m_params[0]);
        float* dbeta = gradOf(m_params[1]);
        if (!dgamma) dgamma = scratch(b, m_dgScratch, Shape{m_c});
        if (!dbeta) dbeta = scratch(b, m_dbScratch, Shape{m_c});
        if (m_trainingForward && ctx.replicas) {
            backwardSynced(ctx, &dOut, dIn[0], n);
            return;
        }
        if (m_trainingForward) {
            float* dx = dIn[0] ? dIn[0]->f32() : scratch(b, m_dxScratch, dOut.shape());
            b.batchNormBackward(dx, dgamma, dbeta, dOut.f32(), in[0]->f32(), p(0), m_saveMean.f32(), m_saveInvStd.f32(),
                                n, m_c, m_inner, gate, ctx.overwritesInputGrad(0), m_block);
            return;
        }
        // Evaluation mode: y = (x - running_mean) * invstd * gamma + beta is affine per channel, so
        // dx = dy * gamma * invstd, and dgamma/dbeta are the training formulas with the running
        // statistics in place of the batch ones. Built from the backend's batch-norm ops:
        ensureBuffer(b, m_ones, Shape{m_c});
        ensureBuffer(b, m_zeros, Shape{m_c});
        ensureBuffer(b, m_invStd, Shape{m_c});
        b.fill(m_ones.f32(), 1.0f, m_c);
        b.fill(m_zeros.f32(), 0.0f, m_c);
        // invstd = (1 - 0) / sqrt(running_var + eps) * 1 + 0 (one value per channel: no layout)
        b.batchNormForwardInference(m_invStd.f32(), m_ones.f32(), m_ones.f32(), m_zeros.f32(), m_zeros.f32(), p(3), 1,
                                    m_c, 1, m_eps);
        // dgamma, dbeta (its dx, the batch-statistics one, is discarded); none for a frozen layer (Node::trainable).
        float* discard = scratch(b, m_dxScratch, dOut.shape());
        if (gradOf(m_params[0]) || gradOf(m_params[1]))
            b.batchNormBackward(discard, dgamma, dbeta, dOut.f32(), in[0]->f32(), p(0), p(2), m_invStd.f32(), n, m_c,
                                m_inner, nullptr, false, m_block);
        if (dIn[0]) {
            // dx += (dy - 0) / sqrt(running_var + eps) * gamma + 0
            b.batchNormForwardInference(discard, dOut.f32(), p(0), m_zeros.f32(), m_zeros.f32(), p(3), n, m_c, m_inner,
                                        m_eps, false, m_block);
            b.axpy(dIn[0]->f32(), 1.0f, discard, dOut.numel());
        }
    }

    void idleForward(LayerContext& ctx) override {
        m_trainingForward = ctx.training;
        if (ctx.training && ctx.replicas) forwardSynced(ctx, nullptr, nullptr, 0);
    }
    void idleBackward(LayerContext& ctx) override {
        if (m_trainingForward && ctx.replicas) backwardSynced(ctx, nullptr, nullptr, 0);
    }

private:
    // Where (image b, channel ch, position i) is stored, in this layer's layout.
    size_t index(int b, int ch, int i) const {
        const size_t c = static_cast<size_t>(m_c), inner = static_cast<size_t>(m_inner);
        if (m_block == 0)
            return (static_cast<size_t>(b) * c + static_cast<size_t>(ch)) * inner + static_cast<size_t>(i);
        const size_t block = static_cast<size_t>(m_block), k = static_cast<size_t>(ch);
        return ((static_cast<size_t>(b) * (c / block) + k / block) * inner + static_cast<size_t>(i)) * block +
               k % block;
    }
    std::vector<float> toHostVector(Backend& b, const float* src, size_t count) {
        std::vector<float> v(count);
        if (count > 0) b.copyToHost(v.data(), src, count * sizeof(float));
        return v;
    }

    // Training forward over the global batch: this replica holds `n` samples of it (0: none, x and out null).
    void forwardSynced(LayerContext& ctx, const Tensor* x, Tensor* out, int n) {
        Backend& b = ctx.backend;
        const size_t c = static_cast<size_t>(m_c);
        m_hostX = x ? toHostVector(b, x->f32(), static_cast<size_t>(x->numel())) : std::vector<float>();
        std::vector<double> acc(c + 1, 0.0);
        for (int bi = 0; bi < n; ++bi)
            for (int ch = 0; ch < m_c; ++ch)
                for (int i = 0; i < m_inner; ++i) acc[static_cast<size_t>(ch)] += m_hostX[index(bi, ch, i)];
        acc[c] = static_cast<double>(n) * m_inner;
        ctx.replicas->sum(acc.data(), static_cast<int64_t>(c + 1));
        m_count = acc[c];
        std::vector<double> sq(c, 0.0), mean(c);
        for (size_t ch = 0; ch < c; ++ch) mean[ch] = acc[ch] / m_count;
        for (int bi = 0; bi < n; ++bi)
            for (int ch = 0; ch < m_c; ++ch)
                for (int i = 0; i < m_inner; ++i) {
                    const double d = m_hostX[index(bi, ch, i)] - mean[static_cast<size_t>(ch)];
                    sq[static_cast<size_t>(ch)] += d * d;
                }
        ctx.replicas->sum(sq.data(), static_cast<int64_t>(c));
        // The saved statistics are floats, as the backend's forward saves them; backward reads them back.
        m_hostMean.assign(c, 0.0f);
        m_hostInvStd.assign(c, 0.0f);
        std::vector<float> runMean = toHostVector(b, p(2), c), runVar = toHostVector(b, p(3), c);
        const std::vector<float> gamma = toHostVector(b, p(0), c), beta = toHostVector(b, p(1), c);
        std::vector<float> y(m_hostX.size());
        for (int ch = 0; ch < m_c; ++ch) {
            const size_t k = static_cast<size_t>(ch);
            const double invStd = 1.0 / std::sqrt(sq[k] / m_count + m_eps);
            for (int bi = 0; bi < n; ++bi)
                for (int i = 0; i < m_inner; ++i) {
                    const size_t e = index(bi, ch, i);
                    y[e] = static_cast<float>((m_hostX[e] - mean[k]) * invStd * gamma[k] + beta[k]);
                }
            m_hostMean[k] = static_cast<float>(mean[k]);
            m_hostInvStd[k] = static_cast<float>(invStd);
            runMean[k] = static_cast<float>((1.0 - m_momentum) * runMean[k] + m_momentum * mean[k]);
            runVar[k] = static_cast<float>((1.0 - m_momentum) * runVar[k] + m_momentum * (sq[k] / (m_count - 1.0)));
        }
        if (out && !y.empty()) b.copyFromHost(out->raw(), y.data(), y.size() * sizeof(float));
        b.copyFromHost(p(2), runMean.data(), c * sizeof(float));
        b.copyFromHost(p(3), runVar.data(), c * sizeof(float));
    }

    // Training backward over the global batch: the local parts of dgamma and dbeta (the gradient all-reduce
    // sums them), then dx from the global sums of dy and dy * xhat.
    void backwardSynced(LayerContext& ctx, const Tensor* dOut, Tensor* dIn, int n) {
        Backend& b = ctx.backend;
        const size_t c = static_cast<size_t>(m_c);
        const std::vector<float> dy =
            dOut ? toHostVector(b, dOut->f32(), static_cast<size_t>(dOut->numel())) : std::vector<float>();
        std::vector<double> sums(2 * c, 0.0);  // sum dy, then sum dy * xhat
        for (int bi = 0; bi < n; ++bi)
            for (int ch = 0; ch < m_c; ++ch) {
                const size_t k = static_cast<size_t>(ch);
                const double mean = m_hostMean[k], invStd = m_hostInvStd[k];
                for (int i = 0; i < m_inner; ++i) {
                    const size_t e = index(bi, ch, i);
                    sums[k] += dy[e];
                    sums[c + k] += dy[e] * (m_hostX[e] - mean) * invStd;
                }
            }
        addToHostCopy(b, gradOf(m_params[1]), sums.data(), c);
        addToHostCopy(b, gradOf(m_params[0]), sums.data() + c, c);
        ctx.replicas->sum(sums.data(), static_cast<int64_t>(2 * c));
        if (!dIn || n == 0) return;
        std::vector<float> dx = toHostVector(b, dIn->f32(), static_cast<size_t>(dIn->numel()));
        const std::vector<float> gamma = toHostVector(b, p(0), c);
        for (int bi = 0; bi < n; ++bi)
            for (int ch = 0; ch < m_c; ++ch) {
                const size_t k = static_cast<size_t>(ch);
                const double mean = m_hostMean[k], invStd = m_hostInvStd[k], g = gamma[k];
                for (int i = 0; i < m_inner; ++i) {
                    const size_t e = index(bi, ch, i);
                    const double xhat = (m_hostX[e] - mean) * invStd;
                    dx[e] +=
                        static_cast<float>(g * invStd * (dy[e] - sums[k] / m_count - xhat * sums[c + k] / m_count));
                }
            }
        b.copyFromHost(dIn->raw(), dx.data(), dx.size() * sizeof(float));
    }

    // grad[k] += add[k] (as float, like the backend's batchNormBackward) through a host copy; null: nothing.
    void addToHostCopy(Backend& b, float* grad, const double* add, size_t count) {
        if (!grad) return;
        std::vector<float> g = toHostVector(b, grad, count);
        for (size_t k = 0; k < count; ++k) g[k] += static_cast<float>(add[k]);
        b.copyFromHost(grad, g.data(), count * sizeof(float));
    }

    // dOut * (out > 0): the fused ReLU's backward on its own, for the paths whose ops take no gate.
    const Tensor& gated(Backend& b, const Tensor& out, const Tensor& dOut) {
        if (!m_gated.defined() || m_gated.shape() != dOut.shape()) m_gated = b.empty(dOut.shape());
        b.activationBackward(m_gated.f32(), dOut.f32(), nullptr, out.f32(), dOut.numel(), Activation::ReLU, 0.0f,
                             /*overwriteDx=*/true);
        return m_gated;
    }

    float* p(size_t i) { return m_params[i].value.f32(); }
    // A zeroed buffer for a gradient nobody wants (the backend ops accumulate into it).
    static float* scratch(Backend& b, Tensor& t, const Shape& s) {
        ensureBuffer(b, t, s);
        b.zero(t.raw(), t.bytes());
        return t.f32();
    }
    int m_c, m_inner;
    int m_block = 0;  // the layout of x, y and their gradients (setLayouts)
    float m_momentum, m_eps;
    bool m_fusedReLU = false;
    bool m_reluBackward = false;  // absorbFusedReLUBackward: backward gates dOut by the output
    bool m_trainingForward = false;
    std::vector<float> m_hostX, m_hostMean, m_hostInvStd;  // the synced path's forward, for its backward
    double m_count = 0;                                    // samples x inner of the global batch
    Tensor m_saveMean, m_saveInvStd, m_dxScratch, m_dgScratch, m_dbScratch, m_ones, m_zeros, m_invStd, m_gated;
};

class BatchNormType : public LayerType {
public:
    std::string name() const override { return "BatchNorm"; }
    std::string category() const override { return "Normalization"; }
    std::string description() const override {
        return "Normalizes each channel with the statistics of the batch while training (running averages when "
               "evaluating), then applies a learnable scale and shift.";
    }
    std::vector<ParamSpec> paramSpecs() const override {
        return {floatParam("momentum", 0.1, 0.0, 1.0, "weight of each new batch in the running statistics"),
                floatParam("eps", 1e-5, 1e-12, 1.0, "added to the variance for numerical stability")};
    }
    Shape inferShape(const Json&, const std::vector<Shape>& inputs) const override {
        expectInputCount(name(), {"in"}, inputs);
        const Shape& s = inputs[0];
        if (s.rank() < 1 || s.rank() > 3)
            throwShapeError("in", name(), s,
                            "a per-sample shape [channels], [channels, length] or "
                            "[channels, height, width]");
        toInt(s.numel(), "in", "element count");
        return s;
    }
    std::vector<ParameterSpec> parameterSpecs(const Json&, const std::vector<Shape>& inputs) const override {
        const int64_t c = inputs.at(0)[0];
        ParameterSpec mean{"running_mean", Shape{c}, Init::Zeros, c, c};
        ParameterSpec var{"running_var", Shape{c}, Init::Ones, c, c};
        mean.trainable = var.trainable = false;
        return {{"gamma", Shape{c}, Init::Ones, c, c}, {"beta", Shape{c}, Init::Zeros, c, c}, mean, var};
    }
    std::unique_ptr<Layer> create(const Json& params, const std::vector<Shape>& inputs, const Shape&) const override {
        const Shape& s = inputs.at(0);
        return std::make_unique<BatchNormLayer>(static_cast<int>(s[0]), static_cast<int>(s.product(1, s.rank())),
                                                params.at("momentum").get<float>(), params.at("eps").get<float>());
    }
    LayerCost cost(const Json&, const std::vector<Shape>& inputs, const Shape& output) const override {
        return elementwiseCost(inputs, output);
    }
    CompressibleWeight compressibleWeight() const override { return {}; }
    ChannelFacts channelFacts(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return perChannelFacts({"gamma", "beta", "running_mean", "running_var"});
    }
    bool foldableNormalization() const override { return true; }
};

}  // namespace

std::unique_ptr<LayerType> makeBatchNorm() { return std::make_unique<BatchNormType>(); }

}  // namespace strata::layers
