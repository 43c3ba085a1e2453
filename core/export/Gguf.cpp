#include "core/export/Gguf.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "core/io/Checksum.h"
#include "core/io/FileIo.h"
#include "core/io/Half.h"
#include "core/io/InputLimits.h"
#include "core/io/JsonInput.h"

namespace strata {

using Json = nlohmann::json;

namespace {

constexpr uint32_t kMagic = 0x46554747u;  // "GGUF" read as a little-endian u32
constexpr uint32_t kVersion = 3;
constexpr int kMaxDims = 4;
constexpr size_t kQ8BlockBytes = 2 + kQ8BlockSize;
constexpr size_t kQ4BlockBytes = 2 + kQ8BlockSize / 2;
// Nesting limit for arrays of arrays, so a hostile file cannot recurse without bound.
constexpr int kMaxArrayDepth = 8;

bool knownValueType(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::Float64); }

size_t scalarSize(GgufValueType t) {
    switch (t) {
        case GgufValueType::UInt8:
        case GgufValueType::Int8:
        case GgufValueType::Bool: return 1;
        case GgufValueType::UInt16:
        case GgufValueType::Int16: return 2;
        case GgufValueType::UInt32:
        case GgufValueType::Int32:
        case GgufValueType::Float32: return 4;
        case GgufValueType::UInt64:
        case GgufValueType::Int64:
        case GgufValueType::Float64: return 8;
        default: return 0;  // string, array: variable
    }
}

const char* valueTypeName(GgufValueType t) {
    static const char* names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                  "bool", "string", "array", "u64", "i64", "f64"};
    const auto i = static_cast<uint32_t>(t);
    return i < 13 ? names[i] : "?";
}

uint64_t alignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// ---- writing ----

class Writer {
public:
    std::vector<uint8_t> bytes;
    template <typename T>
    void pod(T v) {
        const auto* p = reinterpret_cast<const uint8_t*>(&v);
        bytes.insert(bytes.end(), p, p + sizeof(T));
    }
    void str(const std::string& s) {
        pod<uint64_t>(s.size());
        bytes.insert(bytes.end(), s.begin(), s.end());
    }
    void value(const GgufValue& v, GgufValueType type) {
        switch (type) {
            case GgufValueType::UInt8: pod<uint8_t>(static_cast<uint8_t>(v.u)); break;
            case GgufValueType::Int8: pod<int8_t>(static_cast<int8_t>(v.i)); break;
            case GgufValueType::UInt16: pod<uint16_t>(static_cast<uint16_t>(v.u)); break;
            case GgufValueType::Int16: pod<int16_t>(static_cast<int16_t>(v.i)); break;
            case GgufValueType::UInt32: pod<uint32_t>(static_cast<uint32_t>(v.u)); break;
            case GgufValueType::Int32: pod<int32_t>(static_cast<int32_t>(v.i)); break;
            case GgufValueType::Float32: pod<float>(static_cast<float>(v.f)); break;
            case GgufValueType::Bool: pod<uint8_t>(v.b ? 1 : 0); break;
            case GgufValueType::String: str(v.s); break;
            case GgufValueType::UInt64: pod<uint64_t>(v.u); break;
            case GgufValueType::Int64: pod<int64_t>(v.i); break;
            case GgufValueType::Float64: pod<double>(v.f); break;
            case GgufValueType::Array:
                pod<uint32_t>(static_cast<uint32_t>(v.arrayType));
                pod<uint64_t>(v.array.size());
                for (const GgufValue& e : v.array) value(e, v.arrayType);
                break;
        }
    }
    void padTo(uint64_t alignment) {
        while (bytes.size() % alignment) bytes.push_back(0);
    }
};

// ---- reading ----

class Reader {
public:
    Reader(const std::string& path, const std::vector<uint8_t>& bytes) : m_path(path), m_bytes(bytes) {}

