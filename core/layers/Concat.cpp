// Concat: joins 2 to 8 inputs along one per-sample axis (0 = channels); all
// other dimensions must agree.
#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

class ConcatLayer : public Layer {
public:
    ConcatLayer(const std::vector<Shape>& inputs, int axis) {
        const Shape& s = inputs[0];
        m_outerPerSample = s.product(0, axis);
        const int64_t inner = s.product(axis + 1, s.rank());
        for (const Shape& in : inputs) {
            m_blocks.push_back(in[axis] * inner);
            m_outBlock += in[axis] * inner;
        }
    }
    void forward(LayerContext& ctx, const std::vector<const Tensor*>& in, Tensor& out) override {
        const int64_t count = batchOf(*in[0]) * m_outerPerSample;
        int64_t offset = 0;
        for (size_t i = 0; i < in.size(); ++i) {
            ctx.backend.copyBlocks(out.f32() + offset, m_outBlock, in[i]->f32(), m_blocks[i], m_blocks[i], count,
                                   false);
            offset += m_blocks[i];
        }
    }
    void backward(LayerContext& ctx, const std::vector<const Tensor*>& in, const Tensor&, const Tensor& dOut,
                  const std::vector<Tensor*>& dIn) override {
        const int64_t count = batchOf(*in[0]) * m_outerPerSample;
        int64_t offset = 0;
        for (size_t i = 0; i < dIn.size(); ++i) {
            if (dIn[i])
                ctx.backend.copyBlocks(dIn[i]->f32(), m_blocks[i], dOut.f32() + offset, m_outBlock, m_blocks[i], count,
                                       true);
            offset += m_blocks[i];
        }
    }

private:
    int64_t m_outerPerSample = 1, m_outBlock = 0;
    std::vector<int64_t> m_blocks;  // per input: elements contributed per outer index
};

class ConcatType : public LayerType {
public:
    std::string name() const override { return "Concat"; }
    std::string category() const override { return "Core"; }
    std::string description() const override {
        return "Joins its inputs along one axis of the per-sample shape (0 = channels); the other dimensions "
               "must match.";
    }
    std::vector<ParamSpec> paramSpecs() const override {
        return {intParam("inputs", 2, 2, 8, "number of input ports (in0, in1, ...)"),
                intParam("axis", 0, 0, 7, "per-sample axis to join along (0 = channels, the first dimension)")};
    }
    std::vector<std::string> inputPorts(const Json& params) const override { return numberedPorts(params); }
    Shape inferShape(const Json& params, const std::vector<Shape>& inputs) const override {
        const auto ports = inputPorts(params);
        expectInputCount(name(), ports, inputs);
        const int axis = params.at("axis").get<int>();
        const Shape& first = inputs[0];
        if (axis >= first.rank())
            throw ParamError("axis", "axis: " + std::to_string(axis) + " is out of range for in0 of shape " +
                                         first.toString() + " (0 to " + std::to_string(first.rank() - 1) + ")");
        Shape out = first;
        for (size_t i = 1; i < inputs.size(); ++i) {
            const Shape& s = inputs[i];
            bool ok = s.rank() == first.rank();
            for (int d = 0; ok && d < s.rank(); ++d) ok = d == axis || s[d] == first[d];
            if (!ok) {
                Shape want = first;
                want[axis] = -1;
                std::string text = want.toString();
                text.replace(text.find("-1"), 2, "*");
                throwShapeError(ports[i], name(), s,
                                text + " (the shape of in0 except along axis " + std::to_string(axis) + ")");
            }
            out[axis] += s[axis];
        }
        toInt(out.numel(), "out", "element count");
        return out;
    }
    std::unique_ptr<Layer> create(const Json& params, const std::vector<Shape>& inputs, const Shape&) const override {
        return std::make_unique<ConcatLayer>(inputs, params.at("axis").get<int>());
    }
    LayerCost cost(const Json&, const std::vector<Shape>& inputs, const Shape& output) const override {
        return elementwiseCost(inputs, output);
    }
    CompressibleWeight compressibleWeight() const override { return {}; }
    ChannelFacts channelFacts(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return mixingFacts();
    }
};

}  // namespace

std::unique_ptr<LayerType> makeConcat() { return std::make_unique<ConcatType>(); }

}  // namespace strata::layers
