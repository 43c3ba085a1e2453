// SequenceMeanPool and SequenceMaxPool: the mean or the maximum over the time axis, [T, D] -> [D] (a bag of
// embeddings; the global pooling of a text CNN or Transformer). With "masked", a second input carries the token
// ids and padding positions (id 0) are left out: the mean of the real tokens, not of the padded length.
#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

class SequencePoolLayer : public Layer {
public:
    SequencePoolLayer(const Shape& in, PoolMode mode, bool masked)
        : m_t(static_cast<int>(in[0])), m_d(static_cast<int>(in[1])), m_mode(mode), m_masked(masked) {}
    void forward(LayerContext& ctx, const std::vector<const Tensor*>& in, Tensor& out) override {
        if (m_mode == PoolMode::Average && !m_masked) {
            ctx.backend.meanPoolForward(out.f32(), in[0]->f32(), batch(*in[0]), m_t, m_d);
            return;
        }
        ctx.backend.sequencePoolForward(out.f32(), in[0]->f32(), keep(in), batch(*in[0]), m_t, m_d, m_mode);
    }
    void backward(LayerContext& ctx, const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dOut,
                  const std::vector<Tensor*>& dIn) override {
        if (!dIn[0]) return;
        if (m_mode == PoolMode::Average && !m_masked) {
            ctx.backend.meanPoolBackward(dIn[0]->f32(), dOut.f32(), batch(*in[0]), m_t, m_d);
            return;
        }
        ctx.backend.sequencePoolBackward(dIn[0]->f32(), dOut.f32(), in[0]->f32(), out.f32(), keep(in), batch(*in[0]),
                                         m_t, m_d, m_mode);
    }

private:
    static int batch(const Tensor& x) { return toInt(batchOf(x), "in", "batch size"); }
    const float* keep(const std::vector<const Tensor*>& in) const { return m_masked ? in[1]->f32() : nullptr; }
    int m_t, m_d;
    PoolMode m_mode;
    bool m_masked;
};

class SequencePoolType : public LayerType {
public:
    SequencePoolType(PoolMode mode, std::string name, std::string description)
        : m_mode(mode), m_name(std::move(name)), m_description(std::move(description)) {}
    std::string name() const override { return m_name; }
    std::string category() const override { return "Text"; }
    std::string description() const override { return m_description; }
    std::vector<ParamSpec> paramSpecs() const override { return {maskedParam()}; }
    std::vector<std::string> inputPorts(const Json& params) const override { return maskedSequencePorts(params); }
    bool inputDifferentiable(int index) const override { return index == 0; }
    Shape inferShape(const Json& params, const std::vector<Shape>& inputs) const override {
        const Shape& s = expectMaskedSequence(name(), params, inputs, "features");
        toInt(s[0], "in", "length");
        toInt(s[1], "in", "feature count");
        return Shape{s[1]};
    }
    std::unique_ptr<Layer> create(const Json& params, const std::vector<Shape>& inputs, const Shape&) const override {
        return std::make_unique<SequencePoolLayer>(inputs.at(0), m_mode, params.at("masked").get<bool>());
    }
    // One operation per input value (the mask's included), forward and backward.
    LayerCost cost(const Json&, const std::vector<Shape>& inputs, const Shape& output) const override {
        double in = 0;
        for (const Shape& s : inputs) in += static_cast<double>(s.numel());
        return streamingCost(inputs, output, in, in);
    }
    CompressibleWeight compressibleWeight() const override { return {}; }
    ChannelFacts channelFacts(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return mixingFacts();
    }

private:
    PoolMode m_mode;
    std::string m_name, m_description;
};

}  // namespace

std::unique_ptr<LayerType> makeSequenceMeanPool() {
    return std::make_unique<SequencePoolType>(
        PoolMode::Average, "SequenceMeanPool",
        "Averages a sequence over its time axis: [length, features] to [features]; masked: over the real tokens "
        "only (padding left out).");
}

std::unique_ptr<LayerType> makeSequenceMaxPool() {
    return std::make_unique<SequencePoolType>(
        PoolMode::Max, "SequenceMaxPool",
        "The maximum of each feature over the time axis: [length, features] to [features]; masked: over the real "
        "tokens only (padding left out).");
}

}  // namespace strata::layers
