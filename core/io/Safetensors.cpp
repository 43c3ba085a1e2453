#include "core/io/Safetensors.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "core/io/Checksum.h"
#include "core/io/FileIo.h"
#include "core/io/Half.h"
#include "core/io/InputLimits.h"
#include "core/io/JsonInput.h"

static_assert(std::endian::native == std::endian::little, "the export formats assume a little-endian host");

namespace strata {

namespace {

using Json = nlohmann::json;

// The Hugging Face reference implementation refuses headers above 100 MB; so do we,
// which also bounds what a lying length field can make us allocate.
constexpr uint64_t kMaxHeaderBytes = 100ull * 1024 * 1024;

bool parseDTypeName(const std::string& s, DType& out) {
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::U8}) {
        if (s == safetensorsDTypeName(t)) {
            out = t;
            return true;
        }
    }
    return false;
}

}  // namespace

const char* safetensorsDTypeName(DType t) {
    switch (t) {
        case DType::F32: return "F32";
        case DType::F16: return "F16";
        case DType::BF16: return "BF16";
        case DType::I32: return "I32";
        case DType::U8: return "U8";
    }
    return "?";
}

const TensorRecord* SafetensorsContents::find(const std::string& name) const {
    for (const TensorRecord& t : tensors)
        if (t.name == name) return &t;
    return nullptr;
}

TensorRecord makeF32Record(const std::string& name, const Shape& shape, const std::vector<float>& values) {
    if (static_cast<int64_t>(values.size()) != shape.numel())
        throw std::runtime_error("tensor '" + name + "': " + std::to_string(values.size()) +
                                 " values do not fill shape " + shape.toString());
    TensorRecord r;
    r.name = name;
    r.dtype = DType::F32;
    r.shape = shape;
    r.data.resize(values.size() * sizeof(float));
    if (!values.empty()) std::memcpy(r.data.data(), values.data(), r.data.size());
    return r;
}

std::vector<float> recordToFloats(const TensorRecord& record) {
    const size_t n = static_cast<size_t>(record.shape.numel());
    if (record.data.size() != n * dtypeSize(record.dtype))
        throw std::runtime_error("tensor '" + record.name + "': byte count does not match its shape");
    std::vector<float> out(n);
    switch (record.dtype) {
        case DType::F32:
            if (n) std::memcpy(out.data(), record.data.data(), n * sizeof(float));
            return out;
        case DType::F16:
        case DType::BF16:
            for (size_t i = 0; i < n; ++i) {
                uint16_t h;
                std::memcpy(&h, record.data.data() + 2 * i, 2);
                out[i] = record.dtype == DType::F16 ? halfToFloat(h) : bfloat16ToFloat(h);
            }
            return out;
        default:
            throw std::runtime_error("tensor '" + record.name + "' has dtype " + safetensorsDTypeName(record.dtype) +
                                     ", expected a floating-point type");
    }
}

void writeSafetensors(const std::string& path, const std::vector<TensorRecord>& tensors,
                      const std::map<std::string, std::string>& metadata) {
    Json header = Json::object();
    uint64_t offset = 0;
    for (const TensorRecord& t : tensors) {
        if (t.name == "__metadata__") throw std::runtime_error("tensor name '__metadata__' is reserved");
        if (header.contains(t.name)) throw std::runtime_error("duplicate tensor name '" + t.name + "'");
        for (int64_t d : t.shape.dims())
            if (d < 0) throw std::runtime_error("tensor '" + t.name + "' has a negative dimension");
        const uint64_t expected = static_cast<uint64_t>(t.shape.numel()) * dtypeSize(t.dtype);
        if (t.data.size() != expected)
            throw std::runtime_error("tensor '" + t.name + "': " + std::to_string(t.data.size()) + " bytes, shape " +
                                     t.shape.toString() + " needs " + std::to_string(expected));
        header[t.name] = {{"dtype", safetensorsDTypeName(t.dtype)},
                          {"shape", t.shape.dims()},
                          {"data_offsets", {offset, offset + t.data.size()}}};
        offset += t.data.size();
    }
    // Every file carries its tensors' checksums (recomputed here, whatever the caller passed under the key).
    Json sums = Json::object();
    for (const TensorRecord& t : tensors) sums[t.name] = checksumHex(tensorChecksum(t.data.data(), t.data.size()));
    Json meta = Json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    meta[kChecksumMetadataKey] = sums.dump();
    header["__metadata__"] = meta;
    std::string text = header.dump();
    while ((8 + text.size()) % 8 != 0) text.push_back(' ');

    writeFileAtomically(path, [&](std::ostream& out) {
        const uint64_t n = text.size();
        out.write(reinterpret_cast<const char*>(&n), 8);
        out.write(text.data(), static_cast<std::streamsize>(text.size()));
        for (const TensorRecord& t : tensors)
            out.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size()));
    });
}

