// BatchNorm: normalizes each channel (dim 0 of the per-sample shape: [C],
// [C, L] or [C, H, W]) with batch statistics in training and running
// statistics in evaluation, then applies gamma and beta. running_mean and
// running_var are non-trainable state kept in checkpoints and exports.
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
        if (ctx.training) {
            // Per channel, so allocated once and reused whatever the batch size.
            ensureBuffer(b, m_saveMean, Shape{m_c});
            ensureBuffer(b, m_saveInvStd, Shape{m_c});
            b.batchNormForwardTraining(out.f32(), m_saveMean.f32(), m_saveInvStd.f32(), p(2), p(3), in[0]->f32(), p(0),
                                       p(1), n, m_c, m_inner, m_momentum, m_eps);
        } else {
            b.batchNormForwardInference(out.f32(), in[0]->f32(), p(0), p(1), p(2), p(3), n, m_c, m_inner, m_eps);
        }
    }

    void backward(LayerContext& ctx, const std::vector<const Tensor*>& in, const Tensor&, const Tensor& dOut,
                  const std::vector<Tensor*>& dIn) override {
        Backend& b = ctx.backend;
        const int n = static_cast<int>(batchOf(*in[0]));
        float* dgamma = gradOf(m_params[0]);
        float* dbeta = gradOf(m_params[1]);
        if (!dgamma) dgamma = scratch(b, m_dgScratch, Shape{m_c});
        if (!dbeta) dbeta = scratch(b, m_dbScratch, Shape{m_c});
        if (m_trainingForward) {
            float* dx = dIn[0] ? dIn[0]->f32() : scratch(b, m_dxScratch, dOut.shape());
            b.batchNormBackward(dx, dgamma, dbeta, dOut.f32(), in[0]->f32(), p(0), m_saveMean.f32(), m_saveInvStd.f32(),
                                n, m_c, m_inner);
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
        // invstd = (1 - 0) / sqrt(running_var + eps) * 1 + 0
        b.batchNormForwardInference(m_invStd.f32(), m_ones.f32(), m_ones.f32(), m_zeros.f32(), m_zeros.f32(), p(3), 1,
                                    m_c, 1, m_eps);
        // dgamma, dbeta (its dx, the batch-statistics one, is discarded).
        float* discard = scratch(b, m_dxScratch, dOut.shape());
        b.batchNormBackward(discard, dgamma, dbeta, dOut.f32(), in[0]->f32(), p(0), p(2), m_invStd.f32(), n, m_c,
                            m_inner);
        if (dIn[0]) {
            // dx += (dy - 0) / sqrt(running_var + eps) * gamma + 0
            b.batchNormForwardInference(discard, dOut.f32(), p(0), m_zeros.f32(), m_zeros.f32(), p(3), n, m_c, m_inner,
                                        m_eps);
            b.axpy(dIn[0]->f32(), 1.0f, discard, dOut.numel());
        }
    }

private:
    float* p(size_t i) { return m_params[i].value.f32(); }
    // A zeroed buffer for a gradient nobody wants (the backend ops accumulate into it).
    static float* scratch(Backend& b, Tensor& t, const Shape& s) {
        ensureBuffer(b, t, s);
        b.zero(t.raw(), t.bytes());
        return t.f32();
    }
    int m_c, m_inner;
    float m_momentum, m_eps;
    bool m_trainingForward = false;
    Tensor m_saveMean, m_saveInvStd, m_dxScratch, m_dgScratch, m_dbScratch, m_ones, m_zeros, m_invStd;
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
};

}  // namespace

std::unique_ptr<LayerType> makeBatchNorm() { return std::make_unique<BatchNormType>(); }

}  // namespace strata::layers
