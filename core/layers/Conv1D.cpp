// Conv1D: a convolution along a sequence [length, channels] -> [length', filters] (a text CNN's n-gram
// detector). y[t, f] = b[f] + sum over taps k and channels c of W[k][f, c] * x[t*stride + k*dilation -
// padding, c], positions outside the sequence counting as zero; length' = (length + 2 padding -
// dilation (kernel - 1) - 1) / stride + 1.
//
// The weight is [kernel, filters, channels]: one [filters, channels] matrix per tap, so each tap is a
// GEMM over the rows of the sequence (every stride-th row is a matrix with leading dimension stride x
// channels) and no im2col buffer is needed. PyTorch's Conv1d keeps [filters, channels, kernel]; the ONNX
// export transposes it in the graph.
//
// Stride 1 (the usual case) runs each tap as ONE GEMM over the whole batch: the samples are laid end to end
// with their padding rows between them ([batch, length + 2 padding, channels]), so output row r of that
// layout reads input rows r + k * dilation, which for every row that is a real output stays inside its own
// sample; the rows in between are computed and dropped (2 padding of every length + 2 padding). Larger
// strides take one GEMM per sample and tap.
#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

struct Conv1DGeometry {
    int64_t length = 0, channels = 0, filters = 0, kernel = 0, stride = 1, padding = 0, dilation = 1;
    int64_t outLength() const { return (length + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1; }
    // The output positions whose tap k reads inside the sequence: [first, last], empty when first > last.
    std::pair<int64_t, int64_t> validRange(int64_t k) const {
        const int64_t shift = k * dilation - padding;  // input position of output 0's tap k
        int64_t first = shift >= 0 ? 0 : (-shift + stride - 1) / stride;
        int64_t last = std::min(outLength() - 1, (length - 1 - shift) >= 0 ? (length - 1 - shift) / stride : -1);
        return {first, last};
    }
};

Conv1DGeometry geometryOf(const Json& params, const Shape& in) {
    Conv1DGeometry g;
    g.length = in[0];
    g.channels = in[1];
    g.filters = params.at("filters").get<int64_t>();
    g.kernel = params.at("kernel").get<int64_t>();
    g.stride = params.at("stride").get<int64_t>();
    g.padding = params.at("padding").get<int64_t>();
    g.dilation = params.at("dilation").get<int64_t>();
    return g;
}

class Conv1DLayer : public Layer {
public:
    Conv1DLayer(const Conv1DGeometry& g, bool useBias) : m_g(g), m_useBias(useBias) {}

    void forward(LayerContext& ctx, const std::vector<const Tensor*>& in, Tensor& out) override {
        Backend& b = ctx.backend;
        const int64_t n = batchOf(*in[0]), outLen = m_g.outLength();
        if (m_g.stride == 1) {
            forwardStride1(b, *in[0], out, n);
            return;
        }
        b.zero(out.raw(), out.bytes());
        forEachTap(n, [&](int64_t k, int rows, int64_t xRow, int64_t yRow) {
            b.gemm(false, true, rows, f(), c(), 1.0f, in[0]->f32() + xRow * m_g.channels, ldx(),
                   weight() + k * m_g.filters * m_g.channels, c(), 1.0f, out.f32() + yRow * m_g.filters, f());
        });
        if (m_useBias)
            b.addBiasRows(out.f32(), m_params[1].value.f32(), toInt(n * outLen, "in", "batch x length"), f());
    }

