// Finite-difference gradient checks for every registered layer type and for
// the three fused losses, on the reference CPU backend.
//
// For a layer, loss = sum(out * R) for a fixed random R (reduced in double),
// so the analytic gradients are what backward produces from dOutput = R. Each
// coordinate of every differentiable input and every trainable parameter is
// compared with a central difference (step 1e-2, as in Caffe's
// GradientChecker): |a - n| <= tol * max(1, |a|, |n|) per coordinate, and the
// relative error of the whole gradient must also stay under tol. tol is 3e-3,
// tighter than Caffe's 1e-2: the worst scaled error seen on these cases is
// about 4e-4 (LayerNorm), and each type's worst is printed. Kinks are
// kept away by construction: ReLU-like inputs are at least 3 steps from 0 and
// max-pool inputs are distinct by more than 2 steps, so no window changes its
// maximum under a perturbation.
//
// The table maps each layer type name to its cases; the test walks the
// registry, and a registered type without a case fails.
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <sstream>

#include "core/layers/LayerRegistry.h"
#include "tests/support/TestBackends.h"

using namespace strata;

namespace {

constexpr double kStep = 1e-2;
constexpr double kTolerance = 3e-3;

using Rng = std::mt19937_64;

enum class InputKind {
    Uniform,       // uniform in [-1, 1]
    AwayFromZero,  // |x| in [3 * step, 1]: no ReLU kink within a step
    Distinct,      // a shuffled grid with spacing 5 * step: no max-pool near-ties
    Ids,           // integer ids in [0, vocab)
};

struct Setup {
    Json params = Json::object();
    std::vector<Shape> inputs;  // per sample
    int batch = 2;
    bool training = false;
    uint64_t seed = 0;
    InputKind kind = InputKind::Uniform;
    int vocab = 0;                 // InputKind::Ids
    std::vector<InputKind> kinds;  // per input, where given (a mask beside a sequence); else `kind`
};

struct Case {
    std::string label;
    std::function<Setup(Rng&)> make;  // random shapes from the case's seeded generator
};

int randInt(Rng& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
double uniform(Rng& rng, double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }

std::vector<float> makeInput(Rng& rng, int64_t n, InputKind kind, int vocab) {
    std::vector<float> v(static_cast<size_t>(n));
    switch (kind) {
        case InputKind::Uniform:
            for (auto& x : v) x = static_cast<float>(uniform(rng, -1, 1));
            break;
        case InputKind::AwayFromZero:
            for (auto& x : v) {
                const double m = uniform(rng, 3 * kStep, 1.0);
                x = static_cast<float>(randInt(rng, 0, 1) ? m : -m);
            }
            break;
        case InputKind::Distinct: {
            for (size_t i = 0; i < v.size(); ++i)
                v[i] = static_cast<float>((static_cast<double>(i) - static_cast<double>(v.size()) / 2) * 5 * kStep);
            std::shuffle(v.begin(), v.end(), rng);
            break;
        }
        case InputKind::Ids:
            for (auto& x : v) x = static_cast<float>(randInt(rng, 0, vocab - 1));
            break;
    }
    return v;
}

struct CheckResult {
    std::vector<std::string> failures;  // one line per mismatching tensor (worst coordinate shown)
    int checkedValues = 0;
    double worst = 0;  // largest |a - n| / max(1, |a|, |n|) seen
    bool ok() const { return failures.empty(); }
    std::string text() const {
        std::string s;
        for (const auto& f : failures) s += "\n  " + f;
        return s;
    }
};

// Compares an analytic gradient with numeric estimates; appends a failure line naming the tensor.
void compare(CheckResult& r, const std::string& what, const std::vector<double>& analytic,
             const std::vector<double>& numeric) {
    double worst = 0, worstA = 0, worstN = 0, diffSq = 0, refSq = 0;
    size_t worstAt = 0;
    bool bad = false;
    for (size_t i = 0; i < analytic.size(); ++i) {
        const double a = analytic[i], n = numeric[i], d = std::fabs(a - n);
        const double scale = std::max({1.0, std::fabs(a), std::fabs(n)});
        diffSq += d * d;
        refSq += std::max(a * a, n * n);
        if (!std::isfinite(a) || d > kTolerance * scale) bad = true;
        if (!std::isfinite(a) || d / scale > worst) {
            worst = std::isfinite(a) ? d / scale : INFINITY;
            worstAt = i;
            worstA = a;
            worstN = n;
        }
    }
    const double relative = refSq > 0 ? std::sqrt(diffSq / refSq) : std::sqrt(diffSq);
    if (relative > kTolerance) bad = true;
    r.checkedValues += static_cast<int>(analytic.size());
    r.worst = std::max(r.worst, worst);
    if (bad) {
        std::ostringstream os;
        os << what << ": analytic " << worstA << " vs numeric " << worstN << " at index " << worstAt
           << " (relative error of the whole gradient " << relative << ")";
        r.failures.push_back(os.str());
    }
}

double hostSumProduct(Backend& b, const Tensor& out, const std::vector<float>& r) {
    std::vector<float> host(static_cast<size_t>(out.numel()));
    b.toHost(out, host.data());
    double s = 0;
    for (size_t i = 0; i < host.size(); ++i) s += static_cast<double>(host[i]) * r[i];
    return s;
}

std::vector<double> toDouble(Backend& b, const Tensor& t) {
    std::vector<float> host(static_cast<size_t>(t.numel()));
    b.toHost(t, host.data());
    return std::vector<double>(host.begin(), host.end());
}

// Runs one gradient check. `layer` may be given to check a layer other than the one the type creates
// (the checker's own self-test); its parameters must match the type's parameterSpecs.
CheckResult checkLayer(Backend& b, const LayerType& type, const Setup& s, uint64_t seed,
                       std::unique_ptr<Layer> layer = nullptr) {
    CheckResult result;
    Rng rng(seed);
    const Json params = type.normalizeParams(s.params);
    const Shape outShape = type.inferShape(params, s.inputs);
    const auto specs = type.parameterSpecs(params, s.inputs);
    if (!layer) layer = type.create(params, s.inputs, outShape);

    // Parameters: random values rather than the spec's init, so that gamma is not exactly 1 and every
    // weight matters; state (running statistics) plausible and positive where it must be.
    std::vector<Parameter>& ps = layer->parameters();
    ps.clear();
    std::vector<std::vector<float>> gradBase;
    for (const ParameterSpec& spec : specs) {
        std::vector<float> v(static_cast<size_t>(spec.shape.numel()));
        const double bound = spec.init == Init::Ones ? 0.0 : std::sqrt(3.0 / static_cast<double>(spec.fanIn));
        for (auto& x : v)
            x = static_cast<float>(spec.init == Init::Ones ? uniform(rng, 0.5, 1.5) : uniform(rng, -1, 1) * bound);
        Parameter p;
        p.name = spec.name;
        p.trainable = spec.trainable;
        p.value = b.fromHost(spec.shape, v.data());
        if (spec.trainable) {
            // Backward accumulates: start the gradient from a known non-zero value and subtract it later.
            gradBase.push_back(makeInput(rng, spec.shape.numel(), InputKind::Uniform, 0));
            p.grad = b.fromHost(spec.shape, gradBase.back().data());
        } else {
            gradBase.emplace_back();
        }
        ps.push_back(std::move(p));
    }

    std::vector<Tensor> inputs;
    std::vector<const Tensor*> inPtrs;
    for (size_t i = 0; i < s.inputs.size(); ++i) {
        const Shape batched = s.inputs[i].withBatch(s.batch);
        const auto host = makeInput(rng, batched.numel(), i < s.kinds.size() ? s.kinds[i] : s.kind, s.vocab);
        inputs.push_back(b.fromHost(batched, host.data()));
    }
    for (auto& t : inputs) inPtrs.push_back(&t);
    const Shape outBatched = outShape.withBatch(s.batch);
    Tensor out = b.empty(outBatched);
    const std::vector<float> R = makeInput(rng, outBatched.numel(), InputKind::Uniform, 0);

    LayerContext ctx{b, s.training, s.seed};
    auto loss = [&] {
        layer->forward(ctx, inPtrs, out);
        return hostSumProduct(b, out, R);
    };

    // Analytic gradients.
    loss();
    Tensor dOut = b.fromHost(outBatched, R.data());
    std::vector<Tensor> dIn;
    std::vector<Tensor*> dInPtrs;
    std::vector<std::vector<float>> dInBase;
    for (size_t i = 0; i < inputs.size(); ++i) {
        if (type.inputDifferentiable(static_cast<int>(i))) {
            dInBase.push_back(makeInput(rng, inputs[i].numel(), InputKind::Uniform, 0));
            dIn.push_back(b.fromHost(inputs[i].shape(), dInBase.back().data()));
        } else {
            dInBase.emplace_back();
            dIn.emplace_back();
        }
    }
    for (auto& t : dIn) dInPtrs.push_back(t.defined() ? &t : nullptr);
    layer->backward(ctx, inPtrs, out, dOut, dInPtrs);

    // Numeric gradients by central differences, one coordinate at a time.
    auto numeric = [&](const Tensor& t) {
        std::vector<float> host(static_cast<size_t>(t.numel()));
        b.toHost(t, host.data());
        std::vector<double> g(host.size());
        for (size_t i = 0; i < host.size(); ++i) {
            const float orig = host[i];
            const float plus = orig + static_cast<float>(kStep), minus = orig - static_cast<float>(kStep);
            b.copyFromHost(t.f32() + i, &plus, sizeof(float));
            const double lp = loss();
            b.copyFromHost(t.f32() + i, &minus, sizeof(float));
            const double lm = loss();
            b.copyFromHost(t.f32() + i, &orig, sizeof(float));
            // The actual float step, not the nominal one.
            g[i] = (lp - lm) / (static_cast<double>(plus) - static_cast<double>(minus));
        }
        return g;
    };

    for (size_t i = 0; i < inputs.size(); ++i) {
        if (!dIn[i].defined()) continue;
        std::vector<double> a = toDouble(b, dIn[i]);
        for (size_t k = 0; k < a.size(); ++k) a[k] -= dInBase[i][k];
        compare(result, "input " + std::to_string(i) + " " + inputs[i].shape().toString(), a, numeric(inputs[i]));
    }
    for (size_t p = 0; p < ps.size(); ++p) {
        if (!ps[p].trainable) continue;
        std::vector<double> a = toDouble(b, ps[p].grad);
        for (size_t k = 0; k < a.size(); ++k) a[k] -= gradBase[p][k];
        compare(result, "parameter " + ps[p].name + " " + ps[p].value.shape().toString(), a, numeric(ps[p].value));
    }
    return result;
}

// ---- the cases, one list per layer type ----------------------------------------

std::map<std::string, std::vector<Case>> caseTable() {
    std::map<std::string, std::vector<Case>> t;
    auto simple = [](InputKind kind, Json params = Json::object()) {
        return [kind, params](Rng& rng) {
            Setup s;
            s.params = params;
            s.inputs = {Shape{randInt(rng, 1, 3), randInt(rng, 2, 4), randInt(rng, 2, 5)}};
            s.batch = randInt(rng, 1, 3);
            s.kind = kind;
            return s;
        };
    };
    t["Input"] = {};  // no inputs, no parameters: covered by inputLayerCopiesBatch
    t["Dense"] = {
        {"bias",
         [](Rng& rng) {
             Setup s;
             s.params = {{"units", randInt(rng, 1, 7)}};
             s.inputs = {Shape{randInt(rng, 1, 9)}};
             s.batch = randInt(rng, 1, 4);
             return s;
         }},
        {"no bias, xavier",
         [](Rng& rng) {
             Setup s;
             s.params = {{"units", randInt(rng, 2, 5)}, {"use_bias", false}, {"init", "xavier"}};
             s.inputs = {Shape{randInt(rng, 3, 6)}};
             s.batch = 3;
             return s;
         }},
        {"sequence [length, features]",
         [](Rng& rng) {
             Setup s;
             s.params = {{"units", randInt(rng, 1, 6)}};
             s.inputs = {Shape{randInt(rng, 2, 5), randInt(rng, 1, 7)}};
             s.batch = randInt(rng, 1, 3);
             return s;
         }},
    };
    t["Conv2D"] = {
        {"3x3 pad 1",
         [](Rng& rng) {
             Setup s;
             s.params = {{"filters", randInt(rng, 1, 3)}, {"kernel", 3}, {"padding", 1}};
             s.inputs = {Shape{randInt(rng, 1, 3), randInt(rng, 3, 5), randInt(rng, 3, 5)}};
             return s;
         }},
        {"2x3 stride 2x1 dilation 2x1 no bias",
         [](Rng& rng) {
             Setup s;
             s.params = {{"filters", 2},       {"kernel", {2, 3}},  {"stride", {2, 1}},
                         {"dilation", {2, 1}}, {"padding", {1, 0}}, {"use_bias", false}};
             s.inputs = {Shape{2, randInt(rng, 4, 6), randInt(rng, 3, 5)}};
             s.batch = 1;
             return s;
         }},
        {"groups 2",
         [](Rng& rng) {
             Setup s;
             s.params = {{"filters", 4}, {"kernel", 2}, {"groups", 2}};
             s.inputs = {Shape{4, randInt(rng, 2, 4), randInt(rng, 2, 4)}};
             return s;
         }},
        {"groups 4, two filters a group",
         [](Rng& rng) {
             Setup s;
             s.params = {{"filters", 8}, {"kernel", 3}, {"padding", 1}, {"groups", 4}};
             s.inputs = {Shape{8, randInt(rng, 2, 4), randInt(rng, 2, 4)}};
             s.batch = 1;
             return s;
         }},
        {"depthwise 3x3, 32 channels",
         [](Rng& rng) {
             Setup s;
             s.params = {
                 {"filters", 32}, {"kernel", 3}, {"padding", 1}, {"groups", 32}, {"stride", randInt(rng, 1, 2)}};
             s.inputs = {Shape{32, 3, 3}};
             s.batch = 1;
             return s;
         }},
    };
    t["ConvTranspose2D"] = {
        {"4x4 stride 2 pad 1 (doubles)",
         [](Rng& rng) {
             Setup s;
             s.params = {{"filters", randInt(rng, 1, 3)}, {"kernel", 4}, {"stride", 2}, {"padding", 1}};
             s.inputs = {Shape{randInt(rng, 1, 3), randInt(rng, 2, 3), randInt(rng, 2, 3)}};
             return s;
         }},
        {"3x2 stride 2x3 output padding 1x2 dilation 1x2 groups 2, no bias",
         [](Rng& rng) {
             Setup s;
             s.params = {{"filters", 4},      {"kernel", {3, 2}},         {"stride", {2, 3}},
                         {"padding", {1, 0}}, {"output_padding", {1, 2}}, {"dilation", {1, 2}},
                         {"groups", 2},       {"use_bias", false}};
             s.inputs = {Shape{2, randInt(rng, 2, 3), randInt(rng, 1, 3)}};
             s.batch = 1;
             return s;
         }},
    };
    auto upsample = [](Json params) {
        return [params](Rng& rng) {
            Setup s;
            s.params = params;
            s.inputs = {Shape{randInt(rng, 1, 2), randInt(rng, 1, 3), randInt(rng, 1, 4)}};
            s.batch = randInt(rng, 1, 2);
            return s;
        };
    };
    t["Upsample2D"] = {
        {"nearest 2x", upsample(Json::object())},
        {"nearest 3x2", upsample({{"scale", {3, 2}}})},
        {"bilinear 2x", upsample({{"mode", "bilinear"}})},
        {"bilinear 2x3 align_corners", upsample({{"scale", {2, 3}}, {"mode", "bilinear"}, {"align_corners", true}})}};
    t["MaxPool2D"] = {
        {"2x2", simple(InputKind::Distinct, {{"kernel", 2}})},
        {"3x3 stride 2 pad 1 (overlapping)",
         [](Rng& rng) {
             Setup s;
             s.params = {{"kernel", 3}, {"stride", 2}, {"padding", 1}};
             s.inputs = {Shape{randInt(rng, 1, 2), randInt(rng, 3, 6), randInt(rng, 3, 6)}};
             s.kind = InputKind::Distinct;
             return s;
         }},
    };
    t["AvgPool2D"] = {
        {"2x2", simple(InputKind::Uniform, {{"kernel", 2}})},
        {"3x2 stride 1 pad 1x1",
         [](Rng& rng) {
             Setup s;
             s.params = {{"kernel", {3, 2}}, {"stride", 1}, {"padding", {1, 1}}};
             s.inputs = {Shape{randInt(rng, 1, 2), randInt(rng, 2, 5), randInt(rng, 2, 5)}};
             return s;
         }},
    };
    t["GlobalAvgPool"] = {{"image", simple(InputKind::Uniform)}};
    t["Flatten"] = {{"image", simple(InputKind::Uniform)}};
    t["Reshape"] = {{"-1", [](Rng& rng) {
                         Setup s;
                         const int a = randInt(rng, 1, 4), b = randInt(rng, 1, 4);
                         s.params = {{"shape", {b, -1}}};
                         s.inputs = {Shape{a * b * 2}};
                         return s;
                     }}};
    t["ReLU"] = {{"away from the kink", simple(InputKind::AwayFromZero)}};
    t["LeakyReLU"] = {{"alpha 0.2, away from the kink", simple(InputKind::AwayFromZero, {{"alpha", 0.2}})}};
    t["GELU"] = {{"any", simple(InputKind::Uniform)}};
    t["Sigmoid"] = {{"any", simple(InputKind::Uniform)}};
    t["Tanh"] = {{"any", simple(InputKind::Uniform)}};
    // Distinct's inputs lie on a grid of multiples of 5 steps: bounds halfway between grid points keep every input
    // 2.5 steps from a kink, with values below, between and above the bounds.
    t["Clip"] = {{"[-0.5, 0.5]", simple(InputKind::Distinct, {{"min", -0.475}, {"max", 0.525}})},
                 {"ReLU6 defaults", simple(InputKind::AwayFromZero)}};
    // The kinks at -3 and 3 are outside these inputs; test_backend_ops checks the backward on [-4, 4].
    t["HardSwish"] = {{"middle", simple(InputKind::Uniform)}};
    t["Softmax"] = {{"rank 1",
                     [](Rng& rng) {
                         Setup s;
                         s.inputs = {Shape{randInt(rng, 2, 7)}};
                         s.batch = 3;
                         return s;
                     }},
                    {"rank 3, last axis", simple(InputKind::Uniform)}};
    auto batchNorm = [](bool training, int rank) {
        return [training, rank](Rng& rng) {
            Setup s;
            s.params = {{"momentum", 0.2}, {"eps", 1e-3}};
            s.inputs = {rank == 1 ? Shape{randInt(rng, 1, 4)} : Shape{randInt(rng, 1, 3), randInt(rng, 2, 3), 2}};
            s.batch = rank == 1 ? randInt(rng, 4, 6) : 2;
            s.training = training;
            return s;
        };
    };
    t["BatchNorm"] = {{"training [C,H,W]", batchNorm(true, 3)},
                      {"training [C]", batchNorm(true, 1)},
                      {"eval [C,H,W]", batchNorm(false, 3)},
                      {"eval [C]", batchNorm(false, 1)}};
    t["LayerNorm"] = {{"rank 1",
                       [](Rng& rng) {
                           Setup s;
                           s.inputs = {Shape{randInt(rng, 3, 8)}};
                           s.batch = 3;
                           return s;
                       }},
                      {"rank 2", [](Rng& rng) {
                           Setup s;
                           s.params = {{"eps", 1e-3}};
                           s.inputs = {Shape{randInt(rng, 2, 3), randInt(rng, 3, 6)}};
                           return s;
                       }}};
    t["Dropout"] = {{"training, fixed seed",
                     [](Rng& rng) {
                         Setup s;
                         s.params = {{"rate", 0.3}};
                         s.inputs = {Shape{randInt(rng, 5, 20)}};
                         s.batch = 3;
                         s.training = true;
                         s.seed = 1234;
                         return s;
                     }},
                    {"eval", simple(InputKind::Uniform, {{"rate", 0.5}})}};
    t["Add"] = {{"2 inputs",
                 [](Rng& rng) {
                     Setup s;
                     const Shape sh{randInt(rng, 1, 3), randInt(rng, 1, 4)};
                     s.inputs = {sh, sh};
                     return s;
                 }},
                {"3 inputs", [](Rng& rng) {
                     Setup s;
                     s.params = {{"inputs", 3}};
                     const Shape sh{randInt(rng, 1, 6)};
                     s.inputs = {sh, sh, sh};
                     return s;
                 }}};
    auto concat = [](int axis, int count) {
        return [axis, count](Rng& rng) {
            Setup s;
            s.params = {{"inputs", count}, {"axis", axis}};
            const Shape base{randInt(rng, 1, 3), randInt(rng, 1, 3), randInt(rng, 1, 3)};
            for (int i = 0; i < count; ++i) {
                Shape sh = base;
                sh[axis] = randInt(rng, 1, 3);
                s.inputs.push_back(sh);
            }
            return s;
        };
    };
    t["Concat"] = {
        {"axis 0, 2 inputs", concat(0, 2)}, {"axis 2, 3 inputs", concat(2, 3)}, {"axis 1, 2 inputs", concat(1, 2)}};
    t["Embedding"] = {{"ids with repeats", [](Rng& rng) {
                           Setup s;
                           s.vocab = randInt(rng, 3, 6);
                           s.params = {{"vocab", s.vocab}, {"dim", randInt(rng, 1, 4)}};
                           s.inputs = {Shape{randInt(rng, 3, 7)}};
                           s.batch = 2;
                           s.kind = InputKind::Ids;
                           return s;
                       }}};
    t["SequenceMeanPool"] = {{"[T, D]", [](Rng& rng) {
                                  Setup s;
                                  s.inputs = {Shape{randInt(rng, 1, 5), randInt(rng, 1, 4)}};
                                  return s;
                              }}};
    t["Conv1D"] = {
        {"kernel 3, padding 1",
         [](Rng& rng) {
             Setup s;
             s.params = {{"filters", randInt(rng, 1, 4)}, {"kernel", 3}, {"padding", 1}};
             s.inputs = {Shape{randInt(rng, 3, 7), randInt(rng, 1, 4)}};
             s.batch = randInt(rng, 1, 3);
             return s;
         }},
        {"stride 2, dilation 2, padding 2, no bias",
         [](Rng& rng) {
             Setup s;
             s.params = {{"filters", randInt(rng, 1, 3)},
                         {"kernel", randInt(rng, 2, 3)},
                         {"stride", 2},
                         {"dilation", 2},
                         {"padding", 2},
                         {"use_bias", false}};
             s.inputs = {Shape{randInt(rng, 4, 9), randInt(rng, 1, 3)}};
             s.batch = 2;
             return s;
         }},
        {"stride 1, dilation 2, no padding (the whole-batch GEMMs' layout without padding rows)",
         [](Rng& rng) {
             Setup s;
             s.params = {{"filters", randInt(rng, 1, 3)}, {"kernel", 2}, {"dilation", 2}};
             s.inputs = {Shape{randInt(rng, 3, 6), randInt(rng, 1, 3)}};
             s.batch = 3;
             return s;
         }},
        {"kernel 1",
         [](Rng& rng) {
             Setup s;
             s.params = {{"filters", 2}, {"kernel", 1}, {"stride", randInt(rng, 1, 3)}};
             s.inputs = {Shape{randInt(rng, 1, 6), 3}};
             s.batch = 2;
             return s;
         }},
    };
    // Masked sequence layers: the mask is a row of token ids in [0, 3), so about a third of the positions are
    // padding (id 0), and with 2-5 positions some samples may be all padding.
    auto masked = [](InputKind kind) {
        return [kind](Rng& rng) {
            Setup s;
            s.params = {{"masked", true}};
            const int64_t len = randInt(rng, 2, 5);
            s.inputs = {Shape{len, randInt(rng, 1, 4)}, Shape{len}};
            s.kinds = {kind, InputKind::Ids};
            s.vocab = 3;
            s.batch = 3;
            return s;
        };
    };
    t["SequenceMeanPool"].push_back({"masked", masked(InputKind::Uniform)});
    t["SequenceMaxPool"] = {{"[T, D]",
                             [](Rng& rng) {
                                 Setup s;
                                 s.inputs = {Shape{randInt(rng, 1, 5), randInt(rng, 1, 4)}};
                                 s.kind = InputKind::Distinct;
                                 return s;
                             }},
                            {"masked", masked(InputKind::Distinct)}};
    auto attention = [](int heads, bool mask, bool bias, double dropout) {
        return [=](Rng& rng) {
            Setup s;
            s.params = {{"heads", heads}, {"masked", mask}, {"use_bias", bias}, {"dropout", dropout}};
            const int64_t len = randInt(rng, 2, 4);
            s.inputs = {Shape{len, heads * randInt(rng, 1, 3)}};
            if (mask) {
                s.inputs.push_back(Shape{len});
                s.kinds = {InputKind::Uniform, InputKind::Ids};
                s.vocab = 3;
            }
            s.batch = randInt(rng, 1, 3);
            // Dropout in training: the same seed every call, so the mask is fixed across the differences.
            s.training = dropout > 0;
            s.seed = 7;
            return s;
        };
    };
    t["MultiHeadSelfAttention"] = {{"1 head", attention(1, false, true, 0.0)},
                                   {"2 heads, masked", attention(2, true, true, 0.0)},
                                   {"3 heads, no bias", attention(3, false, false, 0.0)},
                                   {"2 heads, masked, dropout 0.3 in training", attention(2, true, true, 0.3)}};
    t["PositionalEmbedding"] = {{"[T, D]", [](Rng& rng) {
                                     Setup s;
                                     s.inputs = {Shape{randInt(rng, 1, 5), randInt(rng, 1, 4)}};
                                     s.batch = randInt(rng, 1, 3);
                                     return s;
                                 }}};
    return t;
}

// ---- layers for the checker's self-test ------------------------------------------

// A sigmoid whose backward drops the (1 - y) factor: dx += dy * y.
class BrokenSigmoidLayer : public Layer {
public:
    void forward(LayerContext& ctx, const std::vector<const Tensor*>& in, Tensor& out) override {
        ctx.backend.activationForward(out.f32(), in[0]->f32(), out.numel(), Activation::Sigmoid, 0);
    }
    void backward(LayerContext& ctx, const std::vector<const Tensor*>&, const Tensor& out, const Tensor& dOut,
                  const std::vector<Tensor*>& dIn) override {
        Backend& b = ctx.backend;
        std::vector<float> y(static_cast<size_t>(out.numel())), dy(y.size());
        b.toHost(out, y.data());
        b.toHost(dOut, dy.data());
        for (size_t i = 0; i < y.size(); ++i) y[i] *= dy[i];
        Tensor t = b.fromHost(out.shape(), y.data());
        b.axpy(dIn[0]->f32(), 1.0f, t.f32(), t.numel());
    }
};

// Wraps a real layer and scales its input gradient by (1 + error): a subtle bug.
class SkewedLayer : public Layer {
public:
    SkewedLayer(std::unique_ptr<Layer> inner, float error) : m_inner(std::move(inner)), m_error(error) {}
    void forward(LayerContext& ctx, const std::vector<const Tensor*>& in, Tensor& out) override {
        m_inner->parameters() = m_params;  // shares storage (tensors are handles)
        m_inner->forward(ctx, in, out);
    }
    void backward(LayerContext& ctx, const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dOut,
                  const std::vector<Tensor*>& dIn) override {
        Backend& b = ctx.backend;
        Tensor tmp = b.zeros(dIn[0]->shape());
        std::vector<Tensor*> redirected = dIn;
        redirected[0] = &tmp;
        m_inner->backward(ctx, in, out, dOut, redirected);
        b.axpy(dIn[0]->f32(), 1.0f + m_error, tmp.f32(), tmp.numel());
    }

private:
    std::unique_ptr<Layer> m_inner;
    float m_error;
};

// ---- the facts each layer type states (LayerType::cost, compressibleWeight, channelFacts, roles) -----------

const ParameterSpec* findSpec(const std::vector<ParameterSpec>& specs, const std::string& name) {
    for (const ParameterSpec& p : specs)
        if (p.name == name) return &p;
    return nullptr;
}

// FLOPs per sample (forward, backward), counted from the parameters' shapes (a weight's rows are its output
// units) rather than from the layer's params: the count each type's cost() must agree with.
using FlopCount = std::function<std::pair<double, double>(const Json& params, const std::vector<Shape>& in,
                                                          const Shape& out, const std::vector<ParameterSpec>& specs)>;

std::map<std::string, FlopCount> referenceFlops() {
    const auto numel = [](const std::vector<Shape>& in) {
        double n = 0;
        for (const Shape& s : in) n += static_cast<double>(s.numel());
        return n;
    };
    const FlopCount none = [](const Json&, const std::vector<Shape>&, const Shape&, const std::vector<ParameterSpec>&) {
        return std::pair{0.0, 0.0};
    };
    const FlopCount perOutput = [](const Json&, const std::vector<Shape>&, const Shape& out,
                                   const std::vector<ParameterSpec>&) {
        const auto n = static_cast<double>(out.numel());
        return std::pair{n, n};
    };
    const FlopCount perInput = [numel](const Json&, const std::vector<Shape>& in, const Shape&,
                                       const std::vector<ParameterSpec>&) {
        return std::pair{numel(in), numel(in)};
    };
    // A matrix product: 2 FLOPs for each value of a weight row, per output value; backward twice that.
    const auto matmul = [](int rowAxis) -> FlopCount {
        return [rowAxis](const Json&, const std::vector<Shape>&, const Shape& out,
                         const std::vector<ParameterSpec>& specs) {
            const Shape& w = findSpec(specs, "weight")->shape;
            const double f = 2.0 * static_cast<double>(out.numel()) * static_cast<double>(w.numel() / w[rowAxis]);
            return std::pair{f, 2 * f};
        };
    };
    const FlopCount window = [](const Json& params, const std::vector<Shape>&, const Shape& out,
                                const std::vector<ParameterSpec>&) {
        const std::vector<int64_t> k = params.at("kernel").get<std::vector<int64_t>>();
        const double f = static_cast<double>(out.numel()) * static_cast<double>(k.at(0) * k.at(k.size() - 1));
        return std::pair{f, f};
    };
    std::map<std::string, FlopCount> t;
    for (const char* type : {"Input", "Flatten", "Reshape"}) t[type] = none;
    for (const char* type : {"ReLU", "LeakyReLU", "GELU", "Sigmoid", "Tanh", "Clip", "HardSwish", "Softmax",
                             "BatchNorm", "LayerNorm", "Dropout", "Add", "Concat"})
        t[type] = perOutput;
    for (const char* type : {"GlobalAvgPool", "SequenceMeanPool", "SequenceMaxPool", "PositionalEmbedding"})
        t[type] = perInput;
    t["MaxPool2D"] = t["AvgPool2D"] = window;
    t["Dense"] = t["Conv2D"] = matmul(0);
    t["Conv1D"] = matmul(1);  // [kernel, filters, channels]
    // Each input value meets a weight row ([channels, filters / groups, kh, kw]: a row per input channel).
    t["ConvTranspose2D"] = [](const Json&, const std::vector<Shape>& in, const Shape&,
                              const std::vector<ParameterSpec>& specs) {
        const Shape& w = findSpec(specs, "weight")->shape;
        const double f = 2.0 * static_cast<double>(in.at(0).numel()) * static_cast<double>(w.numel() / w[0]);
        return std::pair{f, 2 * f};
    };
    // Four taps a bilinear output (7 operations forward, 8 back); nearest only copies.
    t["Upsample2D"] = [](const Json& params, const std::vector<Shape>&, const Shape& out,
                         const std::vector<ParameterSpec>&) {
        const double n = params.at("mode") == "bilinear" ? static_cast<double>(out.numel()) : 0.0;
        return std::pair{7 * n, 8 * n};
    };
    t["Embedding"] = [](const Json&, const std::vector<Shape>&, const Shape& out, const std::vector<ParameterSpec>&) {
        return std::pair{0.0, static_cast<double>(out.numel())};
    };
    // Q, K, V and output projections 8 T D^2, scores and weighted sum 4 T^2 D (in_weight is [3 D, D]).
    t["MultiHeadSelfAttention"] = [](const Json&, const std::vector<Shape>&, const Shape& out,
                                     const std::vector<ParameterSpec>& specs) {
        const double d = static_cast<double>(findSpec(specs, "in_weight")->shape[0]) / 3.0,
                     len = static_cast<double>(out.numel()) / d;
        const double f = 8.0 * len * d * d + 4.0 * len * len * d;
        return std::pair{f, 2 * f};
    };
    return t;
}

// A forward pass of a layer at inference on random inputs, with random parameters: the inputs and the output.
struct ForwardRun {
    std::vector<std::vector<float>> inputs;
    std::vector<float> output;
    std::map<std::string, std::vector<float>> params;
};

ForwardRun runForward(Backend& b, const LayerType& type, const Setup& s, uint64_t seed) {
    Rng rng(seed);
    ForwardRun run;
    const Json params = type.normalizeParams(s.params);
    const Shape out = type.inferShape(params, s.inputs);
    auto layer = type.create(params, s.inputs, out);
    for (const ParameterSpec& spec : type.parameterSpecs(params, s.inputs)) {
        std::vector<float> v = makeInput(rng, spec.shape.numel(), InputKind::Uniform, 0);
        if (spec.name == "running_var")
            for (float& x : v) x = 0.5f + std::fabs(x);
        Parameter p;
        p.name = spec.name;
        p.trainable = spec.trainable;
        p.value = b.fromHost(spec.shape, v.data());
        layer->parameters().push_back(std::move(p));
        run.params[spec.name] = v;
    }
    std::vector<Tensor> inputs;
    std::vector<const Tensor*> ptrs;
    for (size_t i = 0; i < s.inputs.size(); ++i) {
        const Shape batched = s.inputs[i].withBatch(s.batch);
        run.inputs.push_back(makeInput(rng, batched.numel(), i < s.kinds.size() ? s.kinds[i] : s.kind, s.vocab));
        inputs.push_back(b.fromHost(batched, run.inputs.back().data()));
    }
    for (const Tensor& t : inputs) ptrs.push_back(&t);
    Tensor y = b.empty(out.withBatch(s.batch));
    LayerContext ctx{b, false, 0};
    layer->forward(ctx, ptrs, y);
    run.output.resize(static_cast<size_t>(y.numel()));
    b.toHost(y, run.output.data());
    return run;
}

double activationOf(Activation a, double x, double alpha) {
    switch (a) {
        case Activation::ReLU: return std::max(x, 0.0);
        case Activation::LeakyReLU: return x > 0 ? x : alpha * x;
        case Activation::GELU: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
        case Activation::Sigmoid: return 1 / (1 + std::exp(-x));
        case Activation::Tanh: return std::tanh(x);
        case Activation::HardSwish: return x * std::min(std::max(x + 3, 0.0), 6.0) / 6;
    }
    return NAN;
}

// Checks one setup of a type against every fact it states; returns the first disagreement ("" when none).
std::string checkFacts(Backend& b, const LayerType& lt, const Setup& s, const FlopCount& reference, uint64_t seed) {
    const Json params = lt.normalizeParams(s.params);
    const Shape out = lt.inferShape(params, s.inputs);
    const std::vector<ParameterSpec> specs = lt.parameterSpecs(params, s.inputs);
    const auto near = [](double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max(1.0, std::fabs(b)); };

    const LayerCost cost = lt.cost(params, s.inputs, out);
    for (double v : {cost.forwardFlops, cost.backwardFlops, cost.forwardBytes, cost.backwardBytes})
        if (!std::isfinite(v) || v < 0) return "cost: a negative or non-finite value";
    for (const auto* list : {&cost.scratchFloats, &cost.inputGradientScratchFloats})
        for (int64_t n : *list)
            if (n <= 0) return "cost: a scratch buffer of " + std::to_string(n) + " floats";
    const auto [fwd, bwd] = reference(params, s.inputs, out, specs);
    if (!near(cost.forwardFlops, fwd) || !near(cost.backwardFlops, bwd))
        return "cost: " + std::to_string(cost.forwardFlops) + " / " + std::to_string(cost.backwardFlops) +
               " FLOPs per sample, the reference count is " + std::to_string(fwd) + " / " + std::to_string(bwd);
    double in = 0;
    for (const Shape& sh : s.inputs) in += static_cast<double>(sh.numel());
    if (!near(cost.forwardBytes, 4 * (in + static_cast<double>(out.numel()))))
        return "cost: forward bytes are not its inputs and output";

    const CompressibleWeight cw = lt.compressibleWeight();
    if (!cw.weight.empty()) {
        const ParameterSpec* w = findSpec(specs, cw.weight);
        if (!w || cw.axis < 0 || cw.axis >= w->shape.rank()) return "compressibleWeight: no such weight or axis";
        const ParameterSpec* bias = findSpec(specs, cw.bias);
        if (bias && bias->shape != Shape{w->shape[cw.axis]}) return "compressibleWeight: the bias does not match";
    }

    const ChannelFacts cf = lt.channelFacts(params, s.inputs, out);
    const ParameterSpec* weight = findSpec(specs, cf.weight);
    if (!cf.countParam.empty()) {
        if (!params.contains(cf.countParam) || cf.unitName.empty() || !weight)
            return "channelFacts: no count parameter, unit name or weight";
        const int64_t count = params.at(cf.countParam).get<int64_t>();
        if (weight->shape[0] != count) return "channelFacts: the weight's rows are not the " + cf.unitName;
        const ParameterSpec* bias = findSpec(specs, cf.bias);
        if (!cf.bias.empty() && (!bias || bias->shape != Shape{count}))
            return "channelFacts: the bias is not one value per output channel";
        if (cf.bias.empty() && findSpec(specs, "bias")) return "channelFacts: a bias left out";
        if (cf.takesFoldedNormalization && out[0] != count)
            return "channelFacts: a folded normalization's channels are not its output's first axis";
    }
    const Shape& first = s.inputs.empty() ? out : s.inputs[0];
    switch (cf.input) {
        case ChannelFacts::Input::Mixes: break;
        case ChannelFacts::Input::Weighs: {
            if (!weight) return "channelFacts: weighs its input channels without a weight";
            const int64_t channels = first.rank() == 2 ? first[1] : first[0];  // [length, features]: the features
            if (weight->shape.numel() / weight->shape[0] != cf.inputBlock * channels)
                return "channelFacts: a weight row is not inputBlock values per input channel";
            break;
        }
        case ChannelFacts::Input::PerChannel:
            if (out[0] != first[0]) return "channelFacts: per channel, but the channel count changes";
            for (const std::string& p : cf.perChannel) {
                const ParameterSpec* ps = findSpec(specs, p);
                if (!ps || ps->shape != Shape{first[0]})
                    return "channelFacts: '" + p + "' is not one value per channel";
            }
            break;
        case ChannelFacts::Input::Flattens:
            if (out.rank() != 1 || out.numel() != first.numel()) return "channelFacts: does not flatten";
            break;
    }

    // The roles, against what the layer computes.
    if (lt.isGraphInput() != lt.inputPorts(params).empty()) return "isGraphInput: not the type without inputs";
    if (!lt.vocabularyParam().empty() && (!params.contains(lt.vocabularyParam()) || lt.inputDifferentiable(0)))
        return "vocabularyParam: no such parameter, or the ids are differentiated";
    const bool claims = lt.activation() || lt.identityAtInference() || lt.keepsInputValues() ||
                        lt.outputsProbabilities() || lt.foldableNormalization();
    if (!claims || s.inputs.empty()) return {};
    const ForwardRun run = runForward(b, lt, s, seed);
    const std::vector<float>& x = run.inputs.at(0);
    const std::vector<float>& y = run.output;
    if (const std::optional<Activation> a = lt.activation()) {
        const double alpha = params.contains("alpha") ? params.at("alpha").get<double>() : 0.0;
        for (size_t i = 0; i < y.size(); ++i)
            if (std::fabs(y[i] - activationOf(*a, x[i], alpha)) > 1e-5) return "activation: not what it computes";
    }
    if (lt.identityAtInference() && y != x) return "identityAtInference: the output is not the input";
    if (lt.keepsInputValues())
        for (float v : y)
            if (std::find(x.begin(), x.end(), v) == x.end()) return "keepsInputValues: a value not in its input";
    if (lt.outputsProbabilities()) {
        const auto row = static_cast<size_t>(out[out.rank() - 1]);
        for (size_t r = 0; r < y.size(); r += row) {
            double sum = 0;
            for (size_t i = r; i < r + row; ++i) sum += y[i] >= 0 ? y[i] : -1e9;
            if (std::fabs(sum - 1) > 1e-5) return "outputsProbabilities: a row is not a distribution";
        }
    }
    if (lt.foldableNormalization()) {
        const auto channels = static_cast<size_t>(first[0]), per = static_cast<size_t>(first.numel()) / channels;
        const double eps = params.at("eps").get<double>();
        for (size_t i = 0; i < y.size(); ++i) {
            const size_t c = i / per % channels;
            const double want = (x[i] - run.params.at("running_mean")[c]) /
                                    std::sqrt(run.params.at("running_var")[c] + eps) * run.params.at("gamma")[c] +
                                run.params.at("beta")[c];
            if (std::fabs(y[i] - want) > 1e-4) return "foldableNormalization: not a per-channel affine map";
        }
    }
    return {};
}

}  // namespace

class TestGradCheck : public QObject {
    Q_OBJECT

private:
    std::unique_ptr<Backend> m_backend;

private slots:
    void initTestCase() { m_backend = test::makeReferenceBackend(); }

