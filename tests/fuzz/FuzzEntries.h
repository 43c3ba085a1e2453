// The fuzz targets' entry functions: one per reader of untrusted input (project file, IDX, CSV, text CSV,
// images, image folders, checkpoint, safetensors, GGUF, ONNX, the ONNX importer, SentencePiece model). Each takes the
// bytes of one input, runs the reader on them and swallows the errors a reader is allowed to throw (std::exception):
// anything else (a crash, an ASan/UBSan report, a hang, an allocation past libFuzzer's limit) is a finding.
//
// The libFuzzer executables (tests/fuzz/FuzzMain.cpp, CMake option STRATA_FUZZ, tools/fuzz.sh) and the
// corpus replay test of the normal build (test_fuzz_corpus) call the same functions, so the seeds in
// tests/fuzz/corpus/<target>/ and every crash input added there keep being run by CTest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace strata::fuzz {

struct Target {
    const char* name;  // also the corpus folder name
    void (*run)(const uint8_t* data, size_t size);
};

const std::vector<Target>& targets();

// The SentencePiece model load, in FuzzSentencePiece.cpp: its libFuzzer executable links that file alone with
// strata_data (SentencePiece's own protobuf must be the only one in the process, see there).
void sentencePieceModel(const uint8_t* data, size_t size);
// nullptr when there is no target of that name.
const Target* findTarget(const std::string& name);

}  // namespace strata::fuzz