    uint64_t pos() const { return m_pos; }
    uint64_t remaining() const { return m_bytes.size() - m_pos; }
    [[noreturn]] void fail(uint64_t at, const std::string& what) const {
        throw FormatError(m_path, static_cast<int64_t>(at), what);
    }
    void need(uint64_t n, const char* what) const {
        if (n > remaining())
            fail(m_pos, std::string("file ends while reading ") + what + " (" + std::to_string(n) + " bytes needed, " +
                            std::to_string(remaining()) + " left)");
    }
    template <typename T>
    T pod(const char* what) {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, m_bytes.data() + m_pos, sizeof(T));
        m_pos += sizeof(T);
        return v;
    }
    std::string str(const char* what) {
        const uint64_t at = m_pos;
        const uint64_t n = pod<uint64_t>(what);
        if (n > remaining())
            fail(at, std::string(what) + ": string length " + std::to_string(n) + " runs past the end of the file");
        std::string s(reinterpret_cast<const char*>(m_bytes.data() + m_pos), n);
        m_pos += n;
        return s;
    }
    GgufValue value(GgufValueType type, const std::string& key, int depth) {
        GgufValue v;
        v.type = type;
        const char* what = "a metadata value";
        switch (type) {
            case GgufValueType::UInt8: v.u = pod<uint8_t>(what); break;
            case GgufValueType::Int8: {
                // Two's complement by hand: the byte is a number, not a character.
                const uint8_t byte = pod<uint8_t>(what);
                v.i = byte < 128 ? int64_t{byte} : int64_t{byte} - 256;
                break;
            }
            case GgufValueType::UInt16: v.u = pod<uint16_t>(what); break;
            case GgufValueType::Int16: v.i = pod<int16_t>(what); break;
            case GgufValueType::UInt32: v.u = pod<uint32_t>(what); break;
            case GgufValueType::Int32: v.i = pod<int32_t>(what); break;
            case GgufValueType::Float32: v.f = pod<float>(what); break;
            case GgufValueType::UInt64: v.u = pod<uint64_t>(what); break;
            case GgufValueType::Int64: v.i = pod<int64_t>(what); break;
            case GgufValueType::Float64: v.f = pod<double>(what); break;
            case GgufValueType::Bool: {
                const uint64_t at = m_pos;
                const uint8_t b = pod<uint8_t>(what);
                if (b > 1) fail(at, "key '" + key + "': bool value " + std::to_string(b) + " is neither 0 nor 1");
                v.b = b == 1;
                break;
            }
            case GgufValueType::String: v.s = str(what); break;
            case GgufValueType::Array: {
                if (depth >= kMaxArrayDepth) fail(m_pos, "key '" + key + "': arrays nested too deeply");
                const uint64_t at = m_pos;
                const uint32_t et = pod<uint32_t>("an array element type");
                if (!knownValueType(et))
                    fail(at, "key '" + key + "': unknown array element type " + std::to_string(et));
                v.arrayType = static_cast<GgufValueType>(et);
                const uint64_t countAt = m_pos;
                const uint64_t count = pod<uint64_t>("an array length");
                // Every element takes at least one byte (strings at least eight): bound the count by the file.
                const uint64_t minSize = v.arrayType == GgufValueType::String  ? 8
                                         : v.arrayType == GgufValueType::Array ? 12
                                                                               : scalarSize(v.arrayType);
                if (count > remaining() / minSize)
                    fail(countAt, "key '" + key + "': array length " + std::to_string(count) +
                                      " cannot fit in the rest of the file");
                v.array.reserve(count);
                for (uint64_t k = 0; k < count; ++k) v.array.push_back(value(v.arrayType, key, depth + 1));
                break;
            }
        }
        return v;
    }

private:
    const std::string& m_path;
    const std::vector<uint8_t>& m_bytes;
    uint64_t m_pos = 0;
};