    void layerGradients_data() {
        QTest::addColumn<QString>("type");
        for (const std::string& name : layerRegistry().names())
            QTest::newRow(name.c_str()) << QString::fromStdString(name);
    }

    void layerGradients() {
        QFETCH(QString, type);
        const std::string name = type.toStdString();
        const auto table = caseTable();
        const auto it = table.find(name);
        QVERIFY2(it != table.end(), ("no gradient check for layer type " + name).c_str());
        const LayerType* lt = layerRegistry().find(name);
        QVERIFY(lt);
        int values = 0;
        double worst = 0;
        uint64_t seed = std::hash<std::string>{}(name)&0xffff;
        for (const Case& c : it->second) {
            // Four random draws of shapes per case.
            for (int draw = 0; draw < 4; ++draw) {
                Rng rng(++seed);
                const Setup s = c.make(rng);
                std::string where = name + " [" + c.label + "] inputs";
                for (const Shape& sh : s.inputs) where += " " + sh.toString();
                where += " batch " + std::to_string(s.batch) + " params " + s.params.dump();
                CheckResult r;
                try {
                    r = checkLayer(*m_backend, *lt, s, seed * 7919);
                } catch (const std::exception& e) {
                    QFAIL((where + ": threw " + e.what()).c_str());
                }
                QVERIFY2(r.ok(), (where + r.text()).c_str());
                QVERIFY2(r.checkedValues > 0 || name == "Input", (where + ": nothing was checked").c_str());
                values += r.checkedValues;
                worst = std::max(worst, r.worst);
            }
        }
        if (name != "Input") QVERIFY2(values > 0, ("no values checked for " + name).c_str());
        qInfo("%s: %d gradient values checked, worst scaled error %.2e (tolerance %.0e)", name.c_str(), values, worst,
              kTolerance);
    }

