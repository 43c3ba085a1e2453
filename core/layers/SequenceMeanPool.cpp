// SequenceMeanPool: the mean over the time axis, [T, D] -> [D] (bag of
// embeddings for text classification).
#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

class SequenceMeanPoolLayer : public Layer {
public:
    explicit SequenceMeanPoolLayer(const Shape& in) : m_t(static_cast<int>(in[0])), m_d(static_cast<int>(in[1])) {}
    void forward(LayerContext& ctx, const std::vector<const Tensor*>& in, Tensor& out) override {
        ctx.backend.meanPoolForward(out.f32(), in[0]->f32(), batch(*in[0]), m_t, m_d);
    }
    void backward(LayerContext& ctx, const std::vector<const Tensor*>& in, const Tensor&, const Tensor& dOut,
                  const std::vector<Tensor*>& dIn) override {
        if (dIn[0]) ctx.backend.meanPoolBackward(dIn[0]->f32(), dOut.f32(), batch(*in[0]), m_t, m_d);
    }

private:
    static int batch(const Tensor& x) { return toInt(batchOf(x), "in", "batch size"); }
    int m_t, m_d;
};

class SequenceMeanPoolType : public LayerType {
public:
    std::string name() const override { return "SequenceMeanPool"; }
    std::string category() const override { return "Text"; }
    std::string description() const override {
        return "Averages a sequence over its time axis: [length, features] to [features].";
    }
    std::vector<ParamSpec> paramSpecs() const override { return {}; }
    Shape inferShape(const Json&, const std::vector<Shape>& inputs) const override {
        const Shape& s = expectSequence(name(), inputs, "features");
        toInt(s[0], "in", "length");
        toInt(s[1], "in", "feature count");
        return Shape{s[1]};
    }
    std::unique_ptr<Layer> create(const Json&, const std::vector<Shape>& inputs, const Shape&) const override {
        return std::make_unique<SequenceMeanPoolLayer>(inputs.at(0));
    }
};

}  // namespace

std::unique_ptr<LayerType> makeSequenceMeanPool() { return std::make_unique<SequenceMeanPoolType>(); }

}  // namespace strata::layers
