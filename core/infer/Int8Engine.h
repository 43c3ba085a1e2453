// Int8Engine: an int8 ONNX export (Quantize.h's QDQ model) run in integers on the CPU, through oneDNN's VNNI
// primitives (core/backend/CpuInt8). It is built from the same ExportModel and activation quantization the
// writer uses (loadModelFile gives both for an int8 file: the weights dequantized, which requantize exactly to the
// file's int8 values; the activations' scales and zero points), so it runs the model Strata knows, not a general
// ONNX interpreter. Activations stay uint8 on their tensor's grid between layers, channels innermost (NHWC):
//   Conv2D, Dense: u8 x s8 with int32 accumulation and the int32 bias, one scale per output channel
//     (input scale x weight scale / output scale), the source's zero point applied by oneDNN, the result
//     rounded onto the output's uint8 grid (or float32 for the logits, which the file leaves unquantized);
//   ReLU: on the grid, max(q, zero point) requantized; when its producer took the ReLU's range (Quantize.h) the
//     producer's clamp at 0 already did it, and the ReLU costs nothing; LeakyReLU, GELU, Sigmoid, Tanh and
//     HardSwish: a 256-entry table from the input's grid to the output's, of the CPU backend's own activation;
//   MaxPool2D: u8 max pooling (output on the input's grid; 2x2 windows in Strata's own AVX-512 loop, others in
//     oneDNN's), Flatten, Reshape, Dropout: the values as they are (a Dense after a Flatten of NHWC values takes
//     its weight columns in NHWC order);
//   BatchNorm (float32 in the file, between a DequantizeLinear and a QuantizeLinear; the export folds those after
//     a Conv2D or Dense, so only the others remain): a 256-entry table per channel from the input's grid to the
//     output's; AvgPool2D, GlobalAvgPool and Add: dequantized, computed in float32 and requantized, where the QDQ
//     graph has them (Add 16 values at a time, the global pooling's sums in int32 vectors: cpu::addOnGrids,
//     cpu::channelSums).
//   Conv1D over a [length, channels] sequence (channels last already): an int8 convolution of height 1, its
//     [kernel, filters, channels] weight with one scale per filter;
//   Dense over a sequence ([T, D]): the same int8 matmul over every position's row; MultiHeadSelfAttention's
//     Q, K, V projection (int8 in the file after a quantized input) the same way, into the layer's own buffer,
//     before the rest of the layer runs as a float island (Layer.h's ProjectingLayer).
// Every other node (LayerNorm, attention, Embedding, positional embeddings, sequence pooling, Softmax, Concat, ...),
// a node above whose input is float32 where its integer path needs uint8 (the ids an Embedding reads, a Dense
// after a float32 tensor, whose weights the file then keeps float32), and a product whose weight the file holds
// in float32 (its values are not int8 times one scale per channel, checked at construction), is a float island: its own
// Layer (LayerType::create) in float32 on a CPU backend, on its inputs dequantized (NCHW), with the file's weights, its
// output rounded onto its grid where the file quantizes it: what the QDQ graph computes between its
// DequantizeLinears and its QuantizeLinear, and what the simulation runs (the same layer on the same values, so
// the same result). Nothing is refused for its layer type; a node the file lacks weights for is, by name.
// simulateInt8 (Quantize.h) is the reference: the uint8 values agree exactly except where float rounding in the
// simulation lands on the other side of a rounding boundary (one step).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/export/ExportModel.h"

namespace strata {

class Int8Engine {
public:
    // `activations` as calibrateInt8 gives them or an int8 file holds them (ExportModel::int8Activations).
    // `threads`: oneDNN's OpenMP threads (0: all). Throws std::runtime_error: on a CPU without AVX512-VNNI
    // (cpu::int8Unavailable's reason), and naming the node for a layer it cannot run in int8.
    Int8Engine(const ExportModel& model, const std::map<std::string, ActivationQuant>& activations, int threads = 0);
    ~Int8Engine();
    Int8Engine(const Int8Engine&) = delete;
    Int8Engine& operator=(const Int8Engine&) = delete;

    const Shape& inputShape() const { return m_inputShape; }
    const Shape& outputShape() const { return m_outputShape; }
    // Outputs (float32, count * outputShape) of `count` normalized samples, `batchSize` at a time: what
    // simulateInt8 computes, in integers.
    std::vector<float> run(const float* inputs, int64_t count, int batchSize = 256);
    // How each node runs, one line each ("conv1: int8 convolution (jit_int8:avx512_core_vnni)"); oneDNN's
    // implementations are known after the first run.
    std::vector<std::string> plan() const;
    // The nodes that run as float islands, in graph order (empty: every layer in integers or as a table).
    const std::vector<std::string>& floatIslands() const;

    // A node's values from the last batch run, dequantized (or float32), NCHW: for tests against simulateInt8.
    // Throws std::invalid_argument for a node the engine does not know.
    std::vector<float> nodeValues(const std::string& node) const;

    struct Impl;

private:
    std::unique_ptr<Impl> m_impl;
    Shape m_inputShape, m_outputShape;
};

}  // namespace strata