std::vector<uint8_t> encode(const std::vector<float>& values, GgufTensorType type) {
    std::vector<uint8_t> out;
    switch (type) {
        case GgufTensorType::F32:
            out.resize(values.size() * 4);
            if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
            break;
        case GgufTensorType::F16:
            out.resize(values.size() * 2);
            for (size_t i = 0; i < values.size(); ++i) {
                const uint16_t h = floatToHalf(values[i]);
                std::memcpy(out.data() + 2 * i, &h, 2);
            }
            break;
        case GgufTensorType::Q8_0: out = quantizeQ8_0(values); break;
        case GgufTensorType::Q4_0: out = quantizeQ4_0(values); break;
    }
    return out;
}

}  // namespace

const char* ggufTensorTypeName(GgufTensorType t) {
    switch (t) {
        case GgufTensorType::F32: return "F32";
        case GgufTensorType::F16: return "F16";
        case GgufTensorType::Q8_0: return "Q8_0";
        case GgufTensorType::Q4_0: return "Q4_0";
    }
    return "?";
}

bool q8Compatible(const Shape& shape) { return shape.rank() >= 1 && shape[shape.rank() - 1] % kQ8BlockSize == 0; }

const std::vector<GgufTensorType>& ggufTensorTypes() {
    static const std::vector<GgufTensorType> types{GgufTensorType::F32, GgufTensorType::F16, GgufTensorType::Q4_0,
                                                   GgufTensorType::Q8_0};
    return types;
}

GgufTypeLayout ggufTypeLayout(GgufTensorType type) {
    switch (type) {
        case GgufTensorType::F32: return {1, 4};
        case GgufTensorType::F16: return {1, 2};
        case GgufTensorType::Q8_0: return {kQ8BlockSize, kQ8BlockBytes};
        case GgufTensorType::Q4_0: return {kQ8BlockSize, kQ4BlockBytes};
    }
    throw std::invalid_argument("unknown GGUF tensor type " + std::to_string(static_cast<uint32_t>(type)));
}

uint64_t ggufTensorBytes(GgufTensorType type, const Shape& shape) {
    const GgufTypeLayout layout = ggufTypeLayout(type);
    return static_cast<uint64_t>(shape.numel()) / layout.blockValues * layout.blockBytes;
}

std::vector<uint8_t> quantizeQ8_0(const std::vector<float>& values) {
    if (values.size() % kQ8BlockSize != 0)
        throw std::invalid_argument("Q8_0 needs a multiple of 32 values, got " + std::to_string(values.size()));
    const size_t blocks = values.size() / kQ8BlockSize;
    std::vector<uint8_t> out(blocks * kQ8BlockBytes);
    for (size_t b = 0; b < blocks; ++b) {
        const float* x = values.data() + b * kQ8BlockSize;
        float amax = 0.f;
        for (int j = 0; j < kQ8BlockSize; ++j) amax = std::max(amax, std::fabs(x[j]));
        // The scale is stored as f16; quantize against the stored (rounded) scale so that
        // dequantization reproduces exactly what was intended.
        const uint16_t dBits = floatToHalf(amax / 127.f);
        const float d = halfToFloat(dBits);
        const float inv = d != 0.f ? 1.f / d : 0.f;
        uint8_t* blk = out.data() + b * kQ8BlockBytes;
        std::memcpy(blk, &dBits, 2);
        for (int j = 0; j < kQ8BlockSize; ++j) {
            const float q = std::nearbyint(x[j] * inv);
            blk[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(q, -127.f, 127.f)));
        }
    }
    return out;
}

std::vector<float> dequantizeQ8_0(const uint8_t* data, size_t count) {
    if (count % kQ8BlockSize != 0)
        throw std::invalid_argument("Q8_0 needs a multiple of 32 values, got " + std::to_string(count));
    std::vector<float> out(count);
    for (size_t b = 0; b < count / kQ8BlockSize; ++b) {
        const uint8_t* blk = data + b * kQ8BlockBytes;
        uint16_t dBits;
        std::memcpy(&dBits, blk, 2);
        const float d = halfToFloat(dBits);
        for (int j = 0; j < kQ8BlockSize; ++j)
            out[b * kQ8BlockSize + j] = d * static_cast<float>(static_cast<int8_t>(blk[2 + j]));
    }
    return out;
}

