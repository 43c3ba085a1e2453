// Add: element-wise sum of 2 to 8 inputs of equal shape (residual connections).
#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

class AddLayer : public Layer {
public:
    void forward(LayerContext& ctx, const std::vector<const Tensor*>& in, Tensor& out) override {
        Backend& b = ctx.backend;
        const int64_t n = out.numel();
        b.add(out.f32(), in[0]->f32(), in[1]->f32(), n);
        for (size_t i = 2; i < in.size(); ++i) b.axpy(out.f32(), 1.0f, in[i]->f32(), n);
        if (m_fusedReLU) b.activationForward(out.f32(), out.f32(), n, Activation::ReLU, 0.0f);
    }
    // The backward passes dOut on and never reads the output: the ReLU after a residual Add runs in place on
    // the sum (no buffer of its own).
    bool fuseReLU() override {
        m_fusedReLU = true;
        return true;
    }
    // And its backward: dOut is then the ReLU's output gradient, and each input gets it gated by the output
    // (the ReLU's), one pass per input as before, with no ReLU pass and no zeroed sum gradient.
    bool absorbFusedReLUBackward() override {
        m_reluBackward = true;
        return true;
    }
    void backward(LayerContext& ctx, const std::vector<const Tensor*>&, const Tensor& out, const Tensor& dOut,
                  const std::vector<Tensor*>& dIn) override {
        Backend& b = ctx.backend;
        for (size_t k = 0; k < dIn.size(); ++k) {
            Tensor* d = dIn[k];
            if (!d) continue;
            const bool overwrite = ctx.overwritesInputGrad(k);
            if (m_reluBackward)
                b.activationBackward(d->f32(), dOut.f32(), nullptr, out.f32(), dOut.numel(), Activation::ReLU, 0.0f,
                                     overwrite);
            else if (overwrite)
                b.copy(d->raw(), dOut.raw(), dOut.bytes());
            else
                b.axpy(d->f32(), 1.0f, dOut.f32(), dOut.numel());
        }
    }
    // Each input's gradient is a pass of its own that writes every element.
    bool overwritesInputGradient() override { return true; }

    LayoutRule layoutRule() const override { return LayoutRule::Elementwise; }

private:
    bool m_fusedReLU = false;
    bool m_reluBackward = false;
};

class AddType : public LayerType {
public:
    std::string name() const override { return "Add"; }
    std::string category() const override { return "Core"; }
    std::string description() const override {
        return "Element-wise sum of its inputs, which must all have the same shape (residual connections).";
    }
    std::vector<ParamSpec> paramSpecs() const override {
        return {intParam("inputs", 2, 2, 8, "number of input ports (in0, in1, ...)")};
    }
    std::vector<std::string> inputPorts(const Json& params) const override { return numberedPorts(params); }
    Shape inferShape(const Json& params, const std::vector<Shape>& inputs) const override {
        const auto ports = inputPorts(params);
        expectInputCount(name(), ports, inputs);
        for (size_t i = 1; i < inputs.size(); ++i)
            if (inputs[i] != inputs[0])
                throwShapeError(ports[i], name(), inputs[i], inputs[0].toString() + " (the shape of in0)");
        return inputs[0];
    }
    std::unique_ptr<Layer> create(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return std::make_unique<AddLayer>();
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

std::unique_ptr<LayerType> makeAdd() { return std::make_unique<AddType>(); }

}  // namespace strata::layers
