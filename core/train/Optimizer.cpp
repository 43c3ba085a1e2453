#include "core/train/Optimizer.h"

#include <cmath>
#include <stdexcept>

namespace strata {

Optimizer::Optimizer(Model& model, const TrainingSettings& settings) : m_model(model), m_settings(settings) {
    const std::string& o = settings.optimizer;
    if (o != "sgd" && o != "adam" && o != "adamw")
        throw std::invalid_argument("unknown optimizer '" + o + "' (expected sgd, adam or adamw)");
    Backend& be = model.backend();
    for (const auto& np : model.namedParameters()) {
        if (!np.param->trainable) continue;
        Slot s{np.name, np.param, {}, {}};
        const Shape& shape = np.param->value.shape();
        if (o == "sgd") {
            if (settings.momentum != 0.0) s.a = be.zeros(shape);
        } else {
            s.a = be.zeros(shape);
            s.b = be.zeros(shape);
        }
        m_slots.push_back(std::move(s));
    }
}

void Optimizer::step(double learningRate) {
    ++m_steps;
    Backend& be = m_model.backend();
    if (m_settings.optimizer == "sgd") {
        SgdParams p;
        p.lr = static_cast<float>(learningRate);
        p.momentum = static_cast<float>(m_settings.momentum);
        p.weightDecay = static_cast<float>(m_settings.weightDecay);
        p.nesterov = m_settings.nesterov;
        for (Slot& s : m_slots)
            be.sgdUpdate(s.param->value.f32(), s.a.defined() ? s.a.f32() : nullptr, s.param->grad.f32(),
                         s.param->value.numel(), p);
    } else {
        AdamParams p;
        p.lr = static_cast<float>(learningRate);
        p.beta1 = static_cast<float>(m_settings.beta1);
        p.beta2 = static_cast<float>(m_settings.beta2);
        p.eps = static_cast<float>(m_settings.eps);
        p.weightDecay = static_cast<float>(m_settings.weightDecay);
        p.decoupled = m_settings.optimizer == "adamw";
        p.step = m_steps;
        for (Slot& s : m_slots)
            be.adamUpdate(s.param->value.f32(), s.a.f32(), s.b.f32(), s.param->grad.f32(), s.param->value.numel(), p);
    }
}

double Optimizer::gradNorm() {
    Backend& be = m_model.backend();
    double sq = 0;
    for (Slot& s : m_slots) sq += be.sumSquares(s.param->grad.f32(), s.param->grad.numel());
    return std::sqrt(sq);
}

double Optimizer::clipGradNorm(double maxNorm) {
    const double norm = gradNorm();
    if (maxNorm > 0 && std::isfinite(norm) && norm > maxNorm) {
        const float factor = static_cast<float>(maxNorm / (norm + 1e-6));
        for (Slot& s : m_slots) m_model.backend().scale(s.param->grad.f32(), factor, s.param->grad.numel());
    }
    return norm;
}

std::map<std::string, std::vector<float>> Optimizer::state() {
    std::map<std::string, std::vector<float>> out;
    Backend& be = m_model.backend();
    const bool sgd = m_settings.optimizer == "sgd";
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
    const bool sgd = m_settings.optimizer == "sgd";
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