std::vector<uint8_t> quantizeQ4_0(const std::vector<float>& values) {
    if (values.size() % kQ8BlockSize != 0)
        throw std::invalid_argument("Q4_0 needs a multiple of 32 values, got " + std::to_string(values.size()));
    constexpr int kHalf = kQ8BlockSize / 2;
    const size_t blocks = values.size() / kQ8BlockSize;
    std::vector<uint8_t> out(blocks * kQ4BlockBytes);
    for (size_t b = 0; b < blocks; ++b) {
        const float* x = values.data() + b * kQ8BlockSize;
        // ggml's reference: the signed value of largest magnitude maps to code 0, the scale from it unrounded.
        float amax = 0.f, m = 0.f;
        for (int j = 0; j < kQ8BlockSize; ++j)
            if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), m = x[j];
        const float d = m / -8.f;
        const float id = d != 0.f ? 1.f / d : 0.f;
        uint8_t* blk = out.data() + b * kQ4BlockBytes;
        const uint16_t dBits = floatToHalf(d);
        std::memcpy(blk, &dBits, 2);
        auto code = [id](float v) {
            return static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(v * id + 8.5f))));
        };
        for (int j = 0; j < kHalf; ++j) blk[2 + j] = static_cast<uint8_t>(code(x[j]) | (code(x[j + kHalf]) << 4));
    }
    return out;
}

std::vector<float> dequantizeQ4_0(const uint8_t* data, size_t count) {
    if (count % kQ8BlockSize != 0)
        throw std::invalid_argument("Q4_0 needs a multiple of 32 values, got " + std::to_string(count));
    constexpr int kHalf = kQ8BlockSize / 2;
    std::vector<float> out(count);
    for (size_t b = 0; b < count / kQ8BlockSize; ++b) {
        const uint8_t* blk = data + b * kQ4BlockBytes;
        uint16_t dBits;
        std::memcpy(&dBits, blk, 2);
        const float d = halfToFloat(dBits);
        float* y = out.data() + b * kQ8BlockSize;
        for (int j = 0; j < kHalf; ++j) {
            y[j] = d * static_cast<float>((blk[2 + j] & 0x0F) - 8);
            y[j + kHalf] = d * static_cast<float>((blk[2 + j] >> 4) - 8);
        }
    }
    return out;
}

// ---- GgufFile ----

void GgufFile::setValue(const std::string& key, const GgufValue& value) {
    for (auto& [k, v] : m_kv) {
        if (k == key) {
            v = value;
            return;
        }
    }
    m_kv.emplace_back(key, value);
}

void GgufFile::setString(const std::string& key, const std::string& value) {
    GgufValue v;
    v.type = GgufValueType::String;
    v.s = value;
    setValue(key, v);
}

void GgufFile::setUInt32(const std::string& key, uint32_t value) {
    GgufValue v;
    v.type = GgufValueType::UInt32;
    v.u = value;
    setValue(key, v);
}

void GgufFile::setFloat32(const std::string& key, float value) {
    GgufValue v;
    v.type = GgufValueType::Float32;
    v.f = value;
    setValue(key, v);
}

void GgufFile::setBool(const std::string& key, bool value) {
    GgufValue v;
    v.type = GgufValueType::Bool;
    v.b = value;
    setValue(key, v);
}

void GgufFile::setStringArray(const std::string& key, const std::vector<std::string>& values) {
    GgufValue v;
    v.type = GgufValueType::Array;
    v.arrayType = GgufValueType::String;
    for (const std::string& s : values) {
        GgufValue e;
        e.type = GgufValueType::String;
        e.s = s;
        v.array.push_back(std::move(e));
    }
    setValue(key, v);
}

void GgufFile::setFloat32Array(const std::string& key, const std::vector<float>& values) {
    GgufValue v;
    v.type = GgufValueType::Array;
    v.arrayType = GgufValueType::Float32;
    for (float f : values) {
        GgufValue e;
        e.type = GgufValueType::Float32;
        e.f = f;
        v.array.push_back(std::move(e));
    }
    setValue(key, v);
}