    // Every type states every fact (cost, compressible weight, channel facts, roles), and each agrees with an
    // independent count (FLOPs from the parameter shapes) or with what its forward computes.
    void layerFacts_data() {
        QTest::addColumn<QString>("type");
        for (const std::string& name : layerRegistry().names())
            QTest::newRow(name.c_str()) << QString::fromStdString(name);
    }

    void layerFacts() {
        QFETCH(QString, type);
        const std::string name = type.toStdString();
        const LayerType* lt = layerRegistry().find(name);
        const auto references = referenceFlops();
        const auto ref = references.find(name);
        QVERIFY2(ref != references.end(), ("no reference FLOP count for layer type " + name).c_str());
        std::vector<Setup> setups;
        if (lt->isGraphInput()) {
            Setup s;
            s.params = {{"shape", {3, 4}}};
            setups.push_back(s);
        }
        const auto table = caseTable();
        uint64_t seed = std::hash<std::string>{}(name)&0xffff;
        for (const Case& c : table.at(name))
            for (int draw = 0; draw < 4; ++draw) {
                Rng rng(++seed);
                setups.push_back(c.make(rng));
            }
        QVERIFY(!setups.empty());
        for (const Setup& s : setups) {
            std::string where = name + " params " + s.params.dump() + " inputs";
            for (const Shape& sh : s.inputs) where += " " + sh.toString();
            std::string wrong;
            try {
                wrong = checkFacts(*m_backend, *lt, s, ref->second, ++seed);
            } catch (const std::exception& e) {
                wrong = std::string("threw ") + e.what();
            }
            QVERIFY2(wrong.empty(), (where + ": " + wrong).c_str());
        }
        qInfo("%s: facts checked on %d setups", name.c_str(), static_cast<int>(setups.size()));
    }

