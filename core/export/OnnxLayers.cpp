// The ONNX mapping of every layer type (see OnnxLayers.h): per type, its writer and its reader, then the table.
// A reader matches the structure its writer makes (operators, attributes, constants, who reads what), not the
// names, and takes a layer only when every node it stands for is read by that layer alone.
#include "core/export/OnnxLayers.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/layers/LayerRegistry.h"

namespace strata {

// ---- writer and graph view -----------------------------------------------------------------------------------

OnnxNodeInfo& OnnxLayerWriter::node(const std::string& op, const std::string& nodeName, std::vector<std::string> in,
                                    const std::string& out) {
    OnnxNodeInfo& n = nodes.emplace_back();
    n.opType = op;
    n.name = nodeName;
    n.inputs = std::move(in);
    n.outputs = {out};
    return n;
}

std::string OnnxLayerWriter::scalar(const std::string& initName, float value) {
    initializers.push_back({initName, OnnxInitializer::Type::Float, {}, {value}, {}});
    return initName;
}

std::string OnnxLayerWriter::int64s(const std::string& initName, const std::vector<int64_t>& values) {
    initializers.push_back({initName, OnnxInitializer::Type::Int64, {static_cast<int64_t>(values.size())}, {}, values});
    return initName;
}

std::string OnnxLayerWriter::floats(const std::string& initName, const Shape& shape, std::vector<float> values) {
    initializers.push_back({initName, OnnxInitializer::Type::Float, shape.dims(), std::move(values), {}});
    return initName;
}

OnnxGraphView::OnnxGraphView(const OnnxModelInfo& info) : m_info(info) {
    for (int i = 0; i < nodeCount(); ++i) {
        for (const std::string& in : node(i).inputs)
            if (!in.empty()) m_consumers[in].push_back(i);
        for (const std::string& out : node(i).outputs) m_producer[out] = i;
    }
    for (const TensorRecord& t : info.initializers) m_floats[t.name] = &t;
}

int OnnxGraphView::producer(const std::string& value) const {
    const auto it = m_producer.find(value);
    return it == m_producer.end() ? -1 : it->second;
}

const std::vector<int>& OnnxGraphView::consumers(const std::string& value) const {
    static const std::vector<int> none;
    const auto it = m_consumers.find(value);
    return it == m_consumers.end() ? none : it->second;
}

int OnnxGraphView::onlyConsumer(const std::string& value, const std::string& op) const {
    const std::vector<int>& c = consumers(value);
    return c.size() == 1 && node(c[0]).opType == op ? c[0] : -1;
}

int OnnxGraphView::consumer(const std::string& value, const std::string& op) const {
    for (int c : consumers(value))
        if (node(c).opType == op) return c;
    return -1;
}

const TensorRecord* OnnxGraphView::floatInitializer(const std::string& value) const {
    const auto it = m_floats.find(value);
    return it == m_floats.end() ? nullptr : it->second;
}

const std::vector<int64_t>* OnnxGraphView::int64Initializer(const std::string& value) const {
    const auto it = m_info.int64Initializers.find(value);
    return it == m_info.int64Initializers.end() ? nullptr : &it->second;
}

std::optional<float> OnnxGraphView::scalar(const std::string& value) const {
    const TensorRecord* t = floatInitializer(value);
    if (!t || t->shape.numel() != 1) return std::nullopt;
    return recordToFloats(*t)[0];
}

bool OnnxGraphView::isInitializer(const std::string& value) const {
    return m_floats.count(value) || m_info.int64Initializers.count(value) || m_info.integerInitializers.count(value);
}

namespace {

using Writer = OnnxLayerWriter;
using View = OnnxGraphView;
using Read = std::optional<OnnxLayerImport>;
using Ints = std::vector<int64_t>;

// ---- helpers ---------------------------------------------------------------------------------------------------

// An IntList param of one or two values ("kernel": [3] means 3 x 3) as a pair; an empty list gives `fallback`.
std::pair<int64_t, int64_t> pairOf(const Json& params, const char* key, std::pair<int64_t, int64_t> fallback) {
    const Ints v = params.at(key).get<Ints>();
    if (v.empty()) return fallback;
    return {v[0], v.size() > 1 ? v[1] : v[0]};
}

// A float attribute as the decimal number it was written from (1e-05f reads back as 1e-05, not 9.99999975e-06).
double decimalOf(float f) {
    char buf[32];
    for (int digits = 6; digits <= 9; ++digits) {
        std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(f));
        if (std::strtof(buf, nullptr) == f) break;
    }
    return std::strtod(buf, nullptr);
}

bool near(float a, double b) { return std::fabs(static_cast<double>(a) - b) <= 1e-6 * std::max(1.0, std::fabs(b)); }

// A layer read from the nodes listed; its name and output are the last node's output.
OnnxLayerImport layerFrom(const View& g, const std::string& type, std::vector<int> nodes, std::vector<std::string> in) {
    OnnxLayerImport r;
    r.type = type;
    std::sort(nodes.begin(), nodes.end());
    r.output = r.name = g.node(nodes.back()).outputs.at(0);
    r.nodes = std::move(nodes);
    r.inputs = std::move(in);
    return r;
}

// A float initializer of this rank, as values and dims; false when `value` is none.
bool tensorOf(const View& g, const std::string& value, int rank, std::vector<float>& values, Shape& shape) {
    const TensorRecord* t = g.floatInitializer(value);
    if (!t || t->shape.rank() != rank) return false;
    values = recordToFloats(*t);
    shape = t->shape;
    return true;
}

// A node's one output, and its input k (empty when it has fewer).
const std::string& out0(const OnnxNodeInfo& n) { return n.outputs.at(0); }
std::string in(const OnnxNodeInfo& n, size_t k) { return k < n.inputs.size() ? n.inputs[k] : std::string(); }

// x W^T (+ b) over a sequence, as the writers of Dense and attention's projections make it: Transpose of the
// [out, in] weight, MatMul, and an Add of the bias. Returns the MatMul's (or the Add's) output.
std::string writeProjection(Writer& w, const std::string& x, const std::string& weight, const std::string& bias,
                            const std::string& transposeName, const std::string& weightT, const std::string& matmulName,
                            const std::string& biasName, const std::string& out, const std::string& product) {
    w.node("Transpose", transposeName, {weight}, weightT).attr("perm", Ints{1, 0});
    w.node("MatMul", matmulName, {x, weightT}, bias.empty() ? out : product);
    if (!bias.empty()) w.node("Add", biasName, {product, bias}, out);
    return out;
}

// Reads such a projection from its Transpose node: the input, the weight [out, in], the bias (when there is one,
// else empty), the nodes, and the output.
struct Projection {
    std::string input, output;
    std::vector<float> weight, bias;
    Shape weightShape;
    std::vector<int> nodes;
};
std::optional<Projection> readProjection(const View& g, int transpose) {
    const OnnxNodeInfo& t = g.node(transpose);
    Projection p;
    if (t.opType != "Transpose" || t.intsAttr("perm") != Ints{1, 0} ||
        !tensorOf(g, in(t, 0), 2, p.weight, p.weightShape))
        return std::nullopt;
    const int mm = g.onlyConsumer(out0(t), "MatMul");
    if (mm < 0 || in(g.node(mm), 1) != out0(t)) return std::nullopt;
    p.input = in(g.node(mm), 0);
    p.output = out0(g.node(mm));
    p.nodes = {transpose, mm};
    const int add = g.onlyConsumer(p.output, "Add");
    Shape biasShape;
    if (add >= 0 && in(g.node(add), 0) == p.output && tensorOf(g, in(g.node(add), 1), 1, p.bias, biasShape) &&
        biasShape[0] == p.weightShape[0]) {
        p.output = out0(g.node(add));
        p.nodes.push_back(add);
    }
    return p;
}

// The padding mask of the sequence layers' "mask" input: 1 where a token id is not 0, 0 at padding
// (Sign(Abs(ids))), reshaped to `dims` for broadcasting.
std::string writeKeepMask(Writer& w, const std::string& ids, const Ints& dims) {
    const std::string& y = w.name;
    w.node("Abs", y + "/ids_abs", {ids}, y + "/ids_abs");
    w.node("Sign", y + "/keep_flat", {y + "/ids_abs"}, y + "/keep_flat");
    w.node("Reshape", y + "/keep_shape", {y + "/keep_flat", w.int64s(y + "/keep_dims", dims)}, y + "/keep");
    return y + "/keep";
}

// Reads such a mask from its Abs node: the ids, the reshape's dims, the mask value and the three nodes.
struct KeepMask {
    std::string ids, keep;
    Ints dims;
    std::vector<int> nodes;
};
std::optional<KeepMask> readKeepMask(const View& g, int abs) {
    const OnnxNodeInfo& a = g.node(abs);
    if (a.opType != "Abs") return std::nullopt;
    const int sign = g.onlyConsumer(out0(a), "Sign");
    if (sign < 0) return std::nullopt;
    const int reshape = g.onlyConsumer(out0(g.node(sign)), "Reshape");
    if (reshape < 0 || in(g.node(reshape), 0) != out0(g.node(sign))) return std::nullopt;
    const Ints* dims = g.int64Initializer(in(g.node(reshape), 1));
    if (!dims) return std::nullopt;
    return KeepMask{in(a, 0), out0(g.node(reshape)), *dims, {abs, sign, reshape}};
}

// A node with one input that is not a constant: the ops that map to exactly one node (Relu, Softmax ...).
bool takesOneValue(const View& g, const OnnxNodeInfo& n, const std::string& op) {
    return n.opType == op && n.inputs.size() == 1 && !g.isInitializer(n.inputs[0]) && n.outputs.size() == 1;
}

Read single(const View& g, int first, const std::string& op, const std::string& type, Json params = Json::object()) {
    const OnnxNodeInfo& n = g.node(first);
    if (!takesOneValue(g, n, op)) return std::nullopt;
    OnnxLayerImport r = layerFrom(g, type, {first}, {n.inputs[0]});
    r.params = std::move(params);
    return r;
}

// ---- Input: the graph's input, then the normalization of the raw data ---------------------------------------

void writeInput(Writer& w) {
    const std::string& y = w.name;
    std::string v = y;
    if (const Normalization* norm = w.normalization) {
        if (!norm->featureMean.empty()) {
            // Per-feature statistics as constants of the sample's shape ([F] for CSV), broadcast over N.
            w.node("Sub", y + "/norm_mean", {v, w.floats(y + "/norm_feature_mean", w.outputShape, norm->featureMean)},
                   y + "/centered");
            w.node("Div", y + "/norm_std",
                   {y + "/centered", w.floats(y + "/norm_feature_std", w.outputShape, norm->featureStd)},
                   y + "/normalized");
            v = y + "/normalized";
        } else {
            if (norm->scale != 1.f) {
                w.node("Mul", y + "/norm_scale", {v, w.scalar(y + "/norm_scale_value", norm->scale)}, y + "/scaled");
                v = y + "/scaled";
            }
            if (norm->mean != 0.f) {
                w.node("Sub", y + "/norm_mean", {v, w.scalar(y + "/norm_mean_value", norm->mean)}, y + "/centered");
                v = y + "/centered";
            }
            if (norm->std != 1.f) {
                w.node("Div", y + "/norm_std", {v, w.scalar(y + "/norm_std_value", norm->std)}, y + "/normalized");
                v = y + "/normalized";
            }
        }
    }
    w.output = v;
}

Read readInput(const View& g, int first) {
    if (first != View::kGraphInput) return std::nullopt;
    const OnnxModelInfo& info = g.info();
    if (info.inputName.empty() || info.inputDims.size() < 2) return std::nullopt;
    Ints shape(info.inputDims.begin() + 1, info.inputDims.end());
    for (int64_t d : shape)
        if (d < 1) return std::nullopt;  // a symbolic dimension besides the batch
    OnnxLayerImport r;
    r.type = "Input";
    r.name = info.inputName;
    r.params = {{"shape", shape}};
    // The normalization a Strata file puts after its input (Mul, Sub, Div by constants named "<input>/norm_*"),
    // part of reading the data: metadata strata.normalization holds its values. Another file's arithmetic there
    // is its own.
    std::string v = info.inputName;
    for (;;) {
        const std::vector<int>& c = g.consumers(v);
        if (c.size() != 1) break;
        const OnnxNodeInfo& n = g.node(c[0]);
        const bool op = n.opType == "Mul" || n.opType == "Sub" || n.opType == "Div";
        if (!op || n.inputs.size() != 2 || n.inputs[0] != v || !g.isInitializer(n.inputs[1]) ||
            n.name.rfind(info.inputName + "/norm_", 0) != 0)
            break;
        r.nodes.push_back(c[0]);
        v = out0(n);
    }
    r.output = v;
    return r;
}

// ---- Dense: Gemm (transB 1); over a sequence Transpose + MatMul (+ Add) ---------------------------------------

void writeDense(Writer& w) {
    const std::string& y = w.name;
    std::vector<std::string> in{w.inputs[0]};
    for (const std::string& v : w.int8Weights()) in.push_back(v);
    if (w.outputShape.rank() == 1) {
        w.node("Gemm", y, in, y).attr("transB", int64_t{1});
    } else {
        // Over a sequence [N, T, F]: Gemm takes matrices only, so x W^T (+ b) as MatMul (+ Add).
        writeProjection(w, in[0], in[1], in.size() > 2 ? in[2] : std::string(), y + "/transpose", y + "/weight_t",
                        y + "/matmul", y + "/bias", y, y + "/product");
    }
}

Read readDense(const View& g, int first) {
    const OnnxNodeInfo& n = g.node(first);
    if (n.opType == "Transpose") {
        const std::optional<Projection> p = readProjection(g, first);
        if (!p) return std::nullopt;
        OnnxLayerImport r = layerFrom(g, "Dense", p->nodes, {p->input});
        r.params = {{"units", p->weightShape[0]}, {"use_bias", !p->bias.empty()}};
        r.weights["weight"] = p->weight;
        if (!p->bias.empty()) r.weights["bias"] = p->bias;
        return r;
    }
    if (n.opType != "Gemm" || n.inputs.size() < 2 || n.intAttr("transA", 0) != 0 || n.intAttr("transB", 0) != 1 ||
        n.floatAttr("alpha", 1.f) != 1.f || n.floatAttr("beta", 1.f) != 1.f)
        return std::nullopt;
    std::vector<float> weight, bias;
    Shape ws, bs;
    if (!tensorOf(g, n.inputs[1], 2, weight, ws)) return std::nullopt;
    const bool hasBias = n.inputs.size() > 2 && !n.inputs[2].empty();
    if (hasBias && (!tensorOf(g, n.inputs[2], 1, bias, bs) || bs[0] != ws[0])) return std::nullopt;
    OnnxLayerImport r = layerFrom(g, "Dense", {first}, {n.inputs[0]});
    r.params = {{"units", ws[0]}, {"use_bias", hasBias}};
    r.weights["weight"] = std::move(weight);
    if (hasBias) r.weights["bias"] = std::move(bias);
    return r;
}

// ---- Conv2D: Conv ----------------------------------------------------------------------------------------------

void writeConv2D(Writer& w) {
    const Json& p = w.params;
    std::vector<std::string> in{w.inputs[0]};
    for (const std::string& v : w.int8Weights()) in.push_back(v);
    const auto [kh, kw] = pairOf(p, "kernel", {1, 1});
    const auto [sh, sw] = pairOf(p, "stride", {1, 1});
    const auto [ph, pw] = pairOf(p, "padding", {0, 0});
    const auto [dh, dw] = pairOf(p, "dilation", {1, 1});
    w.node("Conv", w.name, in, w.name)
        .attr("kernel_shape", Ints{kh, kw})
        .attr("strides", Ints{sh, sw})
        .attr("pads", Ints{ph, pw, ph, pw})
        .attr("dilations", Ints{dh, dw})
        .attr("group", p.at("groups").get<int64_t>());
}

Read readConv2D(const View& g, int first) {
    const OnnxNodeInfo& n = g.node(first);
    std::vector<float> weight, bias;
    Shape ws, bs;
    if (n.opType != "Conv" || n.inputs.size() < 2 || !tensorOf(g, n.inputs[1], 4, weight, ws)) return std::nullopt;
    const Ints kernel = n.intsAttr("kernel_shape", {ws[2], ws[3]}), strides = n.intsAttr("strides", {1, 1}),
               pads = n.intsAttr("pads", {0, 0, 0, 0}), dilations = n.intsAttr("dilations", {1, 1});
    if (kernel != Ints{ws[2], ws[3]} || strides.size() != 2 || dilations.size() != 2 || pads.size() != 4 ||
        pads[0] != pads[2] || pads[1] != pads[3])
        return std::nullopt;
    const bool hasBias = n.inputs.size() > 2 && !n.inputs[2].empty();
    if (hasBias && (!tensorOf(g, n.inputs[2], 1, bias, bs) || bs[0] != ws[0])) return std::nullopt;
    OnnxLayerImport r = layerFrom(g, "Conv2D", {first}, {n.inputs[0]});
    r.params = {{"filters", ws[0]},      {"kernel", kernel},
                {"stride", strides},     {"padding", Ints{pads[0], pads[1]}},
                {"dilation", dilations}, {"groups", n.intAttr("group", 1)},
                {"use_bias", hasBias}};
    r.weights["weight"] = std::move(weight);
    if (hasBias) r.weights["bias"] = std::move(bias);
    return r;
}

// ---- ConvTranspose2D: ConvTranspose ---------------------------------------------------------------------------

void writeConvTranspose2D(Writer& w) {
    const Json& p = w.params;
    std::vector<std::string> in{w.inputs[0], w.weight("weight")};
    if (p.at("use_bias").get<bool>()) in.push_back(w.weight("bias"));
    const auto [kh, kw] = pairOf(p, "kernel", {1, 1});
    const auto [sh, sw] = pairOf(p, "stride", {1, 1});
    const auto [ph, pw] = pairOf(p, "padding", {0, 0});
    const auto [oh, ow] = pairOf(p, "output_padding", {0, 0});
    const auto [dh, dw] = pairOf(p, "dilation", {1, 1});
    w.node("ConvTranspose", w.name, in, w.name)
        .attr("kernel_shape", Ints{kh, kw})
        .attr("strides", Ints{sh, sw})
        .attr("pads", Ints{ph, pw, ph, pw})
        .attr("output_padding", Ints{oh, ow})
        .attr("dilations", Ints{dh, dw})
        .attr("group", p.at("groups").get<int64_t>());
}

// Explicit output_shape and auto_pad other than NOTSET are not read: the padding they imply depends on the input's
// size, which a layer's params do not carry.
Read readConvTranspose2D(const View& g, int first) {
    const OnnxNodeInfo& n = g.node(first);
    std::vector<float> weight, bias;
    Shape ws, bs;
    if (n.opType != "ConvTranspose" || n.inputs.size() < 2 || !tensorOf(g, n.inputs[1], 4, weight, ws) ||
        n.intsAttributes.count("output_shape") || n.stringAttr("auto_pad", "NOTSET") != "NOTSET")
        return std::nullopt;
    const int64_t groups = n.intAttr("group", 1);
    const Ints kernel = n.intsAttr("kernel_shape", {ws[2], ws[3]}), strides = n.intsAttr("strides", {1, 1}),
               pads = n.intsAttr("pads", {0, 0, 0, 0}), dilations = n.intsAttr("dilations", {1, 1}),
               outPads = n.intsAttr("output_padding", {0, 0});
    if (groups < 1 || kernel != Ints{ws[2], ws[3]} || strides.size() != 2 || dilations.size() != 2 ||
        pads.size() != 4 || outPads.size() != 2 || pads[0] != pads[2] || pads[1] != pads[3])
        return std::nullopt;
    const int64_t filters = ws[1] * groups;
    const bool hasBias = n.inputs.size() > 2 && !n.inputs[2].empty();
    if (hasBias && (!tensorOf(g, n.inputs[2], 1, bias, bs) || bs[0] != filters)) return std::nullopt;
    OnnxLayerImport r = layerFrom(g, "ConvTranspose2D", {first}, {n.inputs[0]});
    r.params = {
        {"filters", filters},        {"kernel", kernel},      {"stride", strides}, {"padding", Ints{pads[0], pads[1]}},
        {"output_padding", outPads}, {"dilation", dilations}, {"groups", groups},  {"use_bias", hasBias}};
    r.weights["weight"] = std::move(weight);
    if (hasBias) r.weights["bias"] = std::move(bias);
    return r;
}

// ---- Upsample2D: Resize by scales --------------------------------------------------------------------------------

// As PyTorch exports nn.Upsample: nearest with asymmetric coordinates and floor, bilinear as linear with
// pytorch_half_pixel or align_corners coordinates.
void writeUpsample2D(Writer& w) {
    const std::string& y = w.name;
    const auto [sh, sw] = pairOf(w.params, "scale", {2, 2});
    const std::string scales =
        w.floats(y + "/scales", Shape{4}, {1.f, 1.f, static_cast<float>(sh), static_cast<float>(sw)});
    OnnxNodeInfo& n = w.node("Resize", y, {w.inputs[0], "", scales}, y);
    if (w.params.at("mode").get<std::string>() == "nearest") {
        n.attr("mode", "nearest").attr("coordinate_transformation_mode", "asymmetric").attr("nearest_mode", "floor");
    } else {
        n.attr("mode", "linear")
            .attr("coordinate_transformation_mode",
                  w.params.at("align_corners").get<bool>() ? "align_corners" : "pytorch_half_pixel");
    }
}

// Also the other spellings of the same arithmetic at whole factors: half_pixel for pytorch_half_pixel (they differ
// only for an output of one pixel), nearest with half-pixel coordinates and any rounding (a source coordinate is
// then never halfway between pixels), and sizes for the graph's input.
Read readUpsample2D(const View& g, int first) {
    const OnnxNodeInfo& n = g.node(first);
    if (n.opType != "Resize" || n.inputs.size() < 3 || n.inputs.size() > 4 || g.isInitializer(n.inputs[0]))
        return std::nullopt;
    if (!n.inputs[1].empty()) {  // roi: only an empty tensor (it matters for tf_crop_and_resize alone)
        const TensorRecord* roi = g.floatInitializer(n.inputs[1]);
        if (!roi || roi->shape.numel() != 0) return std::nullopt;
    }
    std::vector<float> scales;
    Shape ss;
    if (n.inputs.size() == 3 && !tensorOf(g, n.inputs[2], 1, scales, ss)) return std::nullopt;
    if (n.inputs.size() == 4) {
        // Sizes instead of scales (F.interpolate(size=...)): whole factors of the input's height and width, known
        // here when the input is the graph's; for other inputs the importer, which knows their shapes, decides.
        const std::vector<int64_t>* sizes = g.int64Initializer(n.inputs[3]);
        const std::vector<int64_t>& dims = g.info().inputDims;
        if (!in(n, 2).empty() || !sizes || sizes->size() != 4 || n.inputs[0] != g.info().inputName ||
            dims.size() != 4 || dims[2] < 1 || dims[3] < 1 || (*sizes)[1] != dims[1])
            return std::nullopt;
        scales = {1.f, 1.f};
        for (size_t k = 2; k < 4; ++k) {
            if ((*sizes)[k] % dims[k] != 0) return std::nullopt;
            scales.push_back(static_cast<float>((*sizes)[k] / dims[k]));
        }
    }
    if (scales.size() != 4 || scales[0] != 1.f || scales[1] != 1.f) return std::nullopt;
    Ints scale;
    for (size_t k = 2; k < 4; ++k) {
        if (!(scales[k] >= 1.f && scales[k] <= 64.f) || scales[k] != std::floor(scales[k])) return std::nullopt;
        scale.push_back(static_cast<int64_t>(scales[k]));
    }
    if (n.intAttr("exclude_outside", 0) != 0 || n.intAttr("antialias", 0) != 0 || n.intsAttributes.count("axes") ||
        n.stringAttr("keep_aspect_ratio_policy", "stretch") != "stretch")
        return std::nullopt;
    const std::string mode = n.stringAttr("mode", "nearest");
    const std::string coords = n.stringAttr("coordinate_transformation_mode", "half_pixel");
    Json params{{"scale", scale}};
    if (mode == "nearest") {
        const std::string rounding = n.stringAttr("nearest_mode", "round_prefer_floor");
        const bool floorAsymmetric = coords == "asymmetric" && rounding == "floor";
        const bool halfPixel =
            (coords == "half_pixel" || coords == "pytorch_half_pixel") && rounding != "floor" && rounding != "ceil";
        if (!floorAsymmetric && !halfPixel) return std::nullopt;
        params["mode"] = "nearest";
    } else if (mode == "linear") {
        if (coords != "half_pixel" && coords != "pytorch_half_pixel" && coords != "align_corners") return std::nullopt;
        params["mode"] = "bilinear";
        params["align_corners"] = coords == "align_corners";
    } else {
        return std::nullopt;
    }
    OnnxLayerImport r = layerFrom(g, "Upsample2D", {first}, {n.inputs[0]});
    r.params = std::move(params);
    return r;
}

// ---- MaxPool2D, AvgPool2D: MaxPool, AveragePool (count_include_pad 0) -----------------------------------------

void writePool(Writer& w, bool max) {
    const Json& p = w.params;
    const auto [kh, kw] = pairOf(p, "kernel", {1, 1});
    const auto [sh, sw] = pairOf(p, "stride", {kh, kw});
    const auto [ph, pw] = pairOf(p, "padding", {0, 0});
    OnnxNodeInfo& n = w.node(max ? "MaxPool" : "AveragePool", w.name, w.inputs, w.name)
                          .attr("kernel_shape", Ints{kh, kw})
                          .attr("strides", Ints{sh, sw})
                          .attr("pads", Ints{ph, pw, ph, pw});
    if (!max) n.attr("count_include_pad", int64_t{0});
}
void writeMaxPool2D(Writer& w) { writePool(w, true); }
void writeAvgPool2D(Writer& w) { writePool(w, false); }

Read readPool(const View& g, int first, bool max) {
    const OnnxNodeInfo& n = g.node(first);
    if (!takesOneValue(g, n, max ? "MaxPool" : "AveragePool")) return std::nullopt;
    const Ints kernel = n.intsAttr("kernel_shape"), pads = n.intsAttr("pads", {0, 0, 0, 0});
    const Ints strides = n.intsAttr("strides", {1, 1});
    if (kernel.size() != 2 || strides.size() != 2 || pads.size() != 4 || pads[0] != pads[2] || pads[1] != pads[3] ||
        n.intAttr("ceil_mode", 0) != 0 || n.intsAttr("dilations", {1, 1}) != Ints{1, 1})
        return std::nullopt;
    // Strata's average leaves padding out of the count; with no padding both counts agree.
    if (!max && n.intAttr("count_include_pad", 0) != 0 && (pads[0] != 0 || pads[1] != 0)) return std::nullopt;
    OnnxLayerImport r = layerFrom(g, max ? "MaxPool2D" : "AvgPool2D", {first}, {n.inputs[0]});
    r.params = {{"kernel", kernel}, {"stride", strides}, {"padding", Ints{pads[0], pads[1]}}};
    return r;
}
Read readMaxPool2D(const View& g, int first) { return readPool(g, first, true); }
Read readAvgPool2D(const View& g, int first) { return readPool(g, first, false); }

// ---- GlobalAvgPool: GlobalAveragePool + Flatten ---------------------------------------------------------------

void writeGlobalAvgPool(Writer& w) {
    const std::string& y = w.name;
    w.node("GlobalAveragePool", y + "/pool", w.inputs, y + "/pooled");
    w.node("Flatten", y, {y + "/pooled"}, y).attr("axis", int64_t{1});
}

Read readGlobalAvgPool(const View& g, int first) {
    const OnnxNodeInfo& n = g.node(first);
    if (!takesOneValue(g, n, "GlobalAveragePool")) return std::nullopt;
    const int flatten = g.onlyConsumer(out0(n), "Flatten");
    if (flatten < 0 || g.node(flatten).intAttr("axis", 1) != 1) return std::nullopt;
    return layerFrom(g, "GlobalAvgPool", {first, flatten}, {n.inputs[0]});
}

// ---- Flatten, Reshape (the batch -1) ---------------------------------------------------------------------------

void writeFlatten(Writer& w) { w.node("Flatten", w.name, w.inputs, w.name).attr("axis", int64_t{1}); }

Read readFlatten(const View& g, int first) {
    if (g.node(first).intAttr("axis", 1) != 1) return std::nullopt;
    return single(g, first, "Flatten", "Flatten");
}

void writeReshape(Writer& w) {
    Ints dims{-1};
    dims.insert(dims.end(), w.outputShape.dims().begin(), w.outputShape.dims().end());
    w.node("Reshape", w.name, {w.inputs[0], w.int64s(w.name + "/shape", dims)}, w.name);
}

Read readReshape(const View& g, int first) {
    const OnnxNodeInfo& n = g.node(first);
    if (n.opType != "Reshape" || n.inputs.size() != 2 || g.isInitializer(n.inputs[0])) return std::nullopt;
    const Ints* dims = g.int64Initializer(n.inputs[1]);
    if (!dims || dims->size() < 2 || (*dims)[0] != -1) return std::nullopt;
    const Ints shape(dims->begin() + 1, dims->end());
    for (int64_t d : shape)
        if (d < 1) return std::nullopt;
    OnnxLayerImport r = layerFrom(g, "Reshape", {first}, {n.inputs[0]});
    r.params = {{"shape", shape}};
    return r;
}

// ---- activations and Softmax ----------------------------------------------------------------------------------

void writeReLU(Writer& w) { w.node("Relu", w.name, w.inputs, w.name); }
Read readReLU(const View& g, int first) { return single(g, first, "Relu", "ReLU"); }

void writeLeakyReLU(Writer& w) {
    w.node("LeakyRelu", w.name, w.inputs, w.name).attr("alpha", w.params.at("alpha").get<float>());
}
Read readLeakyReLU(const View& g, int first) {
    return single(g, first, "LeakyRelu", "LeakyReLU", {{"alpha", decimalOf(g.node(first).floatAttr("alpha", 0.01f))}});
}

void writeSigmoid(Writer& w) { w.node("Sigmoid", w.name, w.inputs, w.name); }
Read readSigmoid(const View& g, int first) { return single(g, first, "Sigmoid", "Sigmoid"); }

void writeTanh(Writer& w) { w.node("Tanh", w.name, w.inputs, w.name); }
Read readTanh(const View& g, int first) { return single(g, first, "Tanh", "Tanh"); }

// Clip with its bounds as inputs (opset 11 on); a missing bound reads as the layer's widest (1e30).
void writeClip(Writer& w) {
    const std::string& y = w.name;
    w.node("Clip", y,
           {w.inputs[0], w.scalar(y + "/min", w.params.at("min").get<float>()),
            w.scalar(y + "/max", w.params.at("max").get<float>())},
           y);
}
Read readClip(const View& g, int first) {
    const OnnxNodeInfo& n = g.node(first);
    if (n.opType != "Clip" || n.inputs.empty() || n.inputs.size() > 3 || g.isInitializer(n.inputs[0]))
        return std::nullopt;
    std::optional<float> lo = -1e30f, hi = 1e30f;
    if (!in(n, 1).empty()) lo = g.scalar(in(n, 1));
    if (!in(n, 2).empty()) hi = g.scalar(in(n, 2));
    if (!lo || !hi || !(*lo <= *hi)) return std::nullopt;
    OnnxLayerImport r = layerFrom(g, "Clip", {first}, {n.inputs[0]});
    r.params = {{"min", decimalOf(*lo)}, {"max", decimalOf(*hi)}};
    return r;
}

// HardSwish is an operator from opset 14; at 13 it is x * HardSigmoid(x) with alpha 1/6 and beta 1/2, which is
// what the reader also takes (the Mul's operands in either order).
void writeHardSwish(Writer& w) {
    const std::string& y = w.name;
    const std::string& x = w.inputs[0];
    if (w.opset >= 14) {
        w.node("HardSwish", y, {x}, y);
        return;
    }
    w.node("HardSigmoid", y + "/gate", {x}, y + "/gate").attr("alpha", 1.0f / 6.0f).attr("beta", 0.5f);
    w.node("Mul", y, {x, y + "/gate"}, y);
}
Read readHardSwish(const View& g, int first) {
    const OnnxNodeInfo& n = g.node(first);
    if (n.opType == "HardSwish") return single(g, first, "HardSwish", "HardSwish");
    if (!takesOneValue(g, n, "HardSigmoid") || !near(n.floatAttr("alpha", 0.2f), 1.0 / 6.0) ||
        !near(n.floatAttr("beta", 0.5f), 0.5))
        return std::nullopt;
    const int mul = g.onlyConsumer(out0(n), "Mul");
    if (mul < 0) return std::nullopt;
    const OnnxNodeInfo& m = g.node(mul);
    const std::string& x = n.inputs[0];
    if (m.inputs.size() != 2 ||
        !((m.inputs[0] == x && m.inputs[1] == out0(n)) || (m.inputs[1] == x && m.inputs[0] == out0(n))))
        return std::nullopt;
    return layerFrom(g, "HardSwish", {first, mul}, {x});
}

// Gelu is an ONNX operator only from opset 20: its exact (erf) definition, as our backends compute it,
// 0.5 x (1 + erf(x / sqrt 2)).
void writeGELU(Writer& w) {
    const std::string& y = w.name;
    const std::string& x = w.inputs[0];
    w.node("Div", y + "/div", {x, w.scalar(y + "/sqrt2", static_cast<float>(std::sqrt(2.0)))}, y + "/scaled");
    w.node("Erf", y + "/erf", {y + "/scaled"}, y + "/erf");
    w.node("Add", y + "/add", {y + "/erf", w.scalar(y + "/one", 1.f)}, y + "/cdf2");
    w.node("Mul", y + "/mul", {x, y + "/cdf2"}, y + "/xcdf2");
    w.node("Mul", y, {y + "/xcdf2", w.scalar(y + "/half", 0.5f)}, y);
}

Read readGELU(const View& g, int first) {
    const OnnxNodeInfo& div = g.node(first);
    if (div.opType != "Div" || div.inputs.size() != 2) return std::nullopt;
    const std::string x = div.inputs[0];
    const std::optional<float> sqrt2 = g.scalar(div.inputs[1]);
    if (!sqrt2 || !near(*sqrt2, std::sqrt(2.0))) return std::nullopt;
    const int erf = g.onlyConsumer(out0(div), "Erf");
    const int add = erf < 0 ? -1 : g.onlyConsumer(out0(g.node(erf)), "Add");
    if (add < 0 || g.scalar(in(g.node(add), 1)) != 1.f) return std::nullopt;
    const int mul = g.onlyConsumer(out0(g.node(add)), "Mul");
    if (mul < 0 || in(g.node(mul), 0) != x) return std::nullopt;
    const int half = g.onlyConsumer(out0(g.node(mul)), "Mul");
    if (half < 0 || g.scalar(in(g.node(half), 1)) != 0.5f) return std::nullopt;
    return layerFrom(g, "GELU", {first, erf, add, mul, half}, {x});
}

void writeSoftmax(Writer& w) { w.node("Softmax", w.name, w.inputs, w.name).attr("axis", int64_t{-1}); }
Read readSoftmax(const View& g, int first) {
    if (g.node(first).intAttr("axis", -1) != -1) return std::nullopt;
    return single(g, first, "Softmax", "Softmax");
}

// ---- BatchNorm: BatchNormalization (inference); LayerNorm: LayerNormalization, or its arithmetic below 17 -----

void writeBatchNorm(Writer& w) {
    w.node("BatchNormalization", w.name,
           {w.inputs[0], w.weight("gamma"), w.weight("beta"), w.weight("running_mean"), w.weight("running_var")},
           w.name)
        .attr("epsilon", w.params.at("eps").get<float>());
}

Read readBatchNorm(const View& g, int first) {
    const OnnxNodeInfo& n = g.node(first);
    if (n.opType != "BatchNormalization" || n.inputs.size() != 5 || n.outputs.size() != 1 ||
        n.intAttr("training_mode", 0) != 0)
        return std::nullopt;
    OnnxLayerImport r = layerFrom(g, "BatchNorm", {first}, {n.inputs[0]});
    const char* names[] = {"gamma", "beta", "running_mean", "running_var"};
    int64_t channels = -1;
    for (size_t k = 0; k < 4; ++k) {
        std::vector<float> v;
        Shape s;
        if (!tensorOf(g, n.inputs[k + 1], 1, v, s) || (channels >= 0 && s[0] != channels)) return std::nullopt;
        channels = s[0];
        r.weights[names[k]] = std::move(v);
    }
    r.params = {{"eps", decimalOf(n.floatAttr("epsilon", 1e-5f))}};
    return r;
}

void writeLayerNorm(Writer& w) {
    const std::string& y = w.name;
    const std::string& x = w.inputs[0];
    const float eps = w.params.at("eps").get<float>();
    const std::string gamma = w.weight("gamma"), beta = w.weight("beta");
    if (w.opset >= 17) {
        w.node("LayerNormalization", y, {x, gamma, beta}, y).attr("axis", int64_t{-1}).attr("epsilon", eps);
        return;
    }
    // A positive axis: OpenCV 4.6 mis-sizes ReduceMean with axes = [-1].
    const Ints last{w.outputShape.rank()};
    w.node("ReduceMean", y + "/mean", {x}, y + "/mean").attr("axes", last);
    w.node("Sub", y + "/center", {x, y + "/mean"}, y + "/centered");
    w.node("Mul", y + "/square", {y + "/centered", y + "/centered"}, y + "/squared");
    w.node("ReduceMean", y + "/var", {y + "/squared"}, y + "/var").attr("axes", last);
    w.node("Add", y + "/var_eps", {y + "/var", w.scalar(y + "/eps", eps)}, y + "/var_eps");
    w.node("Sqrt", y + "/std", {y + "/var_eps"}, y + "/std");
    w.node("Div", y + "/normalize", {y + "/centered", y + "/std"}, y + "/normalized");
    w.node("Mul", y + "/gamma", {y + "/normalized", gamma}, y + "/scaled");
    w.node("Add", y, {y + "/scaled", beta}, y);
}

Read readLayerNorm(const View& g, int first) {
    const OnnxNodeInfo& n = g.node(first);
    std::vector<float> gamma, beta;
    Shape gs, bs;
    if (n.opType == "LayerNormalization") {
        if (n.inputs.size() != 3 || n.intAttr("axis", -1) != -1 || !tensorOf(g, n.inputs[1], 1, gamma, gs) ||
            !tensorOf(g, n.inputs[2], 1, beta, bs) || gs != bs)
            return std::nullopt;
        OnnxLayerImport r = layerFrom(g, "LayerNorm", {first}, {n.inputs[0]});
        r.params = {{"eps", decimalOf(n.floatAttr("epsilon", 1e-5f))}};
        r.weights = {{"gamma", std::move(gamma)}, {"beta", std::move(beta)}};
        return r;
    }
    // (x - mean) / sqrt(var + eps) * gamma + beta over the last axis, the mean and variance by ReduceMean.
    if (n.opType != "ReduceMean" || n.inputs.size() != 1 || n.intAttr("keepdims", 1) != 1) return std::nullopt;
    const std::string x = n.inputs[0];
    const Ints axes = n.intsAttr("axes");
    if (axes.size() != 1) return std::nullopt;
    const int sub = g.onlyConsumer(out0(n), "Sub");
    if (sub < 0 || g.node(sub).inputs != std::vector<std::string>{x, out0(n)}) return std::nullopt;
    const std::string centered = out0(g.node(sub));
    const std::vector<int>& uses = g.consumers(centered);
    int square = g.consumer(centered, "Mul");
    const int div = g.consumer(centered, "Div");
    if (square >= 0) {
        if (uses.size() != 3 || div < 0 || g.node(square).inputs != std::vector{centered, centered})
            return std::nullopt;
    } else {
        // Pow(centered, 2), as PyTorch's exporter writes it.
        square = g.consumer(centered, "Pow");
        if (square < 0 || uses.size() != 2 || div < 0 || in(g.node(square), 0) != centered ||
            g.scalar(in(g.node(square), 1)) != 2.f)
            return std::nullopt;
    }
    const int var = g.onlyConsumer(out0(g.node(square)), "ReduceMean");
    if (var < 0 || g.node(var).intsAttr("axes") != axes || g.node(var).intAttr("keepdims", 1) != 1) return std::nullopt;
    const int addEps = g.onlyConsumer(out0(g.node(var)), "Add");
    const std::optional<float> eps = addEps < 0 ? std::nullopt : g.scalar(in(g.node(addEps), 1));
    if (!eps) return std::nullopt;
    const int sqrt = g.onlyConsumer(out0(g.node(addEps)), "Sqrt");
    if (sqrt < 0 || g.node(div).inputs != std::vector{centered, out0(g.node(sqrt))}) return std::nullopt;
    const int scale = g.onlyConsumer(out0(g.node(div)), "Mul");
    if (scale < 0 || in(g.node(scale), 0) != out0(g.node(div)) || !tensorOf(g, in(g.node(scale), 1), 1, gamma, gs))
        return std::nullopt;
    const int shift = g.onlyConsumer(out0(g.node(scale)), "Add");
    if (shift < 0 || in(g.node(shift), 0) != out0(g.node(scale)) || !tensorOf(g, in(g.node(shift), 1), 1, beta, bs) ||
        gs != bs)
        return std::nullopt;
    OnnxLayerImport r = layerFrom(g, "LayerNorm", {first, sub, square, var, addEps, sqrt, div, scale, shift}, {x});
    r.params = {{"eps", decimalOf(*eps)}};
    r.weights = {{"gamma", std::move(gamma)}, {"beta", std::move(beta)}};
    return r;
}

// ---- Dropout: nothing (inference passes its input on); an Identity when it gives the graph's output ---------

void writeDropout(Writer& w) {
    w.output = w.inputs[0];
    if (w.graphOutput) {
        w.node("Identity", w.name, w.inputs, w.name);
        w.output = w.name;
    }
}

// Its rate is not in a Strata file (the default stands); ONNX's Dropout gives its ratio when it is a constant.
Read readDropout(const View& g, int first) {
    const OnnxNodeInfo& n = g.node(first);
    if (n.opType == "Identity") return single(g, first, "Identity", "Dropout");
    if (n.opType != "Dropout" || n.inputs.empty() || g.isInitializer(n.inputs[0])) return std::nullopt;
    OnnxLayerImport r = layerFrom(g, "Dropout", {first}, {n.inputs[0]});
    r.output = r.name = out0(n);  // its second output, the mask, is for training
    if (const std::optional<float> ratio = g.scalar(in(n, 1))) r.params = {{"rate", decimalOf(*ratio)}};
    return r;
}

// ---- Add: a chain of Adds; Concat: Concat (axis + 1 for the batch) --------------------------------------------

void writeAdd(Writer& w) {
    const std::vector<std::string>& x = w.inputs;
    std::string acc = x[0];
    for (size_t i = 1; i < x.size(); ++i) {
        const std::string out = i + 1 == x.size() ? w.name : w.name + "/sum" + std::to_string(i);
        w.node("Add", out, {acc, x[i]}, out);
        acc = out;
    }
}

// The chain is one layer when its partial sums are named as the writer names them ("<add>/sum<k>"); other
// chains of Adds are layers of two inputs each, which compute the same.
Read readAdd(const View& g, int first) {
    std::vector<int> nodes{first};
    std::vector<std::string> inputs;
    for (int i = first;;) {
        const OnnxNodeInfo& n = g.node(i);
        if (n.opType != "Add" || n.inputs.size() != 2 || g.isInitializer(n.inputs[0]) || g.isInitializer(n.inputs[1]))
            return std::nullopt;
        if (inputs.empty()) inputs.push_back(n.inputs[0]);
        inputs.push_back(n.inputs[1]);
        const int next = g.onlyConsumer(out0(n), "Add");
        if (next < 0 || in(g.node(next), 0) != out0(n) || inputs.size() == 8) break;
        nodes.push_back(next);
        i = next;
    }
    // The longest start of the chain whose partial sums are named after its end.
    auto named = [&](size_t last) {
        for (size_t k = 0; k < last; ++k)
            if (out0(g.node(nodes[k])) != out0(g.node(nodes[last])) + "/sum" + std::to_string(k + 1)) return false;
        return true;
    };
    size_t last = nodes.size() - 1;
    while (last > 0 && !named(last)) --last;
    nodes.resize(last + 1);
    inputs.resize(last + 2);
    OnnxLayerImport r = layerFrom(g, "Add", nodes, inputs);
    r.params = {{"inputs", static_cast<int64_t>(inputs.size())}};
    return r;
}

void writeConcat(Writer& w) {
    w.node("Concat", w.name, w.inputs, w.name).attr("axis", w.params.at("axis").get<int64_t>() + 1);
}

Read readConcat(const View& g, int first) {
    const OnnxNodeInfo& n = g.node(first);
    const int64_t axis = n.intAttr("axis", 0);
    if (n.opType != "Concat" || n.inputs.size() < 2 || n.inputs.size() > 8 || axis < 1) return std::nullopt;
    for (const std::string& v : n.inputs)
        if (g.isInitializer(v)) return std::nullopt;
    OnnxLayerImport r = layerFrom(g, "Concat", {first}, n.inputs);
    r.params = {{"axis", axis - 1}, {"inputs", static_cast<int64_t>(n.inputs.size())}};
    return r;
}

// ---- Embedding: Cast (the float ids to int64) + Gather --------------------------------------------------------

constexpr int64_t kOnnxInt64 = 7;  // TensorProto::INT64

void writeEmbedding(Writer& w) {
    const std::string& y = w.name;
    // Ids travel as float32 like every Strata input; Gather needs integers.
    w.node("Cast", y + "/ids", w.inputs, y + "/ids").attr("to", kOnnxInt64);
    w.node("Gather", y, {w.weight("weight"), y + "/ids"}, y).attr("axis", int64_t{0});
}

Read readEmbedding(const View& g, int first) {
    const OnnxNodeInfo& cast = g.node(first);
    if (!takesOneValue(g, cast, "Cast") || cast.intAttr("to", 0) != kOnnxInt64) return std::nullopt;
    const int gather = g.onlyConsumer(out0(cast), "Gather");
    std::vector<float> table;
    Shape ts;
    if (gather < 0 || in(g.node(gather), 1) != out0(cast) || g.node(gather).intAttr("axis", 0) != 0 ||
        !tensorOf(g, in(g.node(gather), 0), 2, table, ts))
        return std::nullopt;
    OnnxLayerImport r = layerFrom(g, "Embedding", {first, gather}, {cast.inputs[0]});
    r.params = {{"vocab", ts[0]}, {"dim", ts[1]}};
    r.weights["weight"] = std::move(table);
    return r;
}

// ---- Conv1D: Transpose to [N, C, T], Conv with the weight transposed to [F, C, K], Transpose back ------------

void writeConv1D(Writer& w) {
    const std::string& y = w.name;
    const Json& p = w.params;
    // ONNX convolves [N, C, T] with a [F, C, K] weight; Strata keeps [N, T, C] and [K, F, C].
    w.node("Transpose", y + "/to_nct", w.inputs, y + "/nct").attr("perm", Ints{0, 2, 1});
    // The weight and bias: int8 and int32 in an int8 export (LayerType::int8Weight).
    const std::vector<std::string> weights = w.int8Weights();
    w.node("Transpose", y + "/weight_fck", {weights[0]}, y + "/weight_fck").attr("perm", Ints{1, 2, 0});
    std::vector<std::string> in{y + "/nct", y + "/weight_fck"};
    if (weights.size() > 1) in.push_back(weights[1]);
    const int64_t k = p.at("kernel").get<int64_t>(), pad = p.at("padding").get<int64_t>();
    w.node("Conv", y + "/conv", in, y + "/nft")
        .attr("kernel_shape", Ints{k})
        .attr("strides", Ints{p.at("stride").get<int64_t>()})
        .attr("pads", Ints{pad, pad})
        .attr("dilations", Ints{p.at("dilation").get<int64_t>()});
    w.node("Transpose", y, {y + "/nft"}, y).attr("perm", Ints{0, 2, 1});
}

Read readConv1D(const View& g, int first) {
    const OnnxNodeInfo& toNct = g.node(first);
    if (!takesOneValue(g, toNct, "Transpose") || toNct.intsAttr("perm") != Ints{0, 2, 1}) return std::nullopt;
    const int conv = g.onlyConsumer(out0(toNct), "Conv");
    if (conv < 0) return std::nullopt;
    const OnnxNodeInfo& c = g.node(conv);
    const int wt = g.producer(in(c, 1));  // the weight's Transpose
    std::vector<float> weight, bias;
    Shape ws, bs;
    if (in(c, 0) != out0(toNct) || wt < 0 || g.node(wt).opType != "Transpose" ||
        g.node(wt).intsAttr("perm") != Ints{1, 2, 0} || g.onlyConsumer(out0(g.node(wt)), "Conv") != conv ||
        !tensorOf(g, in(g.node(wt), 0), 3, weight, ws))
        return std::nullopt;
    const Ints kernel = c.intsAttr("kernel_shape", {ws[0]}), strides = c.intsAttr("strides", {1}),
               pads = c.intsAttr("pads", {0, 0}), dilations = c.intsAttr("dilations", {1});
    if (kernel != Ints{ws[0]} || strides.size() != 1 || dilations.size() != 1 || pads.size() != 2 ||
        pads[0] != pads[1] || c.intAttr("group", 1) != 1)
        return std::nullopt;
    const bool hasBias = c.inputs.size() > 2 && !c.inputs[2].empty();
    if (hasBias && (!tensorOf(g, c.inputs[2], 1, bias, bs) || bs[0] != ws[1])) return std::nullopt;
    const int back = g.onlyConsumer(out0(c), "Transpose");
    if (back < 0 || g.node(back).intsAttr("perm") != Ints{0, 2, 1}) return std::nullopt;
    OnnxLayerImport r = layerFrom(g, "Conv1D", {first, wt, conv, back}, {toNct.inputs[0]});
    r.params = {{"filters", ws[1]},   {"kernel", ws[0]},          {"stride", strides[0]},
                {"padding", pads[0]}, {"dilation", dilations[0]}, {"use_bias", hasBias}};
    r.weights["weight"] = std::move(weight);  // [kernel, filters, channels], as Strata keeps it
    if (hasBias) r.weights["bias"] = std::move(bias);
    return r;
}

// ---- PositionalEmbedding: Add of the [T, D] table, broadcast over the batch ----------------------------------

void writePositionalEmbedding(Writer& w) { w.node("Add", w.name, {w.inputs[0], w.weight("weight")}, w.name); }

Read readPositionalEmbedding(const View& g, int first) {
    const OnnxNodeInfo& n = g.node(first);
    std::vector<float> table;
    Shape ts;
    if (n.opType != "Add" || n.inputs.size() != 2 || g.isInitializer(n.inputs[0]) ||
        !tensorOf(g, n.inputs[1], 2, table, ts))
        return std::nullopt;
    OnnxLayerImport r = layerFrom(g, "PositionalEmbedding", {first}, {n.inputs[0]});
    r.weights["weight"] = std::move(table);
    return r;
}

// ---- SequenceMeanPool, SequenceMaxPool: ReduceMean, ReduceMax over axis 1; masked, over the real tokens -------

void writeSequencePool(Writer& w, bool mean) {
    const std::string& y = w.name;
    const std::vector<std::string>& x = w.inputs;
    const int64_t len = w.inputShapes.at(0)[0];
    auto reduce = [&](const std::string& in, const std::string& out) {
        w.node(mean ? "ReduceMean" : "ReduceMax", out, {in}, out).attr("axes", Ints{1}).attr("keepdims", int64_t{0});
    };
    if (x.size() < 2) {
        reduce(x[0], y);
        return;
    }
    // keep [N, T, 1]: 1 at real tokens, 0 at padding (id 0).
    const std::string keep = writeKeepMask(w, x[1], {-1, len, 1});
    w.node("Mul", y + "/mask", {x[0], keep}, y + "/kept");
    if (mean) {
        // sum over the kept / count, as ReduceMean(x * keep) / ReduceMean(keep); a sample without a real token
        // has a zero sum, divided by the floor 0.5 / T instead of 0.
        reduce(y + "/kept", y + "/kept_mean");
        reduce(keep, y + "/kept_share");
        w.node("Max", y + "/share_floor", {y + "/kept_share", w.scalar(y + "/floor", 0.5f / static_cast<float>(len))},
               y + "/kept_share_floor");
        w.node("Div", y, {y + "/kept_mean", y + "/kept_share_floor"}, y);
    } else {
        // Padding pushed to -1e30 so that it never wins; 0 for a sample without a real token.
        w.node("Sub", y + "/pad", {keep, w.scalar(y + "/one", 1.f)}, y + "/pad");
        w.node("Mul", y + "/pad_low", {y + "/pad", w.scalar(y + "/big", 1e30f)}, y + "/pad_low");
        w.node("Add", y + "/masked", {y + "/kept", y + "/pad_low"}, y + "/masked");
        reduce(y + "/masked", y + "/max");
        reduce(keep, y + "/any");
        w.node("Mul", y, {y + "/max", y + "/any"}, y);
    }
}
void writeSequenceMeanPool(Writer& w) { writeSequencePool(w, true); }
void writeSequenceMaxPool(Writer& w) { writeSequencePool(w, false); }

// A ReduceMean or ReduceMax over the time axis of [N, T, F] that drops it.
bool isTimeReduce(const View& g, int node, bool mean, const std::string& input) {
    if (node < 0) return false;
    const OnnxNodeInfo& n = g.node(node);
    return n.opType == (mean ? "ReduceMean" : "ReduceMax") && n.inputs == std::vector{input} &&
           n.intsAttr("axes") == Ints{1} && n.intAttr("keepdims", 1) == 0;
}

Read readSequencePool(const View& g, int first, bool mean) {
    const std::string type = mean ? "SequenceMeanPool" : "SequenceMaxPool";
    const OnnxNodeInfo& n = g.node(first);
    if (n.opType != "Abs") {
        if (!isTimeReduce(g, first, mean, in(n, 0)) || g.isInitializer(in(n, 0))) return std::nullopt;
        OnnxLayerImport r = layerFrom(g, type, {first}, {n.inputs[0]});
        r.params = {{"masked", false}};
        return r;
    }
    const std::optional<KeepMask> keep = readKeepMask(g, first);
    if (!keep || keep->dims.size() != 3 || keep->dims[0] != -1 || keep->dims[2] != 1) return std::nullopt;
    const int mask = g.consumer(keep->keep, "Mul");
    if (mask < 0 || in(g.node(mask), 1) != keep->keep) return std::nullopt;
    const std::string x = in(g.node(mask), 0), kept = out0(g.node(mask));
    std::vector<int> nodes = keep->nodes;
    nodes.push_back(mask);
    // The mask's readers: the Mul, and the reduce that counts (mean) or the Sub and the reduce (max).
    if (mean) {
        const int sum = g.onlyConsumer(kept, "ReduceMean");
        const int share = g.consumer(keep->keep, "ReduceMean");
        if (!isTimeReduce(g, sum, true, kept) || !isTimeReduce(g, share, true, keep->keep) ||
            g.consumers(keep->keep).size() != 2)
            return std::nullopt;
        const int floor = g.onlyConsumer(out0(g.node(share)), "Max");
        if (floor < 0 || !g.scalar(in(g.node(floor), 1))) return std::nullopt;
        const int div = g.onlyConsumer(out0(g.node(floor)), "Div");
        if (div < 0 || g.node(div).inputs != std::vector{out0(g.node(sum)), out0(g.node(floor))}) return std::nullopt;
        nodes.insert(nodes.end(), {sum, share, floor, div});
    } else {
        const int pad = g.consumer(keep->keep, "Sub");
        if (pad < 0 || g.scalar(in(g.node(pad), 1)) != 1.f || g.consumers(keep->keep).size() != 3) return std::nullopt;
        const int low = g.onlyConsumer(out0(g.node(pad)), "Mul");
        const int add = g.onlyConsumer(kept, "Add");
        if (low < 0 || add < 0 || g.node(add).inputs != std::vector{kept, out0(g.node(low))}) return std::nullopt;
        const int max = g.onlyConsumer(out0(g.node(add)), "ReduceMax");
        const int any = g.consumer(keep->keep, "ReduceMax");
        if (!isTimeReduce(g, max, false, out0(g.node(add))) || !isTimeReduce(g, any, false, keep->keep))
            return std::nullopt;
        const int mul = g.onlyConsumer(out0(g.node(max)), "Mul");
        if (mul < 0 || g.node(mul).inputs != std::vector{out0(g.node(max)), out0(g.node(any))}) return std::nullopt;
        nodes.insert(nodes.end(), {pad, low, add, max, any, mul});
    }
    OnnxLayerImport r = layerFrom(g, type, nodes, {x, keep->ids});
    r.params = {{"masked", true}};
    return r;
}
Read readSequenceMeanPool(const View& g, int first) { return readSequencePool(g, first, true); }
Read readSequenceMaxPool(const View& g, int first) { return readSequencePool(g, first, false); }

// ---- MultiHeadSelfAttention ---------------------------------------------------------------------------------
// MatMul (projections), Split, Reshape + Transpose (heads), MatMul, Mul (scale), Softmax (masked: -1e30 added at
// padding keys and the weights multiplied by the mask), MatMul, Transpose + Reshape, MatMul (output projection).

void writeMultiHeadSelfAttention(Writer& w) {
    const std::string& y = w.name;
    const std::vector<std::string>& x = w.inputs;
    const Json& p = w.params;
    const int64_t len = w.outputShape[0], width = w.outputShape[1], heads = p.at("heads").get<int64_t>(),
                  dh = width / heads;
    // The Q, K, V projection: int8 in an int8 export (LayerType::int8Weight).
    const std::vector<std::string> in = w.int8Weights();
    writeProjection(w, x[0], in[0], in.size() > 1 ? in[1] : std::string(), y + "/qkv_transpose", y + "/qkv_weight_t",
                    y + "/qkv_matmul", y + "/qkv_bias", y + "/qkv", y + "/qkv_product");
    const std::string qkv = w.quantizedInner("qkv", y + "/qkv");
    OnnxNodeInfo& split =
        w.node("Split", y + "/split", {qkv, w.int64s(y + "/split_sizes", {width, width, width})}, y + "/q");
    split.outputs.push_back(y + "/k");
    split.outputs.push_back(y + "/v");
    split.attr("axis", int64_t{2});
    // [N, T, D] -> [N, T, H, dh] -> heads first: Q and V [N, H, T, dh], K transposed [N, H, dh, T].
    const std::string headShape = w.int64s(y + "/head_shape", {0, 0, heads, dh});
    for (const char* part : {"q", "k", "v"}) {
        const std::string v = y + "/" + part;
        w.node("Reshape", v + "_split_heads", {v, headShape}, v + "_heads");
        w.node("Transpose", v + "_heads_first", {v + "_heads"}, v + "_by_head")
            .attr("perm", part[0] == 'k' ? Ints{0, 2, 3, 1} : Ints{0, 2, 1, 3});
    }
    w.node("MatMul", y + "/scores", {y + "/q_by_head", y + "/k_by_head"}, y + "/scores");
    w.node("Mul", y + "/scale", {y + "/scores", w.scalar(y + "/scale_value", 1.f / std::sqrt(static_cast<float>(dh)))},
           y + "/scaled");
    std::string probs = y + "/probs";
    if (x.size() < 2) {
        w.node("Softmax", probs, {y + "/scaled"}, probs).attr("axis", int64_t{-1});
    } else {
        // Padding keys: -1e30 added before the softmax, and weight 0 after it (also where a sample has no real
        // token, which attends to nothing).
        const std::string keep = writeKeepMask(w, x[1], {-1, 1, 1, len});
        w.node("Sub", y + "/pad", {keep, w.scalar(y + "/one", 1.f)}, y + "/pad");
        w.node("Mul", y + "/pad_low", {y + "/pad", w.scalar(y + "/big", 1e30f)}, y + "/pad_low");
        w.node("Add", y + "/masked", {y + "/scaled", y + "/pad_low"}, y + "/masked");
        w.node("Softmax", y + "/softmax", {y + "/masked"}, y + "/softmax").attr("axis", int64_t{-1});
        w.node("Mul", probs, {y + "/softmax", keep}, probs);
    }
    // The softmax weights: uint8 in an int8 export (zero point 0: they are never negative).
    probs = w.quantizedInner("probs", probs);
    w.node("MatMul", y + "/context", {probs, y + "/v_by_head"}, y + "/context");
    w.node("Transpose", y + "/heads_last", {y + "/context"}, y + "/context_t").attr("perm", Ints{0, 2, 1, 3});
    w.node("Reshape", y + "/merge_heads", {y + "/context_t", w.int64s(y + "/merged_shape", {0, 0, width})},
           y + "/merged");
    // The heads' context and the output projection: uint8 and int8 in an int8 export (LayerType::int8InnerTensors).
    const std::string merged = w.quantizedInner("context", y + "/merged");
    const std::vector<std::string> out = w.innerInt8Weights("context");
    writeProjection(w, merged, out[0], out.size() > 1 ? out[1] : std::string(), y + "_transpose", y + "_weight_t",
                    y + "_matmul", y + "_bias", y, y + "_product");
}

// PyTorch's nn.MultiheadAttention (self-attention, batch_first, no mask) as torch.onnx.export writes it, with
// the importer's rewrite of its [in, out] MatMul weight (OnnxImport.cpp): Transpose to [T, N, D], the packed
// projection (Transpose + MatMul + Add), three Slices into Q, K, V, each Reshaped to [T, N*H, dh] and transposed
// (K to [N*H, dh, T]), Q divided by sqrt(dh), MatMul, Softmax, MatMul, Transpose + Reshape to [T*N, D], the output
// projection's Gemm, Reshape to [T, N, D] and Transpose back. The Slices' bounds and the Reshapes' shapes are
// computed at run time from the input's shape (Shape, Gather, Concat ...): the structure fixes them, and the
// importer absorbs that arithmetic once the block is read.
// The one reader of `value` of type `op`, when every other reader is a Shape node (PyTorch's exporter reads the
// shapes of the values it reshapes); -1 otherwise.
int dataConsumer(const View& g, const std::string& value, const std::string& op) {
    int found = -1;
    for (int c : g.consumers(value)) {
        if (g.node(c).opType == "Shape") continue;
        if (g.node(c).opType != op || found >= 0) return -1;
        found = c;
    }
    return found;
}

Read readTorchSelfAttention(const View& g, int first) {
    const OnnxNodeInfo& t0 = g.node(first);
    if (!takesOneValue(g, t0, "Transpose") || t0.intsAttr("perm") != Ints{1, 0, 2}) return std::nullopt;
    const int mm = dataConsumer(g, out0(t0), "MatMul");
    if (mm < 0 || in(g.node(mm), 0) != out0(t0)) return std::nullopt;
    const int wt = g.producer(in(g.node(mm), 1));
    const std::optional<Projection> inProj = wt < 0 ? std::nullopt : readProjection(g, wt);
    if (!inProj || inProj->input != out0(t0) || inProj->weightShape[0] != 3 * inProj->weightShape[1] ||
        inProj->bias.empty())
        return std::nullopt;
    const int64_t width = inProj->weightShape[1];
    std::vector<int> nodes{first};
    nodes.insert(nodes.end(), inProj->nodes.begin(), inProj->nodes.end());
    std::vector<int> slices;
    for (int c : g.consumers(inProj->output))
        if (g.node(c).opType == "Slice" && in(g.node(c), 0) == inProj->output) slices.push_back(c);
    if (slices.size() != 3) return std::nullopt;
    // Each slices the last axis of [T, N, 3D] (its bounds are computed; its axis is a constant).
    for (int sl : slices) {
        const Ints* axes = g.int64Initializer(in(g.node(sl), 3));
        if (!axes || (*axes != Ints{2} && *axes != Ints{-1})) return std::nullopt;
    }
    std::string parts[3];
    for (size_t k = 0; k < 3; ++k) {
        const std::string sliced = out0(g.node(slices[k]));
        const int reshape = dataConsumer(g, sliced, "Reshape");
        if (reshape < 0 || in(g.node(reshape), 0) != sliced) return std::nullopt;
        const int t = dataConsumer(g, out0(g.node(reshape)), "Transpose");
        if (t < 0 || g.node(t).intsAttr("perm") != (k == 1 ? Ints{1, 2, 0} : Ints{1, 0, 2})) return std::nullopt;
        parts[k] = out0(g.node(t));
        nodes.insert(nodes.end(), {slices[k], reshape, t});
    }
    // Q / sqrt(dh), or Q * (1 / sqrt(dh)).
    const bool divides = dataConsumer(g, parts[0], "Div") >= 0;
    const int scale = divides ? dataConsumer(g, parts[0], "Div") : dataConsumer(g, parts[0], "Mul");
    if (scale < 0 || in(g.node(scale), 0) != parts[0]) return std::nullopt;
    const float by = g.scalar(in(g.node(scale), 1)).value_or(0.f);
    if (!(by > 0.f)) return std::nullopt;
    const double factor = divides ? 1.0 / static_cast<double>(by) : static_cast<double>(by);
    const double dh = std::round(1.0 / (factor * factor));
    if (dh < 1 || std::fabs(factor * std::sqrt(dh) - 1.0) > 1e-5 || width % static_cast<int64_t>(dh) != 0)
        return std::nullopt;
    const int64_t heads = width / static_cast<int64_t>(dh);
    const int scores = dataConsumer(g, out0(g.node(scale)), "MatMul");
    if (scores < 0 || g.node(scores).inputs != std::vector{out0(g.node(scale)), parts[1]}) return std::nullopt;
    const int softmax = dataConsumer(g, out0(g.node(scores)), "Softmax");
    if (softmax < 0 || g.node(softmax).intAttr("axis", -1) != -1) return std::nullopt;
    const int context = dataConsumer(g, out0(g.node(softmax)), "MatMul");
    if (context < 0 || g.node(context).inputs != std::vector{out0(g.node(softmax)), parts[2]}) return std::nullopt;
    const int back = dataConsumer(g, out0(g.node(context)), "Transpose");
    if (back < 0 || g.node(back).intsAttr("perm") != Ints{1, 0, 2}) return std::nullopt;
    const int merge = dataConsumer(g, out0(g.node(back)), "Reshape");
    if (merge < 0 || in(g.node(merge), 0) != out0(g.node(back))) return std::nullopt;
    const int gemm = dataConsumer(g, out0(g.node(merge)), "Gemm");
    if (gemm < 0) return std::nullopt;
    const OnnxNodeInfo& o = g.node(gemm);
    std::vector<float> outWeight, outBias;
    Shape ows, obs;
    if (in(o, 0) != out0(g.node(merge)) || o.intAttr("transA", 0) != 0 || o.intAttr("transB", 0) != 1 ||
        o.floatAttr("alpha", 1.f) != 1.f || o.floatAttr("beta", 1.f) != 1.f ||
        !tensorOf(g, in(o, 1), 2, outWeight, ows) || ows != Shape{width, width} ||
        !tensorOf(g, in(o, 2), 1, outBias, obs) || obs[0] != width)
        return std::nullopt;
    const int unmerge = dataConsumer(g, out0(o), "Reshape");
    if (unmerge < 0 || in(g.node(unmerge), 0) != out0(o)) return std::nullopt;
    const int batchFirst = dataConsumer(g, out0(g.node(unmerge)), "Transpose");
    if (batchFirst < 0 || g.node(batchFirst).intsAttr("perm") != Ints{1, 0, 2}) return std::nullopt;
    nodes.insert(nodes.end(), {scale, scores, softmax, context, back, merge, gemm, unmerge, batchFirst});
    OnnxLayerImport r = layerFrom(g, "MultiHeadSelfAttention", nodes, {t0.inputs[0]});
    r.params = {{"heads", heads}, {"masked", false}, {"use_bias", true}};
    r.weights["in_weight"] = inProj->weight;
    r.weights["in_bias"] = inProj->bias;
    r.weights["out_weight"] = std::move(outWeight);
    r.weights["out_bias"] = std::move(outBias);
    return r;
}

Read readMultiHeadSelfAttention(const View& g, int first) {
    if (g.node(first).opType == "Transpose" && g.node(first).intsAttr("perm") == Ints{1, 0, 2})
        return readTorchSelfAttention(g, first);
    const std::optional<Projection> inProj = readProjection(g, first);
    if (!inProj || inProj->weightShape[0] != 3 * inProj->weightShape[1]) return std::nullopt;
    const int64_t width = inProj->weightShape[1];
    std::vector<int> nodes = inProj->nodes;
    const int split = g.onlyConsumer(inProj->output, "Split");
    if (split < 0 || g.node(split).outputs.size() != 3 || g.node(split).intAttr("axis", 0) != 2) return std::nullopt;
    nodes.push_back(split);
    // Q, K, V split into heads: Reshape to [N, T, H, dh], heads first.
    int64_t heads = 0;
    std::string byHead[3];
    for (size_t k = 0; k < 3; ++k) {
        const int reshape = g.onlyConsumer(g.node(split).outputs[k], "Reshape");
        const Ints* shape = reshape < 0 ? nullptr : g.int64Initializer(in(g.node(reshape), 1));
        if (!shape || shape->size() != 4 || (*shape)[0] != 0 || (*shape)[1] != 0 || (*shape)[2] < 1 ||
            (*shape)[2] * (*shape)[3] != width || (heads && (*shape)[2] != heads))
            return std::nullopt;
        heads = (*shape)[2];
        const int t = g.onlyConsumer(out0(g.node(reshape)), "Transpose");
        if (t < 0 || g.node(t).intsAttr("perm") != (k == 1 ? Ints{0, 2, 3, 1} : Ints{0, 2, 1, 3})) return std::nullopt;
        byHead[k] = out0(g.node(t));
        nodes.insert(nodes.end(), {reshape, t});
    }
    const int scores = g.onlyConsumer(byHead[0], "MatMul");
    if (scores < 0 || g.node(scores).inputs != std::vector{byHead[0], byHead[1]}) return std::nullopt;
    const int scale = g.onlyConsumer(out0(g.node(scores)), "Mul");
    const std::optional<float> factor = scale < 0 ? std::nullopt : g.scalar(in(g.node(scale), 1));
    if (!factor || !near(*factor, 1.0 / std::sqrt(static_cast<double>(width / heads)))) return std::nullopt;
    nodes.insert(nodes.end(), {scores, scale});
    const std::string scaled = out0(g.node(scale));
    std::vector<std::string> inputs{inProj->input};
    std::string probs;
    if (const int softmax = g.onlyConsumer(scaled, "Softmax"); softmax >= 0) {
        if (g.node(softmax).intAttr("axis", -1) != -1) return std::nullopt;
        probs = out0(g.node(softmax));
        nodes.push_back(softmax);
    } else {
        // Masked: Add(scaled, (keep - 1) * 1e30), Softmax, Mul by keep.
        const int add = g.onlyConsumer(scaled, "Add");
        if (add < 0 || in(g.node(add), 0) != scaled) return std::nullopt;
        const int lowNode = g.producer(in(g.node(add), 1));
        if (lowNode < 0 || g.node(lowNode).opType != "Mul" || !g.scalar(in(g.node(lowNode), 1))) return std::nullopt;
        const int padNode = g.producer(in(g.node(lowNode), 0));
        if (padNode < 0 || g.node(padNode).opType != "Sub" || g.scalar(in(g.node(padNode), 1)) != 1.f)
            return std::nullopt;
        // keep = Reshape(Sign(Abs(ids))): back from the Sub to the Abs.
        const int reshape = g.producer(in(g.node(padNode), 0));
        const int sign = reshape < 0 ? -1 : g.producer(in(g.node(reshape), 0));
        const int abs = sign < 0 ? -1 : g.producer(in(g.node(sign), 0));
        const std::optional<KeepMask> keep = abs < 0 ? std::nullopt : readKeepMask(g, abs);
        if (!keep || keep->keep != in(g.node(padNode), 0) || keep->dims.size() != 4 ||
            g.consumers(keep->keep).size() != 2)
            return std::nullopt;
        const int masked = g.onlyConsumer(out0(g.node(add)), "Softmax");
        if (masked < 0 || g.node(masked).intAttr("axis", -1) != -1) return std::nullopt;
        const int weighted = g.onlyConsumer(out0(g.node(masked)), "Mul");
        if (weighted < 0 || g.node(weighted).inputs != std::vector{out0(g.node(masked)), keep->keep})
            return std::nullopt;
        probs = out0(g.node(weighted));
        nodes.insert(nodes.end(), keep->nodes.begin(), keep->nodes.end());
        nodes.insert(nodes.end(), {padNode, lowNode, add, masked, weighted});
        inputs.push_back(keep->ids);
    }
    const int context = g.onlyConsumer(probs, "MatMul");
    if (context < 0 || g.node(context).inputs != std::vector{probs, byHead[2]}) return std::nullopt;
    const int headsLast = g.onlyConsumer(out0(g.node(context)), "Transpose");
    if (headsLast < 0 || g.node(headsLast).intsAttr("perm") != Ints{0, 2, 1, 3}) return std::nullopt;
    const int merge = g.onlyConsumer(out0(g.node(headsLast)), "Reshape");
    const Ints* merged = merge < 0 ? nullptr : g.int64Initializer(in(g.node(merge), 1));
    if (!merged || *merged != Ints{0, 0, width}) return std::nullopt;
    nodes.insert(nodes.end(), {context, headsLast, merge});
    // The output projection: its Transpose of the weight feeds the MatMul that reads the merged heads.
    const int outMatMul = g.onlyConsumer(out0(g.node(merge)), "MatMul");
    const int outTranspose = outMatMul < 0 ? -1 : g.producer(in(g.node(outMatMul), 1));
    const std::optional<Projection> out = outTranspose < 0 ? std::nullopt : readProjection(g, outTranspose);
    if (!out || out->input != out0(g.node(merge)) || out->weightShape != Shape{width, width} ||
        out->bias.empty() != inProj->bias.empty())
        return std::nullopt;
    nodes.insert(nodes.end(), out->nodes.begin(), out->nodes.end());
    OnnxLayerImport r = layerFrom(g, "MultiHeadSelfAttention", nodes, inputs);
    r.params = {{"heads", heads}, {"masked", inputs.size() > 1}, {"use_bias", !inProj->bias.empty()}};
    r.weights["in_weight"] = inProj->weight;
    r.weights["out_weight"] = out->weight;
    if (!inProj->bias.empty()) {
        r.weights["in_bias"] = inProj->bias;
        r.weights["out_bias"] = out->bias;
    }
    return r;
}

}  // namespace