const GgufValue* GgufFile::find(const std::string& key) const {
    for (const auto& [k, v] : m_kv)
        if (k == key) return &v;
    return nullptr;
}

namespace {
const GgufValue& typed(const GgufFile& f, const std::string& key, GgufValueType type) {
    const GgufValue* v = f.find(key);
    if (!v) throw std::runtime_error("GGUF key '" + key + "' is missing");
    if (v->type != type)
        throw std::runtime_error("GGUF key '" + key + "' is " + valueTypeName(v->type) + ", expected " +
                                 valueTypeName(type));
    return *v;
}
}  // namespace

std::string GgufFile::getString(const std::string& key) const { return typed(*this, key, GgufValueType::String).s; }

uint32_t GgufFile::getUInt32(const std::string& key) const {
    return static_cast<uint32_t>(typed(*this, key, GgufValueType::UInt32).u);
}

float GgufFile::getFloat32(const std::string& key) const {
    return static_cast<float>(typed(*this, key, GgufValueType::Float32).f);
}

std::vector<std::string> GgufFile::getStringArray(const std::string& key) const {
    const GgufValue& v = typed(*this, key, GgufValueType::Array);
    if (v.arrayType != GgufValueType::String)
        throw std::runtime_error("GGUF key '" + key + "' is an array of " + valueTypeName(v.arrayType) +
                                 ", expected strings");
    std::vector<std::string> out;
    for (const GgufValue& e : v.array) out.push_back(e.s);
    return out;
}

std::vector<float> GgufFile::getFloat32Array(const std::string& key) const {
    const GgufValue& v = typed(*this, key, GgufValueType::Array);
    if (v.arrayType != GgufValueType::Float32)
        throw std::runtime_error("GGUF key '" + key + "' is an array of " + valueTypeName(v.arrayType) +
                                 ", expected f32");
    std::vector<float> out;
    for (const GgufValue& e : v.array) out.push_back(static_cast<float>(e.f));
    return out;
}

uint32_t GgufFile::alignment() const {
    const GgufValue* v = find("general.alignment");
    return v && v->type == GgufValueType::UInt32 ? static_cast<uint32_t>(v->u) : kGgufDefaultAlignment;
}

void GgufFile::addTensor(const std::string& name, const Shape& shape, const std::vector<float>& values,
                         GgufTensorType type) {
    if (static_cast<int64_t>(values.size()) != shape.numel())
        throw std::invalid_argument("GGUF tensor '" + name + "': " + std::to_string(values.size()) +
                                    " values do not fill shape " + shape.toString());
    if ((type == GgufTensorType::Q8_0 || type == GgufTensorType::Q4_0) && !q8Compatible(shape))
        throw std::invalid_argument("GGUF tensor '" + name + "': " + ggufTensorTypeName(type) +
                                    " needs an innermost dimension that is a multiple of 32, shape is " +
                                    shape.toString());
    addRawTensor({name, type, shape, encode(values, type)});
}

void GgufFile::addRawTensor(GgufTensor tensor) {
    if (tensor.shape.rank() < 1 || tensor.shape.rank() > kMaxDims)
        throw std::invalid_argument("GGUF tensor '" + tensor.name + "': rank " + std::to_string(tensor.shape.rank()) +
                                    " (GGUF holds 1 to 4 dimensions)");
    if ((tensor.type == GgufTensorType::Q8_0 || tensor.type == GgufTensorType::Q4_0) && !q8Compatible(tensor.shape))
        throw std::invalid_argument("GGUF tensor '" + tensor.name + "': " + ggufTensorTypeName(tensor.type) +
                                    " with innermost dimension not a multiple of 32");
    if (tensor.data.size() != ggufTensorBytes(tensor.type, tensor.shape))
        throw std::invalid_argument("GGUF tensor '" + tensor.name + "': " + std::to_string(tensor.data.size()) +
                                    " bytes do not match its type and shape");
    if (findTensor(tensor.name)) throw std::invalid_argument("duplicate GGUF tensor '" + tensor.name + "'");
    m_tensors.push_back(std::move(tensor));
}

