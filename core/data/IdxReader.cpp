#include "core/data/IdxReader.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <zlib.h>

#include "core/data/Dataset.h"
#include "core/io/FormatError.h"
#include "core/io/InputFile.h"

namespace strata::data {

namespace {

// InputFile's refusals as DataErrors, in the data readers' words.
DataError dataErrorOf(const std::string& path, const FormatError& e) {
    // A directory opens as a stream whose size reads as 2^63: only regular files are read.
    if (e.problem().rfind("is a directory", 0) == 0) return DataError::inFile(path, "is a directory, not a data file");
    if (e.problem().rfind("cannot open: ", 0) == 0)
        return DataError::inFile(path, "cannot open file: " + e.problem().substr(13));
    return DataError::inFile(path, e.problem());
}

}  // namespace

void requireRegularDataFile(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return;
    try {
        const InputFile checked(path, std::numeric_limits<int64_t>::max(), "a data file");
    } catch (const FormatError& e) {
        throw dataErrorOf(path, e);
    }
}

std::string readDataFile(const std::string& path, int64_t maxBytes, const std::string& kind) {
    try {
        return readFileText(path, maxBytes, kind);
    } catch (const FormatError& e) {
        throw dataErrorOf(path, e);
    }
}

namespace {

std::vector<uint8_t> readWholeFile(const std::string& path) {
    const std::string text = readDataFile(path);
    return std::vector<uint8_t>(text.begin(), text.end());
}

constexpr size_t kMaxDeflateRatio = 1032;
constexpr size_t kMaxReserveGuess = size_t(1) << 30;
constexpr size_t kMaxDecompressedBytes = size_t(16) << 30;

// Inflates one or more concatenated gzip members. A stream that stops before its
// end returns what was decompressed and sets `truncated`, so the IDX reader can say
// how much data was missing.
std::vector<uint8_t> gunzip(const std::string& path, const std::vector<uint8_t>& in, bool& truncated) {
    truncated = false;
    std::vector<uint8_t> out;
    // The trailer holds the decompressed size modulo 2^32: a good first guess, but the file says so, not a
    // fact. Deflate expands at most 1032:1, so a guess above that is a lie (a 72-byte file once asked for
    // 1.87 GB); the guess is also capped, and the output grows as inflate really produces it.
    if (in.size() >= 18) {
        size_t n = in.size();
        uint32_t isize =
            uint32_t(in[n - 4]) | uint32_t(in[n - 3]) << 8 | uint32_t(in[n - 2]) << 16 | uint32_t(in[n - 1]) << 24;
        const size_t bound = std::min(in.size() * kMaxDeflateRatio, kMaxReserveGuess);
        if (isize <= bound) out.reserve(isize);
    }
    z_stream zs{};
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) throw DataError::inFile(path, "zlib initialisation failed");
    zs.next_in = const_cast<Bytef*>(in.data());
    size_t consumed = 0;
    size_t produced = 0;
    const size_t chunk = size_t(1) << 20;
    for (;;) {
        // zlib counts in uInt: feed at most 1 GiB at a time.
        size_t inLeft = in.size() - consumed;
        zs.next_in = const_cast<Bytef*>(in.data() + consumed);
        zs.avail_in = static_cast<uInt>(std::min<size_t>(inLeft, size_t(1) << 30));
        if (produced > kMaxDecompressedBytes) {
            inflateEnd(&zs);
            throw DataError::atByte(path, static_cast<int64_t>(consumed),
                                    "decompresses to more than " + std::to_string(kMaxDecompressedBytes >> 30) +
                                        " GiB; refusing (a gzip bomb, or not a data set Strata can hold)");
        }
        if (out.size() < produced + chunk) out.resize(std::max(out.capacity(), produced + chunk));
        zs.next_out = out.data() + produced;
        zs.avail_out = static_cast<uInt>(std::min<size_t>(out.size() - produced, size_t(1) << 30));
        uInt availInBefore = zs.avail_in, availOutBefore = zs.avail_out;
        int rc = inflate(&zs, Z_NO_FLUSH);
        consumed += availInBefore - zs.avail_in;
        produced += availOutBefore - zs.avail_out;
        if (rc == Z_STREAM_END) {
            // Skip zero padding; another member may follow.
            while (consumed < in.size() && in[consumed] == 0) ++consumed;
            if (consumed >= in.size()) break;
            inflateReset(&zs);
            continue;
        }
        if (rc == Z_OK) continue;
        if (rc == Z_BUF_ERROR && consumed >= in.size()) {
            truncated = true;
            break;
        }
        std::string msg = zs.msg ? zs.msg : "inflate error " + std::to_string(rc);
        inflateEnd(&zs);
        throw DataError::atByte(path, static_cast<int64_t>(consumed), "corrupt gzip data: " + msg);
    }
    inflateEnd(&zs);
    out.resize(produced);
    return out;
}

uint32_t readBigEndian32(const uint8_t* p) {
    return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

std::string hex32(uint32_t v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%08X", v);
    return buf;
}

std::vector<uint8_t> readMaybeGzip(const std::string& path, bool& truncatedGzip) {
    truncatedGzip = false;
    std::vector<uint8_t> raw = readWholeFile(path);
    if (raw.size() >= 2 && raw[0] == 0x1f && raw[1] == 0x8b) return gunzip(path, raw, truncatedGzip);
    return raw;
}

}  // namespace

std::vector<uint8_t> readMaybeGzipFile(const std::string& path) {
    bool truncated = false;
    std::vector<uint8_t> bytes = readMaybeGzip(path, truncated);
    if (truncated)
        throw DataError::atByte(path, static_cast<int64_t>(bytes.size()), "gzip stream ends early (truncated file)");
    return bytes;
}

IdxArray readIdxU8(const std::string& path, int rank) {
    bool gzipTruncated = false;
    IdxArray a;
    a.bytes = readMaybeGzip(path, gzipTruncated);
    const std::string gzNote = gzipTruncated ? " (the gzip stream ends early)" : "";
    const int64_t size = static_cast<int64_t>(a.bytes.size());
    if (size == 0) throw DataError::atByte(path, 0, "empty file" + gzNote);
    const int64_t headerSize = 4 + 4 * int64_t(rank);
    const uint32_t expectedMagic = 0x00000800u | uint32_t(rank);
    const char* what = rank == 3 ? "idx3 unsigned-byte images" : rank == 1 ? "idx1 unsigned-byte labels" : "idx";
    if (size < 4)
        throw DataError::atByte(path, 0,
                                "truncated header: expected at least " + std::to_string(headerSize) + " bytes, found " +
                                    std::to_string(size) + gzNote);
    uint32_t magic = readBigEndian32(a.bytes.data());
    if (magic != expectedMagic)
        throw DataError::atByte(
            path, 0, "wrong magic number " + hex32(magic) + ", expected " + hex32(expectedMagic) + " (" + what + ")");
    if (size < headerSize)
        throw DataError::atByte(path, size,
                                "truncated header: expected " + std::to_string(headerSize) + " bytes, found " +
                                    std::to_string(size) + gzNote);
    int64_t total = 1;
    for (int d = 0; d < rank; ++d) {
        int64_t dim = readBigEndian32(a.bytes.data() + 4 + 4 * d);
        if (dim == 0) throw DataError::atByte(path, 4 + 4 * d, "dimension " + std::to_string(d) + " is zero");
        a.dims.push_back(dim);
        // Checked: up to four 32-bit dimensions multiply past 2^63 (found by fuzz_idx under UBSan).
        if (__builtin_mul_overflow(total, dim, &total) || total > (int64_t(1) << 40))
            throw DataError::atByte(path, 4 + 4 * d, "dimensions are implausibly large");
    }
    a.dataOffset = headerSize;
    if (size < headerSize + total)
        throw DataError::atByte(path, size,
                                "truncated file: expected " + std::to_string(headerSize + total) + " bytes, found " +
                                    std::to_string(size) + gzNote);
    if (gzipTruncated) throw DataError::atByte(path, size, "gzip stream ends early (truncated file)");
    if (size > headerSize + total)
        throw DataError::atByte(path, headerSize + total,
                                std::to_string(size - headerSize - total) + " bytes after the data (expected " +
                                    std::to_string(headerSize + total) + " bytes)");
    return a;
}

}  // namespace strata::data
