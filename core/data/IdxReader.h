// IdxReader: the IDX format of MNIST and Fashion-MNIST. Big-endian header:
// two zero bytes, a type byte (0x08 = unsigned byte), the number of
// dimensions, then one 32-bit size per dimension; the data follows. Files may
// be gzipped (detected by content) or raw.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/io/InputLimits.h"

namespace strata::data {

struct IdxArray {
    std::vector<int64_t> dims;   // dims[0] is the item count
    int64_t dataOffset = 0;      // byte offset of the first data byte (for messages)
    std::vector<uint8_t> bytes;  // the whole decompressed file; data starts at dataOffset
    const uint8_t* data() const { return bytes.data() + dataOffset; }
};

// The whole file, decompressed when it is gzipped. Throws DataError.
std::vector<uint8_t> readMaybeGzipFile(const std::string& path);

// Throws DataError naming the file when it exists but is not a regular file (a directory, FIFO, socket or
// device); a missing file is left to the reader's own "cannot open". A reader that opens the path itself
// afterwards leaves a window for a swap: readers use readDataFile.
void requireRegularDataFile(const std::string& path);

// The whole file, read through InputFile (core/io/InputFile.h: a regular file, opened without blocking, at
// most `maxBytes`); DataError naming the file otherwise ("is a FIFO (named pipe), not a regular file").
std::string readDataFile(const std::string& path, int64_t maxBytes = kMaxDataFileBytes,
                         const std::string& kind = "a data file");

// Reads an IDX file of unsigned bytes with `rank` dimensions (3: images, 1: labels).
// Throws DataError naming the file and byte offset: empty file, wrong magic number,
// zero-sized dimension, truncated data.
IdxArray readIdxU8(const std::string& path, int rank);

}  // namespace strata::data