const GgufTensor* GgufFile::findTensor(const std::string& name) const {
    for (const GgufTensor& t : m_tensors)
        if (t.name == name) return &t;
    return nullptr;
}

std::vector<float> GgufFile::tensorFloats(const std::string& name) const {
    const GgufTensor* t = findTensor(name);
    if (!t) throw std::runtime_error("GGUF tensor '" + name + "' is missing");
    const size_t n = static_cast<size_t>(t->shape.numel());
    switch (t->type) {
        case GgufTensorType::F32: {
            std::vector<float> out(n);
            if (n) std::memcpy(out.data(), t->data.data(), n * 4);
            return out;
        }
        case GgufTensorType::F16: {
            std::vector<float> out(n);
            for (size_t i = 0; i < n; ++i) {
                uint16_t h;
                std::memcpy(&h, t->data.data() + 2 * i, 2);
                out[i] = halfToFloat(h);
            }
            return out;
        }
        case GgufTensorType::Q8_0: return dequantizeQ8_0(t->data.data(), n);
        case GgufTensorType::Q4_0: return dequantizeQ4_0(t->data.data(), n);
    }
    throw std::runtime_error("GGUF tensor '" + name + "' has an unsupported type");
}

// ---- file I/O ----

void setGgufChecksums(GgufFile& file) {
    Json sums = Json::object();
    for (const GgufTensor& t : file.tensors()) sums[t.name] = checksumHex(tensorChecksum(t.data.data(), t.data.size()));
    file.setString(kChecksumMetadataKey, sums.dump());
}

void writeGguf(const std::string& path, const GgufFile& file) {
    const uint64_t alignment = file.alignment();
    if (alignment == 0 || (alignment & (alignment - 1)) != 0)
        throw std::invalid_argument("general.alignment must be a power of two, got " + std::to_string(alignment));
    Writer w;
    w.pod<uint32_t>(kMagic);
    w.pod<uint32_t>(kVersion);
    w.pod<uint64_t>(file.tensors().size());
    w.pod<uint64_t>(file.metadata().size());
    for (const auto& [key, value] : file.metadata()) {
        w.str(key);
        w.pod<uint32_t>(static_cast<uint32_t>(value.type));
        w.value(value, value.type);
    }
    uint64_t offset = 0;
    for (const GgufTensor& t : file.tensors()) {
        w.str(t.name);
        w.pod<uint32_t>(static_cast<uint32_t>(t.shape.rank()));
        for (int d = t.shape.rank() - 1; d >= 0; --d) w.pod<uint64_t>(static_cast<uint64_t>(t.shape[d]));
        w.pod<uint32_t>(static_cast<uint32_t>(t.type));
        w.pod<uint64_t>(offset);
        offset = alignUp(offset + t.data.size(), alignment);
    }
    w.padTo(alignment);
    for (const GgufTensor& t : file.tensors()) {
        w.bytes.insert(w.bytes.end(), t.data.begin(), t.data.end());
        w.padTo(alignment);
    }

    writeFileAtomically(path, [&w](std::ostream& out) {
        out.write(reinterpret_cast<const char*>(w.bytes.data()), static_cast<std::streamsize>(w.bytes.size()));
    });
}

