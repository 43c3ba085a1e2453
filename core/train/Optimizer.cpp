#include "core/train/Optimizer.h"

#include <cmath>
#include <stdexcept>

namespace strata {

Optimizer::Optimizer(Model& model, const TrainingSettings& settings) : m_model(model), m_settings(settings) {
    const bool sgd = settings.optimizer == OptimizerKind::Sgd;
    Backend& be = model.backend();
    // The state is packed like the parameters (Model::packedValues): one block per slot kind, each
    // parameter's state at its parameter's offset, so one update covers every tensor.
    const Tensor& packed = model.packedValues();
    const bool needA = !sgd || settings.momentum != 0.0, needB = !sgd;
    if (packed.defined()) {
        if (needA) m_packedA = be.zeros(packed.shape());
        if (needB) m_packedB = be.zeros(packed.shape());
    }
    for (const auto& np : model.namedParameters()) {
        if (!np.param->trainable) continue;
        const int64_t offset = model.packedOffset(*np.param);
        if (offset < 0) throw std::logic_error("optimizer: parameter '" + np.name + "' is not packed");
        Slot s{np.name, np.param, {}, {}};
        const Shape& shape = np.param->value.shape();
        if (needA) s.a = m_packedA.slice(offset, shape);
        if (needB) s.b = m_packedB.slice(offset, shape);
        m_slots.push_back(std::move(s));
    }
}

void Optimizer::step(double learningRate) {
    ++m_steps;
    Backend& be = m_model.backend();
    if (m_settings.optimizer == OptimizerKind::Sgd) {
        SgdParams p;
        p.lr = static_cast<float>(learningRate);
        p.momentum = static_cast<float>(m_settings.momentum);
        p.weightDecay = static_cast<float>(m_settings.weightDecay);
        p.nesterov = m_settings.nesterov;
        const Tensor& w = m_model.packedValues();
        if (w.defined())  // the zeros between packed tensors stay zero: no gradient, no decay, no momentum
            be.sgdUpdate(w.f32(), m_packedA.defined() ? m_packedA.f32() : nullptr, m_model.packedGradients().f32(),
                         w.numel(), p);
    } else {
        AdamParams p;
        p.lr = static_cast<float>(learningRate);
        p.beta1 = static_cast<float>(m_settings.beta1);
        p.beta2 = static_cast<float>(m_settings.beta2);
        p.eps = static_cast<float>(m_settings.eps);
        p.weightDecay = static_cast<float>(m_settings.weightDecay);
        p.decoupled = m_settings.optimizer == OptimizerKind::AdamW;
        p.step = m_steps;
        const Tensor& w = m_model.packedValues();
        if (w.defined())
            be.adamUpdate(w.f32(), m_packedA.f32(), m_packedB.f32(), m_model.packedGradients().f32(), w.numel(), p);
    }
}

double Optimizer::gradNorm() {
    Backend& be = m_model.backend();
    const Tensor& g = m_model.packedGradients();
    return g.defined() ? std::sqrt(be.sumSquares(g.f32(), g.numel())) : 0.0;
}

double Optimizer::clipGradNorm(double maxNorm) {
    const double norm = gradNorm();
    if (maxNorm > 0 && std::isfinite(norm) && norm > maxNorm) {
        const float factor = static_cast<float>(maxNorm / (norm + 1e-6));
        const Tensor& g = m_model.packedGradients();
        m_model.backend().scale(g.f32(), factor, g.numel());
    }
    return norm;
}

std::map<std::string, std::vector<float>> Optimizer::state() {
    std::map<std::string, std::vector<float>> out;
    Backend& be = m_model.backend();
    const bool sgd = m_settings.optimizer == OptimizerKind::Sgd;
    for (Slot& s : m_slots) {
        for (int k = 0; k < 2; ++k) {
            const Tensor& t = k == 0 ? s.a : s.b;
            if (!t.defined()) continue;
            std::vector<float> host(static_cast<size_t>(t.numel()));
            be.toHost(t, host.data());
            out[(sgd ? "velocity." : (k == 0 ? "m." : "v.")) + s.name] = std::move(host);
        }
    }
    return out;
}

void Optimizer::loadState(const std::map<std::string, std::vector<float>>& state, int64_t steps) {
    Backend& be = m_model.backend();
    const bool sgd = m_settings.optimizer == OptimizerKind::Sgd;
    for (Slot& s : m_slots) {
        for (int k = 0; k < 2; ++k) {
            const Tensor& t = k == 0 ? s.a : s.b;
            if (!t.defined()) continue;
            const std::string key = (sgd ? "velocity." : (k == 0 ? "m." : "v.")) + s.name;
            auto it = state.find(key);
            if (it == state.end()) throw std::runtime_error("optimizer state '" + key + "' is missing");
            if (static_cast<int64_t>(it->second.size()) != t.numel())
                throw std::runtime_error("optimizer state '" + key + "' has " + std::to_string(it->second.size()) +
                                         " values, expected " + std::to_string(t.numel()));
            be.copyFromHost(t.raw(), it->second.data(), t.bytes());
        }
    }
    m_steps = steps;
}

}  // namespace strata