    // The fact checks must catch a wrong fact, or their passes mean nothing.
    void layerFactsCatchWrongFacts() {
        const auto references = referenceFlops();
        Setup dense;
        dense.params = {{"units", 4}};
        dense.inputs = {Shape{5}};
        // Dense's FLOPs against the count of a matrix with one column fewer.
        const FlopCount off = [](const Json&, const std::vector<Shape>&, const Shape& out,
                                 const std::vector<ParameterSpec>&) {
            const double f = 2.0 * static_cast<double>(out.numel()) * 4;
            return std::pair{f, 2 * f};
        };
        const LayerType* dt = layerRegistry().find("Dense");
        QVERIFY(checkFacts(*m_backend, *dt, dense, references.at("Dense"), 1).empty());
        QVERIFY(checkFacts(*m_backend, *dt, dense, off, 1).find("reference count") != std::string::npos);
        // A Sigmoid that claims to be a ReLU, and a ReLU that claims to keep its input at inference.
        class Claims : public LayerType {
        public:
            Claims(const LayerType& inner, bool relu, bool identity) : m_inner(inner), m_relu(relu), m_id(identity) {}
            std::string name() const override { return m_inner.name(); }
            std::string category() const override { return m_inner.category(); }
            std::string description() const override { return {}; }
            std::vector<ParamSpec> paramSpecs() const override { return m_inner.paramSpecs(); }
            Shape inferShape(const Json& p, const std::vector<Shape>& in) const override {
                return m_inner.inferShape(p, in);
            }
            std::unique_ptr<Layer> create(const Json& p, const std::vector<Shape>& in, const Shape& o) const override {
                return m_inner.create(p, in, o);
            }
            LayerCost cost(const Json& p, const std::vector<Shape>& in, const Shape& o) const override {
                return m_inner.cost(p, in, o);
            }
            CompressibleWeight compressibleWeight() const override { return {}; }
            ChannelFacts channelFacts(const Json& p, const std::vector<Shape>& in, const Shape& o) const override {
                return m_inner.channelFacts(p, in, o);
            }
            std::optional<Activation> activation() const override {
                return m_relu ? std::optional(Activation::ReLU) : m_inner.activation();
            }
            bool identityAtInference() const override { return m_id; }

        private:
            const LayerType& m_inner;
            bool m_relu, m_id;
        };
        Setup x;
        x.inputs = {Shape{3, 4}};
        const LayerType& sigmoid = *layerRegistry().find("Sigmoid");
        const LayerType& relu = *layerRegistry().find("ReLU");
        QVERIFY(checkFacts(*m_backend, Claims(sigmoid, false, false), x, references.at("Sigmoid"), 2).empty());
        QVERIFY(checkFacts(*m_backend, Claims(sigmoid, true, false), x, references.at("Sigmoid"), 2)
                    .rfind("activation", 0) == 0);
        QVERIFY(checkFacts(*m_backend, Claims(relu, false, true), x, references.at("ReLU"), 2)
                    .rfind("identityAtInference", 0) == 0);
    }

