// Safetensors: reader and writer for the Hugging Face safetensors layout.
//
// Byte layout:
//   [0, 8)          u64 little-endian N: length of the JSON header in bytes
//   [8, 8+N)        JSON object, padded with spaces so 8+N is a multiple of 8:
//                     { "<tensor name>": {"dtype": "F32"|"F16"|"BF16"|"I32"|"U8",
//                                         "shape": [d0, d1, ...],
//                                         "data_offsets": [begin, end]},
//                       ...,
//                       "__metadata__": {"<key>": "<string value>", ...} }
//   [8+N, EOF)      tensor data; offsets are relative to 8+N, little-endian,
//                   row-major, and together cover the data section exactly
//                   (no overlap, no holes).
// The reader checks every one of these rules and throws FormatError (file, byte
// offset, problem) for any violation; it never trusts a length it has not
// compared against the file size.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/io/FormatError.h"
#include "core/tensor/DType.h"
#include "core/tensor/Shape.h"

namespace strata {

// One named tensor as host bytes (little-endian, row-major).
struct TensorRecord {
    std::string name;
    DType dtype = DType::F32;
    Shape shape;
    std::vector<uint8_t> data;
};

// Writes "<path>.tmp-<pid>" then renames it over `path`, so readers never see a half-written file.
// Throws std::runtime_error when a record's byte count does not match its shape, or on I/O failure.
void writeSafetensors(const std::string& path, const std::vector<TensorRecord>& tensors,
                      const std::map<std::string, std::string>& metadata);

struct SafetensorsContents {
    std::vector<TensorRecord> tensors;  // in data-offset order
    std::map<std::string, std::string> metadata;
    // nullptr when absent.
    const TensorRecord* find(const std::string& name) const;
};

SafetensorsContents readSafetensors(const std::string& path);

// Helpers shared by the export formats.
const char* safetensorsDTypeName(DType t);  // "F32", "F16", ...
TensorRecord makeF32Record(const std::string& name, const Shape& shape, const std::vector<float>& values);
// Values of an F32 record (throws std::runtime_error naming the tensor when it is another dtype).
std::vector<float> recordToFloats(const TensorRecord& record);

}  // namespace strata