SafetensorsContents readSafetensors(const std::string& path) {
    const std::vector<uint8_t> bytes = readWholeFile(path);
    const uint64_t fileSize = bytes.size();
    if (fileSize < 8)
        throw FormatError(path, 0,
                          "file is " + std::to_string(fileSize) + " bytes, shorter than the 8-byte header length");
    uint64_t headerLen;
    std::memcpy(&headerLen, bytes.data(), 8);
    if (headerLen > kMaxHeaderBytes)
        throw FormatError(path, 0, "header length " + std::to_string(headerLen) + " exceeds the 100 MB limit");
    if (headerLen > fileSize - 8)
        throw FormatError(path, 0,
                          "header length " + std::to_string(headerLen) + " runs past the end of the " +
                              std::to_string(fileSize) + "-byte file");
    const uint64_t dataStart = 8 + headerLen;
    const uint64_t dataSize = fileSize - dataStart;

    Json header;
    try {
        header = parseJson<Json>({reinterpret_cast<const char*>(bytes.data()) + 8, headerLen}, path, {.baseOffset = 8});
    } catch (const Json::parse_error& e) {
        // e.byte is 1-based within the header text.
        const int64_t at = 8 + static_cast<int64_t>(e.byte > 0 ? e.byte - 1 : 0);
        throw FormatError(path, at, std::string("header is not valid JSON: ") + e.what());
    }
    if (!header.is_object()) throw FormatError(path, 8, "header is not a JSON object");

    SafetensorsContents contents;
    struct Span {
        uint64_t begin, end;
        size_t index;
    };
    std::vector<Span> spans;
    for (auto it = header.begin(); it != header.end(); ++it) {
        const std::string& name = it.key();
        const Json& entry = it.value();
        if (name == "__metadata__") {
            if (!entry.is_object()) throw FormatError(path, 8, "__metadata__ is not a JSON object");
            for (auto m = entry.begin(); m != entry.end(); ++m) {
                if (!m.value().is_string())
                    throw FormatError(path, 8, "__metadata__ value '" + m.key() + "' is not a string");
                contents.metadata[m.key()] = m.value().get<std::string>();
            }
            continue;
        }
        const std::string where = "tensor '" + name + "': ";
        if (!entry.is_object()) throw FormatError(path, 8, where + "entry is not a JSON object");
        for (const char* key : {"dtype", "shape", "data_offsets"})
            if (!entry.contains(key)) throw FormatError(path, 8, where + "missing \"" + key + "\"");
        if (!entry["dtype"].is_string()) throw FormatError(path, 8, where + "dtype is not a string");
        TensorRecord rec;
        rec.name = name;
        const std::string dtype = entry["dtype"].get<std::string>();
        if (!parseDTypeName(dtype, rec.dtype))
            throw FormatError(path, 8, where + "unknown dtype '" + dtype + "' (expected F32, F16, BF16, I32 or U8)");
        const Json& shape = entry["shape"];
        if (!shape.is_array()) throw FormatError(path, 8, where + "shape is not an array");
        std::vector<int64_t> dims;
        // Bound the element count so numel*size cannot overflow before we compare it with the file.
        uint64_t numel = 1;
        bool huge = false;
        for (const Json& d : shape) {
            if (!d.is_number_unsigned()) throw FormatError(path, 8, where + "shape holds a non-negative-integer entry");
            const uint64_t v = d.get<uint64_t>();
            if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))  // as int64_t, it would print negative
                throw FormatError(path, 8, where + "dimension " + std::to_string(v) + " is larger than 2^63 - 1");
            if (v != 0 && numel > std::numeric_limits<uint64_t>::max() / 8 / v) huge = true;
            numel = huge ? numel : numel * v;
            dims.push_back(static_cast<int64_t>(v));
        }
        const Json& offs = entry["data_offsets"];
        if (!offs.is_array() || offs.size() != 2 || !offs[0].is_number_unsigned() || !offs[1].is_number_unsigned())
            throw FormatError(path, 8, where + "data_offsets is not a pair of non-negative integers");
        const uint64_t begin = offs[0].get<uint64_t>(), end = offs[1].get<uint64_t>();
        if (end < begin)
            throw FormatError(path, static_cast<int64_t>(dataStart + begin),
                              where + "data_offsets end before they begin");
        if (end > dataSize)
            throw FormatError(path, static_cast<int64_t>(dataStart + std::min(begin, dataSize)),
                              where + "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                                  ") run past the " + std::to_string(dataSize) + "-byte data section");
        const uint64_t expected = numel * dtypeSize(rec.dtype);
        if (huge || end - begin != expected)
            throw FormatError(path, static_cast<int64_t>(dataStart + begin),
                              where + std::to_string(end - begin) + " bytes of data, but " + dtype + " shape " +
                                  Shape(dims).toString() + " needs " + (huge ? "more" : std::to_string(expected)));
        rec.shape = Shape(std::move(dims));
        spans.push_back({begin, end, contents.tensors.size()});
        contents.tensors.push_back(std::move(rec));
    }

    std::sort(spans.begin(), spans.end(),
              [](const Span& a, const Span& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
    uint64_t cursor = 0;
    for (const Span& s : spans) {
        const std::string& name = contents.tensors[s.index].name;
        if (s.begin < cursor)
            throw FormatError(path, static_cast<int64_t>(dataStart + s.begin),
                              "tensor '" + name + "' overlaps the tensor before it");
        if (s.begin > cursor)
            throw FormatError(
                path, static_cast<int64_t>(dataStart + cursor),
                "unused gap of " + std::to_string(s.begin - cursor) + " bytes before tensor '" + name + "'");
        cursor = s.end;
    }
    if (cursor != dataSize)
        throw FormatError(path, static_cast<int64_t>(dataStart + cursor),
                          std::to_string(dataSize - cursor) + " trailing bytes after the last tensor");

    // Checksums, when the writer stored them (Strata's files since issue 18): every tensor must match.
    Json sums;
    if (auto it = contents.metadata.find(kChecksumMetadataKey); it != contents.metadata.end()) {
        sums = tryParseJson<Json>(it->second);
        if (!sums.is_object())
            throw FormatError(path, 8, std::string("__metadata__ '") + kChecksumMetadataKey + "' is not a JSON object");
        contents.metadata.erase(it);  // container detail, not the caller's metadata
    }
    std::vector<TensorRecord> ordered;
    ordered.reserve(spans.size());
    for (const Span& s : spans) {
        TensorRecord& rec = contents.tensors[s.index];
        rec.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(dataStart + s.begin),
                        bytes.begin() + static_cast<std::ptrdiff_t>(dataStart + s.end));
        if (!sums.is_null()) {
            const std::string actual = checksumHex(tensorChecksum(rec.data.data(), rec.data.size()));
            if (!sums.contains(rec.name) || !sums[rec.name].is_string())
                throw FormatError(path, 8, "tensor '" + rec.name + "' has no checksum in " + kChecksumMetadataKey);
            if (sums[rec.name].get<std::string>() != actual)
                throw FormatError(path, static_cast<int64_t>(dataStart + s.begin),
                                  "tensor '" + rec.name + "': checksum mismatch (stored XXH3 " +
                                      cutForMessage(sums[rec.name].get<std::string>(), 32) + ", the data's " + actual +
                                      "): the file is damaged");
        }
        ordered.push_back(std::move(rec));
    }
    contents.tensors = std::move(ordered);
    return contents;
}

}  // namespace strata
