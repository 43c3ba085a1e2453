// The sentencepiece_model fuzz target: the input as a SentencePiece model file, loaded the way a text data set's
// tokenizer_model is (SubwordTokenizer::fromFile, through libstrata_sentencepiece.so), then used: a text
// encoded whole and cut, its pieces counted, the vocabulary and scores read.
//
// Its libFuzzer executable is this file alone with strata_data (STRATA_FUZZ_STANDALONE): AddressSanitizer
// refuses dlopen's RTLD_DEEPBIND, which in every other build keeps SentencePiece's embedded protobuf apart from
// the system protobuf that ONNX uses; without it the two must not share a process, and this one holds no other.
// test_fuzz_corpus replays the seeds through the same function in the normal build.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>

#include <unistd.h>

#include "core/data/SubwordTokenizer.h"
#include "tests/fuzz/FuzzEntries.h"

namespace strata::fuzz {

void sentencePieceModel(const uint8_t* d, size_t n) {
    const char* dir = std::getenv("TMPDIR");
    const std::string path =
        std::string(dir && *dir ? dir : "/tmp") + "/strata-fuzz-" + std::to_string(::getpid()) + ".model";
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(d), static_cast<std::streamsize>(n));
    try {
        const SubwordTokenizer t = SubwordTokenizer::fromFile(path);
        const std::string text = "The quick brown fox, 42 \xc3\xa9t\xc3\xa9s, \xe2\x98\x83 and\tspaces  ";
        t.encode(text);
        t.encodeFirst(text, 3);
        t.countPieces(text);
        t.pieces(text);
        t.vocabulary();
        t.scores();
    } catch (const std::exception&) {
        // A refusal with a message is the loader doing its job.
    }
    std::remove(path.c_str());
}

}  // namespace strata::fuzz

#ifdef STRATA_FUZZ_STANDALONE
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    strata::fuzz::sentencePieceModel(data, size);
    return 0;
}
#endif