    void backward(LayerContext& ctx, const std::vector<const Tensor*>& in, const Tensor&, const Tensor& dOut,
                  const std::vector<Tensor*>& dIn) override {
        Backend& b = ctx.backend;
        const int64_t n = batchOf(*in[0]), outLen = m_g.outLength();
        float* dw = gradOf(m_params[0]);
        if (m_g.stride == 1) {
            backwardStride1(b, *in[0], dOut, dIn[0], dw, n);
            if (m_useBias)
                if (float* db = gradOf(m_params[1]))
                    b.sumRows(db, dOut.f32(), toInt(n * outLen, "in", "batch x length"), f());
            return;
        }
        forEachTap(n, [&](int64_t k, int rows, int64_t xRow, int64_t yRow) {
            const float* dy = dOut.f32() + yRow * m_g.filters;
            const float* wk = weight() + k * m_g.filters * m_g.channels;
            // dx[rows, C] += dy[rows, F] * W_k[F, C]
            if (dIn[0])
                b.gemm(false, false, rows, c(), f(), 1.0f, dy, f(), wk, c(), 1.0f, dIn[0]->f32() + xRow * m_g.channels,
                       ldx());
            // dW_k[F, C] += dy^T[F, rows] * x[rows, C]
            if (dw)
                b.gemm(true, false, f(), c(), rows, 1.0f, dy, f(), in[0]->f32() + xRow * m_g.channels, ldx(), 1.0f,
                       dw + k * m_g.filters * m_g.channels, c());
        });
        if (m_useBias)
            if (float* db = gradOf(m_params[1]))
                b.sumRows(db, dOut.f32(), toInt(n * outLen, "in", "batch x length"), f());
    }

private:
    // Rows of the padded layout: per sample, and the rows whose every tap reads inside the batch (the last
    // sample's last real output is the last of them).
    int64_t paddedLength() const { return m_g.length + 2 * m_g.padding; }
    int rowsStride1(int64_t n) const {
        return toInt(n * paddedLength() - (m_g.kernel - 1) * m_g.dilation, "in", "batch x padded length");
    }
    // The input in the padded layout: the input itself without padding, else a copy with zero rows between.
    const float* paddedInput(Backend& b, const Tensor& x, int64_t n, bool fill) {
        if (m_g.padding == 0) return x.f32();
        const int64_t lp = paddedLength(), len = m_g.length, ch = m_g.channels;
        ensureBuffer(b, m_inPad, Shape{n * lp, ch});
        if (fill) {
            b.zero(m_inPad.raw(), static_cast<size_t>(n * lp * ch) * sizeof(float));
            b.copyBlocks(m_inPad.f32() + m_g.padding * ch, lp * ch, x.f32(), len * ch, len * ch, n, false);
        }
        return m_inPad.f32();
    }

    void forwardStride1(Backend& b, const Tensor& x, Tensor& out, int64_t n) {
        const int64_t lp = paddedLength(), outLen = m_g.outLength();
        const int rows = rowsStride1(n);
        const float* xp = paddedInput(b, x, n, true);
        ensureBuffer(b, m_outPad, Shape{n * lp, m_g.filters});
        for (int64_t k = 0; k < m_g.kernel; ++k)
            b.gemm(false, true, rows, f(), c(), 1.0f, xp + k * m_g.dilation * m_g.channels, c(),
                   weight() + k * m_g.filters * m_g.channels, c(), k == 0 ? 0.0f : 1.0f, m_outPad.f32(), f());
        b.copyBlocks(out.f32(), outLen * m_g.filters, m_outPad.f32(), lp * m_g.filters, outLen * m_g.filters, n, false);
        if (m_useBias)
            b.addBiasRows(out.f32(), m_params[1].value.f32(), toInt(n * outLen, "in", "batch x length"), f());
    }

    void backwardStride1(Backend& b, const Tensor& x, const Tensor& dOut, Tensor* dx, float* dw, int64_t n) {
        const int64_t lp = paddedLength(), outLen = m_g.outLength(), ch = m_g.channels;
        const int rows = rowsStride1(n);
        // dy in the padded layout, zero at the rows forward dropped.
        ensureBuffer(b, m_dOutPad, Shape{n * lp, m_g.filters});
        b.zero(m_dOutPad.raw(), static_cast<size_t>(n * lp * m_g.filters) * sizeof(float));
        b.copyBlocks(m_dOutPad.f32(), lp * m_g.filters, dOut.f32(), outLen * m_g.filters, outLen * m_g.filters, n,
                     false);
        const float* dy = m_dOutPad.f32();
        if (dw) {
            const float* xp = paddedInput(b, x, n, false);  // as forward left it
            for (int64_t k = 0; k < m_g.kernel; ++k)
                b.gemm(true, false, f(), c(), rows, 1.0f, dy, f(), xp + k * m_g.dilation * ch, c(), 1.0f,
                       dw + k * m_g.filters * ch, c());
        }
        if (!dx) return;
        ensureBuffer(b, m_dInPad, Shape{n * lp, ch});
        b.zero(m_dInPad.raw(), static_cast<size_t>(n * lp * ch) * sizeof(float));
        for (int64_t k = 0; k < m_g.kernel; ++k)
            b.gemm(false, false, rows, c(), f(), 1.0f, dy, f(), weight() + k * m_g.filters * ch, c(), 1.0f,
                   m_dInPad.f32() + k * m_g.dilation * ch, c());
        b.copyBlocks(dx->f32(), m_g.length * ch, m_dInPad.f32() + m_g.padding * ch, lp * ch, m_g.length * ch, n, true);
    }

