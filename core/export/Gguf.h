// GGUF v3: reader and writer for the file format of ggml / llama.cpp, used by
// `strata-train export --format gguf`.
//
// Byte layout (all integers little-endian; "string" = u64 byte length + UTF-8 bytes, no terminator):
//   u32      magic        0x46554747, the bytes "GGUF"
//   u32      version      3
//   u64      tensor_count
//   u64      kv_count
//   kv_count times:
//     string key          e.g. "general.architecture"
//     u32    value_type   0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool (1 byte, 0 or 1),
//                         8 string, 9 array, 10 u64, 11 i64, 12 f64
//     value               the scalar or string; an array is u32 element type + u64 count + elements
//                         (arrays of arrays are allowed by the format; we write none)
//   tensor_count times (tensor infos):
//     string name
//     u32    n_dims       1..4
//     u64    dims[n_dims] innermost first (ggml "ne"): a Strata shape [out, in] is written as {in, out}
//     u32    type         0 F32, 1 F16, 2 Q4_0, 8 Q8_0
//     u64    offset       from the start of the data section; a multiple of the alignment
//   padding  zero bytes up to a multiple of the alignment (u32 key "general.alignment", default 32)
//   data     each tensor at its offset, padded with zeros to the alignment
//
// Q8_0 stores blocks of 32 values along the innermost dimension: an f16 scale d
// followed by 32 int8 q, value = d * q, with d = max|x| / 127. A tensor can be
// Q8_0 only when its innermost dimension is a multiple of 32.
//
// Q4_0 (ggml's block_q4_0, 18 bytes per 32 values): an f16 scale d followed by 16 bytes of 4-bit codes,
// byte j holding value j in its low nibble and value j + 16 in its high one; value = d * (code - 8), with
// d = m / -8 where m is the block's value of largest magnitude (so m itself is code 0) and code =
// min(15, trunc(x / d + 8.5)), as ggml's quantize_row_q4_0_ref computes it. Same block rule as Q8_0.
//
// Strata writes these keys: general.architecture = "strata", general.name,
// general.alignment, strata.project (the project JSON text), strata.class_labels
// (string array), for text models the tokenizer in llama.cpp's keys (tokenizer.ggml.model = "strata-word" or
// "strata-char": Strata's own word or character tokenizer, see core/data/TextTokenizer.cpp;
// tokenizer.ggml.tokens, the vocabulary by id; tokenizer.ggml.padding_token_id = 0 and
// unknown_token_id = 1, u32; files of earlier versions held the vocabulary as strata.vocabulary, still read),
// strata.normalization.{mode (string), scale, mean, std (f32)}, and for per-feature
// standardization (CSV data) strata.normalization.feature_mean and .feature_std (f32
// arrays, one entry per input value: x' = (x - feature_mean[j]) / feature_std[j]).
//
// The reader checks every field against the file size before using it and
// throws FormatError naming the file and byte offset.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/io/FormatError.h"
#include "core/tensor/Shape.h"

namespace strata {

enum class GgufValueType : uint32_t {
    UInt8 = 0,
    Int8 = 1,
    UInt16 = 2,
    Int16 = 3,
    UInt32 = 4,
    Int32 = 5,
    Float32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    UInt64 = 10,
    Int64 = 11,
    Float64 = 12,
};

enum class GgufTensorType : uint32_t { F32 = 0, F16 = 1, Q4_0 = 2, Q8_0 = 8 };

const char* ggufTensorTypeName(GgufTensorType t);
constexpr int kQ8BlockSize = 32;
constexpr uint32_t kGgufDefaultAlignment = 32;

// One metadata value. Integers of every width live in `i` or `u`, floats in `f`.
struct GgufValue {
    GgufValueType type = GgufValueType::UInt32;
    GgufValueType arrayType = GgufValueType::UInt32;  // element type when type == Array
    uint64_t u = 0;
    int64_t i = 0;
    double f = 0;
    bool b = false;
    std::string s;
    std::vector<GgufValue> array;
};

struct GgufTensor {
    std::string name;
    GgufTensorType type = GgufTensorType::F32;
    Shape shape;  // Strata order: outermost first
    std::vector<uint8_t> data;
};

class GgufFile {
public:
    // Setters replace a key's value and keep its first position.
    void setString(const std::string& key, const std::string& value);
    void setUInt32(const std::string& key, uint32_t value);
    void setFloat32(const std::string& key, float value);
    void setBool(const std::string& key, bool value);
    void setStringArray(const std::string& key, const std::vector<std::string>& values);
    void setFloat32Array(const std::string& key, const std::vector<float>& values);
    void setValue(const std::string& key, const GgufValue& value);

    // nullptr when absent.
    const GgufValue* find(const std::string& key) const;
    // Typed getters: throw std::runtime_error naming the key when it is absent or of another type.
    std::string getString(const std::string& key) const;
    uint32_t getUInt32(const std::string& key) const;
    float getFloat32(const std::string& key) const;
    std::vector<std::string> getStringArray(const std::string& key) const;
    std::vector<float> getFloat32Array(const std::string& key) const;
    const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return m_kv; }

    // Adds float values stored as `type` (quantized or converted here). Q8_0 and Q4_0 need an innermost
    // dimension that is a multiple of 32 (std::invalid_argument otherwise; see q8Compatible).
    void addTensor(const std::string& name, const Shape& shape, const std::vector<float>& values,
                   GgufTensorType type = GgufTensorType::F32);
    void addRawTensor(GgufTensor tensor);  // data already encoded; size checked
    const std::vector<GgufTensor>& tensors() const { return m_tensors; }
    const GgufTensor* findTensor(const std::string& name) const;
    // Values of a tensor as float (dequantizing F16, Q8_0 and Q4_0). Throws naming a missing tensor.
    std::vector<float> tensorFloats(const std::string& name) const;

    uint32_t alignment() const;

private:
    std::vector<std::pair<std::string, GgufValue>> m_kv;
    std::vector<GgufTensor> m_tensors;
};

// Every tensor type the reader and writer handle (a new type added here is walked by test_export_formats).
const std::vector<GgufTensorType>& ggufTensorTypes();
// How a type stores values: blocks of blockValues values in blockBytes bytes (F32: 1 value in 4 bytes; Q4_0: 32
// values in 18). Sizes come from this, never from a byte per element.
struct GgufTypeLayout {
    uint64_t blockValues = 1, blockBytes = 4;
};
GgufTypeLayout ggufTypeLayout(GgufTensorType type);
// True when the innermost dimension is a multiple of 32: the rule of both block types, Q8_0 and Q4_0.
bool q8Compatible(const Shape& shape);
// Encoded size of a tensor of this type and shape.
uint64_t ggufTensorBytes(GgufTensorType type, const Shape& shape);
std::vector<uint8_t> quantizeQ8_0(const std::vector<float>& values);  // size a multiple of 32
std::vector<float> dequantizeQ8_0(const uint8_t* data, size_t count);
std::vector<uint8_t> quantizeQ4_0(const std::vector<float>& values);  // size a multiple of 32
std::vector<float> dequantizeQ4_0(const uint8_t* data, size_t count);

// Writes "<path>.tmp-<pid>" then renames it over `path`.
// Sets "strata.xxh3_64" (Checksum.h) to the XXH3 of every tensor's bytes, as a JSON object string; call it
// after the last addTensor. readGguf verifies the key when a file has it, naming a mismatching tensor.
void setGgufChecksums(GgufFile& file);
void writeGguf(const std::string& path, const GgufFile& file);
GgufFile readGguf(const std::string& path);

}  // namespace strata
