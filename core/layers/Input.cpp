// Input: where a batch enters the network. It has no input ports; the model
// passes the batch [N, ...shape] as the single entry of `inputs` to forward.
#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

class InputLayer : public Layer {
public:
    void forward(LayerContext& ctx, const std::vector<const Tensor*>& in, Tensor& out) override {
        if (in.size() != 1 || !in[0])
            throw std::logic_error("Input layer: forward needs the batch as its one input tensor");
        if (in[0]->numel() != out.numel())
            throw ShapeError("out", "out: Input got a batch of " + in[0]->shape().toString() + ", expected " +
                                        out.shape().toString());
        if (in[0]->raw() != out.raw()) ctx.backend.copy(out.raw(), in[0]->raw(), out.bytes());
    }
    void backward(LayerContext&, const std::vector<const Tensor*>&, const Tensor&, const Tensor&,
                  const std::vector<Tensor*>&) override {}
};

class InputType : public LayerType {
public:
    std::string name() const override { return "Input"; }
    std::string category() const override { return "Input"; }
    std::string description() const override {
        return "The network's input: one sample of the given shape (e.g. [1, 28, 28] for a grey image, "
               "[784] for a flat vector, [T] for a sequence of token ids).";
    }
    std::vector<ParamSpec> paramSpecs() const override {
        return {intListParam("shape", {1, 28, 28}, 1, 4, 1, 1 << 24,
                             "per-sample shape, outermost first (channels, height, width for images)")};
    }
    std::vector<std::string> inputPorts(const Json&) const override { return {}; }
    Shape inferShape(const Json& params, const std::vector<Shape>& inputs) const override {
        expectInputCount(name(), {}, inputs);
        Shape shape(params.at("shape").get<std::vector<int64_t>>());
        int64_t n = 1;
        for (int64_t d : shape.dims())
            if (__builtin_mul_overflow(n, d, &n) || n > kMaxSampleElements)
                throw ShapeError("out", "out: shape " + shape.toString() + " holds more than " +
                                            std::to_string(kMaxSampleElements) +
                                            " values per sample (the most Strata accepts); make it smaller");
        return shape;
    }
    std::unique_ptr<Layer> create(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return std::make_unique<InputLayer>();
    }
    // A copy of the batch: no arithmetic.
    LayerCost cost(const Json&, const std::vector<Shape>& inputs, const Shape& output) const override {
        return streamingCost(inputs, output, 0, 0);
    }
    CompressibleWeight compressibleWeight() const override { return {}; }
    ChannelFacts channelFacts(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return mixingFacts();
    }
    bool isGraphInput() const override { return true; }
};

}  // namespace

std::unique_ptr<LayerType> makeInput() { return std::make_unique<InputType>(); }

}  // namespace strata::layers