    // Input has nothing to differentiate; its forward must hand the batch on unchanged.
    void inputLayerCopiesBatch() {
        Backend& b = *m_backend;
        const LayerType* lt = layerRegistry().find("Input");
        QVERIFY(lt);
        const Json params = lt->normalizeParams({{"shape", {2, 3}}});
        QVERIFY(lt->inputPorts(params).empty());
        const Shape out = lt->inferShape(params, {});
        QCOMPARE(out, (Shape{2, 3}));
        auto layer = lt->create(params, {}, out);
        const std::vector<float> host = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
        Tensor x = b.fromHost(Shape{2, 2, 3}, host.data());
        Tensor y = b.zeros(Shape{2, 2, 3});
        LayerContext ctx{b, true, 0};
        layer->forward(ctx, {&x}, y);
        std::vector<float> got(12);
        b.toHost(y, got.data());
        QCOMPARE(got, host);
    }

    // The checker must fail on wrong gradients, or its passes mean nothing.
    void checkerCatchesBrokenBackward() {
        const LayerType* sigmoid = layerRegistry().find("Sigmoid");
        Setup s;
        s.inputs = {Shape{3, 4}};
        s.batch = 2;
        const CheckResult good = checkLayer(*m_backend, *sigmoid, s, 11);
        QVERIFY2(good.ok(), good.text().c_str());
        const CheckResult broken = checkLayer(*m_backend, *sigmoid, s, 11, std::make_unique<BrokenSigmoidLayer>());
        QVERIFY2(!broken.ok(), "the checker accepted a sigmoid backward without its (1 - y) factor");
        QVERIFY(broken.text().find("input 0") != std::string::npos);
    }