// ---- the table: one line per layer type ------------------------------------------------------------------------

const std::vector<OnnxLayerMapping>& onnxLayerTable() {
    static const std::vector<OnnxLayerMapping> table{
        {"Input", writeInput, readInput},
        {"Dense", writeDense, readDense},
        {"Flatten", writeFlatten, readFlatten},
        {"Reshape", writeReshape, readReshape},
        {"Add", writeAdd, readAdd},
        {"Concat", writeConcat, readConcat},
        {"Conv2D", writeConv2D, readConv2D},
        {"ConvTranspose2D", writeConvTranspose2D, readConvTranspose2D},
        {"Upsample2D", writeUpsample2D, readUpsample2D},
        {"MaxPool2D", writeMaxPool2D, readMaxPool2D},
        {"AvgPool2D", writeAvgPool2D, readAvgPool2D},
        {"GlobalAvgPool", writeGlobalAvgPool, readGlobalAvgPool},
        {"ReLU", writeReLU, readReLU},
        {"LeakyReLU", writeLeakyReLU, readLeakyReLU},
        {"GELU", writeGELU, readGELU},
        {"Sigmoid", writeSigmoid, readSigmoid},
        {"Tanh", writeTanh, readTanh},
        {"Clip", writeClip, readClip},
        {"HardSwish", writeHardSwish, readHardSwish},
        {"Softmax", writeSoftmax, readSoftmax},
        {"BatchNorm", writeBatchNorm, readBatchNorm},
        {"LayerNorm", writeLayerNorm, readLayerNorm},
        {"Dropout", writeDropout, readDropout},
        {"Embedding", writeEmbedding, readEmbedding},
        {"SequenceMeanPool", writeSequenceMeanPool, readSequenceMeanPool},
        {"PositionalEmbedding", writePositionalEmbedding, readPositionalEmbedding},
        {"Conv1D", writeConv1D, readConv1D},
        {"SequenceMaxPool", writeSequenceMaxPool, readSequenceMaxPool},
        {"MultiHeadSelfAttention", writeMultiHeadSelfAttention, readMultiHeadSelfAttention},
    };
    return table;
}