GgufFile readGguf(const std::string& path) {
    const std::vector<uint8_t> bytes = readWholeFile(path);
    Reader r(path, bytes);
    if (bytes.size() < 24)
        r.fail(0, "file is " + std::to_string(bytes.size()) + " bytes, shorter than the 24-byte GGUF header");
    const uint32_t magic = r.pod<uint32_t>("the magic");
    if (magic != kMagic) r.fail(0, "not a GGUF file (magic bytes are not \"GGUF\")");
    const uint32_t version = r.pod<uint32_t>("the version");
    if (version != kVersion) r.fail(4, "GGUF version " + std::to_string(version) + " is not supported (expected 3)");
    const uint64_t tensorCount = r.pod<uint64_t>("the tensor count");
    const uint64_t kvCount = r.pod<uint64_t>("the metadata count");
    // Smallest possible entries: a kv pair is key length + type + 1-byte value (17 bytes),
    // a tensor info is name length + n_dims + one dim + type + offset (32 bytes).
    if (kvCount > r.remaining() / 17)
        r.fail(16, "metadata count " + std::to_string(kvCount) + " cannot fit in a " + std::to_string(bytes.size()) +
                       "-byte file");
    if (tensorCount > r.remaining() / 32)
        r.fail(8, "tensor count " + std::to_string(tensorCount) + " cannot fit in a " + std::to_string(bytes.size()) +
                      "-byte file");

    GgufFile file;
    for (uint64_t k = 0; k < kvCount; ++k) {
        const uint64_t keyAt = r.pos();
        const std::string key = r.str("a metadata key");
        if (file.find(key)) r.fail(keyAt, "duplicate metadata key '" + key + "'");
        const uint64_t typeAt = r.pos();
        const uint32_t type = r.pod<uint32_t>("a metadata value type");
        if (!knownValueType(type)) r.fail(typeAt, "key '" + key + "': unknown value type " + std::to_string(type));
        file.setValue(key, r.value(static_cast<GgufValueType>(type), key, 0));
    }
    uint64_t alignment = kGgufDefaultAlignment;
    if (const GgufValue* a = file.find("general.alignment")) {
        if (a->type != GgufValueType::UInt32)
            r.fail(FormatError::kNoOffset,
                   "general.alignment is " + std::string(valueTypeName(a->type)) + ", expected u32");
        alignment = a->u;
        if (alignment == 0 || (alignment & (alignment - 1)) != 0)
            r.fail(FormatError::kNoOffset, "general.alignment " + std::to_string(alignment) + " is not a power of two");
    }

    struct Info {
        GgufTensor tensor;
        uint64_t offset = 0, size = 0, infoAt = 0;
    };
    std::vector<Info> infos;
    infos.reserve(tensorCount);
    for (uint64_t k = 0; k < tensorCount; ++k) {
        Info info;
        info.infoAt = r.pos();
        info.tensor.name = r.str("a tensor name");
        const std::string where = "tensor '" + info.tensor.name + "': ";
        for (const Info& o : infos)
            if (o.tensor.name == info.tensor.name) r.fail(info.infoAt, "duplicate tensor name '" + o.tensor.name + "'");
        const uint64_t dimsAt = r.pos();
        const uint32_t nDims = r.pod<uint32_t>("a tensor's dimension count");
        if (nDims < 1 || nDims > kMaxDims)
            r.fail(dimsAt, where + std::to_string(nDims) + " dimensions (GGUF holds 1 to 4)");
        std::vector<int64_t> ne(nDims);
        // The element count only has to fit an int64 here; what it takes in bytes depends on the type (a Q4_0
        // value takes 18/32 of a byte), checked against the file below.
        uint64_t numel = 1;
        for (uint32_t d = 0; d < nDims; ++d) {
            const uint64_t at = r.pos();
            const uint64_t v = r.pod<uint64_t>("a tensor dimension");
            constexpr auto kMaxElements = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
            if (v > kMaxElements || (v != 0 && numel > kMaxElements / v))
                r.fail(at, where + "dimension " + std::to_string(v) +
                               " makes the tensor larger than any file (its element count overflows)");
            numel *= v;
            ne[d] = static_cast<int64_t>(v);
        }
        std::reverse(ne.begin(), ne.end());
        const uint64_t typeAt = r.pos();
        const uint32_t type = r.pod<uint32_t>("a tensor type");
        bool known = false;
        for (GgufTensorType t : ggufTensorTypes()) known = known || static_cast<uint32_t>(t) == type;
        if (!known)
            r.fail(typeAt,
                   where + "tensor type " + std::to_string(type) + " is not supported (F32=0, F16=1, Q4_0=2, Q8_0=8)");
        info.tensor.type = static_cast<GgufTensorType>(type);
        const GgufTypeLayout layout = ggufTypeLayout(info.tensor.type);
        if (numel % layout.blockValues != 0 || ne.back() % static_cast<int64_t>(layout.blockValues) != 0)
            r.fail(dimsAt, where + ggufTensorTypeName(info.tensor.type) + " with innermost dimension " +
                               std::to_string(ne.back()) + ", not a multiple of " + std::to_string(layout.blockValues));
        const uint64_t blocks = numel / layout.blockValues;
        if (blocks > bytes.size() / layout.blockBytes)
            r.fail(dimsAt, where + std::to_string(numel) + " " + ggufTensorTypeName(info.tensor.type) +
                               " values take more bytes than the " + std::to_string(bytes.size()) + "-byte file holds");
        info.tensor.shape = Shape(ne);
        const uint64_t offAt = r.pos();
        info.offset = r.pod<uint64_t>("a tensor offset");
        if (info.offset % alignment != 0)
            r.fail(offAt, where + "data offset " + std::to_string(info.offset) +
                              " is not a multiple of the alignment " + std::to_string(alignment));
        info.size = ggufTensorBytes(info.tensor.type, info.tensor.shape);
        infos.push_back(std::move(info));
    }
    const uint64_t dataStart = alignUp(r.pos(), alignment);
    if (dataStart > bytes.size())
        r.fail(r.pos(), "file ends before the data section (padding to " + std::to_string(dataStart) + ")");
    const uint64_t dataSize = bytes.size() - dataStart;

    std::vector<size_t> order(infos.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return infos[a].offset < infos[b].offset; });
    uint64_t cursor = 0;
    for (size_t i : order) {
        const Info& info = infos[i];
        const std::string where = "tensor '" + info.tensor.name + "': ";
        if (info.offset > dataSize || info.size > dataSize - info.offset)
            r.fail(info.infoAt, where + "data [" + std::to_string(info.offset) + ", +" + std::to_string(info.size) +
                                    ") runs past the " + std::to_string(dataSize) + "-byte data section");
        if (info.offset < cursor)
            r.fail(info.infoAt,
                   where + "data at offset " + std::to_string(info.offset) + " overlaps the tensor before it");
        cursor = info.offset + info.size;
    }
    // Checksums, when the writer stored them (Strata's exports since issue 18): a flipped byte or a tensor type
    // changed after writing (F32 read as F16 takes other bytes) is caught, naming the tensor.
    Json sums;
    if (const GgufValue* v = file.find(kChecksumMetadataKey)) {
        if (v->type == GgufValueType::String) sums = tryParseJson<Json>(v->s);
        if (!sums.is_object()) r.fail(16, std::string("metadata '") + kChecksumMetadataKey + "' is not a JSON object");
    }
    for (Info& info : infos) {
        const auto* begin = bytes.data() + dataStart + info.offset;
        info.tensor.data.assign(begin, begin + info.size);
        if (!sums.is_null()) {
            const std::string& name = info.tensor.name;
            const std::string actual = checksumHex(tensorChecksum(info.tensor.data.data(), info.tensor.data.size()));
            if (!sums.contains(name) || !sums[name].is_string())
                r.fail(info.infoAt, "tensor '" + name + "' has no checksum in " + kChecksumMetadataKey);
            if (sums[name].get<std::string>() != actual)
                r.fail(dataStart + info.offset, "tensor '" + name + "': checksum mismatch (stored XXH3 " +
                                                    cutForMessage(sums[name].get<std::string>(), 32) + ", the data's " +
                                                    actual + "): the file is damaged or its tensor type was changed");
        }
        file.addRawTensor(std::move(info.tensor));
    }
    return file;
}

}  // namespace strata