    void checkerCatchesSmallError() {
        // A Dense input gradient off by 1 % must be caught (the whole-gradient relative error is 1e-2).
        const LayerType* dense = layerRegistry().find("Dense");
        Setup s;
        s.params = {{"units", 4}};
        s.inputs = {Shape{5}};
        s.batch = 3;
        const Json params = dense->normalizeParams(s.params);
        auto skewed = std::make_unique<SkewedLayer>(dense->create(params, s.inputs, Shape{4}), 0.01f);
        const CheckResult r = checkLayer(*m_backend, *dense, s, 5, std::move(skewed));
        QVERIFY2(!r.ok(), "the checker accepted an input gradient 1 % too large");
        QVERIFY(r.text().find("input 0") != std::string::npos);
        QVERIFY2(r.text().find("parameter") == std::string::npos, r.text().c_str());
    }

    // ---- losses: dlogits against finite differences of sum(losses) * gradScale ----
    void losses_data() {
        QTest::addColumn<QString>("loss");
        QTest::addColumn<float>("gradScale");
        // maeLoss and hubersLoss are robustLoss with delta 0 and 0.5 (the targets are 0..1 and the logits
        // spread enough that both Huber branches are taken).
        for (const char* l : {"softmaxCrossEntropy", "mseLoss", "bceWithLogits", "maeLoss", "huberLoss"}) {
            QTest::newRow((std::string(l) + " scale 1").c_str()) << QString(l) << 1.0f;
            QTest::newRow((std::string(l) + " scale 0.25").c_str()) << QString(l) << 0.25f;
        }
    }