    // Calls fn(tap, rows, first input row, first output row) for every sample and tap with rows to do.
    template <class Fn>
    void forEachTap(int64_t n, Fn&& fn) const {
        const int64_t outLen = m_g.outLength();
        for (int64_t i = 0; i < n; ++i)
            for (int64_t k = 0; k < m_g.kernel; ++k) {
                const auto [first, last] = m_g.validRange(k);
                if (first > last) continue;
                const int64_t xPos = first * m_g.stride + k * m_g.dilation - m_g.padding;
                fn(k, static_cast<int>(last - first + 1), i * m_g.length + xPos, i * outLen + first);
            }
    }
    const float* weight() const { return m_params[0].value.f32(); }
    int f() const { return static_cast<int>(m_g.filters); }
    int c() const { return static_cast<int>(m_g.channels); }
    int ldx() const { return static_cast<int>(m_g.stride * m_g.channels); }

    Conv1DGeometry m_g;
    bool m_useBias;
    Tensor m_inPad, m_outPad, m_dOutPad, m_dInPad;  // stride 1: the padded layout
};

class Conv1DType : public LayerType {
public:
    std::string name() const override { return "Conv1D"; }
    std::string category() const override { return "Text"; }
    std::string description() const override {
        return "Convolution along a sequence: [length, channels] to [length', filters], each filter a learned "
               "pattern over a few neighbouring positions (the kernel: n-grams of a text).";
    }
    std::vector<ParamSpec> paramSpecs() const override {
        return {intParam("filters", 64, 1, 65536, "number of output channels"),
                intParam("kernel", 3, 1, 63, "positions each filter spans"),
                intParam("stride", 1, 1, 64, "step between positions"),
                intParam("padding", 0, 0, 64, "zeros added at each end of the sequence"),
                intParam("dilation", 1, 1, 64, "spacing between the kernel's taps"),
                boolParam("use_bias", true, "add a learnable bias per filter"),
                weightInitParam()};
    }
    Shape inferShape(const Json& params, const std::vector<Shape>& inputs) const override {
        const Shape& s = expectSequence(name(), inputs, "channels");
        const Conv1DGeometry g = geometryOf(params, s);
        toInt(g.stride * g.channels, "in", "stride x channels");
        if (g.length + 2 * g.padding < g.dilation * (g.kernel - 1) + 1)
            throwShapeError("in", name(), s,
                            "a sequence at least as long as the dilated kernel (" +
                                std::to_string(g.dilation * (g.kernel - 1) + 1) + " after padding " +
                                std::to_string(g.padding) + ")");
        return Shape{g.outLength(), g.filters};
    }
    std::vector<ParameterSpec> parameterSpecs(const Json& params, const std::vector<Shape>& inputs) const override {
        const Conv1DGeometry g = geometryOf(params, inputs.at(0));
        const int64_t fanIn = g.channels * g.kernel, fanOut = g.filters * g.kernel;
        std::vector<ParameterSpec> specs;
        specs.push_back({"weight", Shape{g.kernel, g.filters, g.channels}, weightInit(params), fanIn, fanOut});
        if (params.at("use_bias").get<bool>()) specs.push_back({"bias", Shape{g.filters}, Init::Zeros, fanIn, fanOut});
        return specs;
    }
    std::unique_ptr<Layer> create(const Json& params, const std::vector<Shape>& inputs, const Shape&) const override {
        return std::make_unique<Conv1DLayer>(geometryOf(params, inputs.at(0)), params.at("use_bias").get<bool>());
    }
    // A dot product over kernel x channels per output value; backward twice the forward. Stride 1 runs in a
    // padded layout [length + 2 padding, channels or filters]: its output and output gradient, its input when
    // padded, and its input gradient (Conv1DLayer's m_outPad, m_dOutPad, m_inPad, m_dInPad).
    LayerCost cost(const Json& params, const std::vector<Shape>& inputs, const Shape& output) const override {
        const Conv1DGeometry g = geometryOf(params, inputs.at(0));
        const double f = 2.0 * static_cast<double>(output.numel()) * static_cast<double>(g.kernel * g.channels);
        LayerCost c = streamingCost(inputs, output, f, 2.0 * f);
        if (g.stride == 1) {
            const int64_t rows = g.length + 2 * g.padding;
            c.scratchFloats = {rows * g.filters, rows * g.filters};
            if (g.padding > 0) c.scratchFloats.push_back(rows * g.channels);
            c.inputGradientScratchFloats = {rows * g.channels};
        }
        return c;
    }
    CompressibleWeight compressibleWeight() const override { return {}; }
    // Its filters are axis 1 of the [kernel, filters, channels] weight.
    CompressibleWeight int8Weight() const override { return {"weight", 1, "bias"}; }
    ChannelFacts channelFacts(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return mixingFacts();
    }
};

}  // namespace

std::unique_ptr<LayerType> makeConv1D() { return std::make_unique<Conv1DType>(); }

}  // namespace strata::layers