const OnnxLayerMapping* onnxLayerMapping(const std::string& type) {
    for (const OnnxLayerMapping& m : onnxLayerTable())
        if (m.type == type) return &m;
    return nullptr;
}

OnnxLayerImports importOnnxLayers(const OnnxModelInfo& info) {
    const OnnxGraphView g(info);
    OnnxLayerImports result;
    std::vector<bool> taken(static_cast<size_t>(g.nodeCount()), false);
    // The best read from `first`: the mapping whose layer takes the most nodes, none of them taken already.
    auto best = [&](int first) -> std::optional<OnnxLayerImport> {
        std::optional<OnnxLayerImport> pick;
        for (const OnnxLayerMapping& m : onnxLayerTable()) {
            // The graph's input is the input layer's to read, the nodes the others'.
            const LayerType* type = layerRegistry().find(m.type);
            if (!type || type->isGraphInput() != (first == OnnxGraphView::kGraphInput)) continue;
            std::optional<OnnxLayerImport> r = m.read(g, first);
            if (!r) continue;
            bool free = true;
            for (int n : r->nodes) free = free && !taken[static_cast<size_t>(n)];
            if (free && (!pick || r->nodes.size() > pick->nodes.size())) pick = std::move(r);
        }
        return pick;
    };
    for (int first = OnnxGraphView::kGraphInput; first < g.nodeCount(); ++first) {
        if (first >= 0 && taken[static_cast<size_t>(first)]) continue;
        std::optional<OnnxLayerImport> r = best(first);
        if (!r) {
            if (first >= 0) result.unread.push_back(first);
            continue;
        }
        for (int n : r->nodes) taken[static_cast<size_t>(n)] = true;
        result.layers.push_back(std::move(*r));
    }
    return result;
}

}  // namespace strata