    void losses() {
        QFETCH(QString, loss);
        QFETCH(float, gradScale);
        Backend& b = *m_backend;
        Rng rng(std::hash<std::string>{}(loss.toStdString()));
        const int rows = 4, cols = 5;
        const auto logitsHost = makeInput(rng, rows * cols, InputKind::Uniform, 0);
        std::vector<float> target(rows * cols);
        for (auto& t : target) t = static_cast<float>(uniform(rng, 0, 1));
        // A finite difference across a kink (|d| = 0, |d| = delta) is no derivative: keep every d a few steps away.
        if (loss == "maeLoss" || loss == "huberLoss")
            for (size_t i = 0; i < target.size(); ++i)
                for (const double kink : {0.0, 0.5}) {
                    const double d = double(logitsHost[i]) - target[i];
                    if (std::fabs(std::fabs(d) - kink) < 3 * kStep)
                        target[i] += static_cast<float>(d >= 0 ? -6 * kStep : 6 * kStep);
                }
        std::vector<int32_t> labels(rows);
        for (auto& l : labels) l = randInt(rng, 0, cols - 1);

        Tensor logits = b.fromHost(Shape{rows, cols}, logitsHost.data());
        Tensor targetT = b.fromHost(Shape{rows, cols}, target.data());
        Tensor labelsT = b.empty(Shape{rows}, DType::I32);
        b.copyFromHost(labelsT.raw(), labels.data(), labels.size() * sizeof(int32_t));
        Tensor losses = b.empty(Shape{rows});
        Tensor dlogits = b.empty(Shape{rows, cols});

        auto run = [&](float* grad) {
            if (loss == "softmaxCrossEntropy")
                b.softmaxCrossEntropy(losses.f32(), grad, logits.f32(), labelsT.i32(), rows, cols, gradScale);
            else if (loss == "mseLoss")
                b.mseLoss(losses.f32(), grad, logits.f32(), targetT.f32(), rows, cols, gradScale);
            else if (loss == "maeLoss")
                b.robustLoss(losses.f32(), grad, logits.f32(), targetT.f32(), rows, cols, 0.0f, gradScale);
            else if (loss == "huberLoss")
                b.robustLoss(losses.f32(), grad, logits.f32(), targetT.f32(), rows, cols, 0.5f, gradScale);
            else
                b.bceWithLogits(losses.f32(), grad, logits.f32(), targetT.f32(), rows, cols, gradScale);
            std::vector<float> l(rows);
            b.toHost(losses, l.data());
            double s = 0;
            for (float v : l) s += v;
            return s * gradScale;
        };
        // dlogits is written, not accumulated: fill it with garbage first.
        b.fill(dlogits.f32(), 123.0f, dlogits.numel());
        run(dlogits.f32());
        const std::vector<double> analytic = toDouble(b, dlogits);
        std::vector<double> numeric(analytic.size());
        for (size_t i = 0; i < analytic.size(); ++i) {
            const float orig = logitsHost[i], plus = orig + float(kStep), minus = orig - float(kStep);
            b.copyFromHost(logits.f32() + i, &plus, sizeof(float));
            const double lp = run(nullptr);
            b.copyFromHost(logits.f32() + i, &minus, sizeof(float));
            const double lm = run(nullptr);
            b.copyFromHost(logits.f32() + i, &orig, sizeof(float));
            numeric[i] = (lp - lm) / (double(plus) - double(minus));
        }
        CheckResult r;
        compare(r, loss.toStdString() + " dlogits", analytic, numeric);
        QVERIFY2(r.ok(), r.text().c_str());
    }
};

QTEST_GUILESS_MAIN(TestGradCheck)
#include "test_gradcheck.moc"
