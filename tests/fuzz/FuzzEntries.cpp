#include "tests/fuzz/FuzzEntries.h"

#include <cstdio>
#include <exception>
#include <fstream>
#include <new>

#include <unistd.h>

#include "core/data/CsvReader.h"
#include "core/data/Dataset.h"
#include "core/data/IdxReader.h"
#include "core/data/ImageFile.h"
#include "core/export/Gguf.h"
#include "core/export/Onnx.h"
#include "core/graph/Project.h"
#include "core/io/Safetensors.h"
#include "core/train/Checkpoint.h"

namespace strata::fuzz {

namespace {

// Readers that take a path get the bytes in a per-process temporary file with the extension they expect.
class TempInput {
public:
    TempInput(const uint8_t* data, size_t size, const std::string& suffix) {
        const char* dir = std::getenv("TMPDIR");
        m_path = std::string(dir && *dir ? dir : "/tmp") + "/strata-fuzz-" + std::to_string(::getpid()) + suffix;
        std::ofstream out(m_path, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    }
    ~TempInput() { std::remove(m_path.c_str()); }
    TempInput(const TempInput&) = delete;
    TempInput& operator=(const TempInput&) = delete;
    const std::string& path() const { return m_path; }

private:
    std::string m_path;
};

template <class F>
void guarded(F&& f) {
    try {
        f();
    } catch (const std::exception&) {
        // A refusal with a message is the reader doing its job (bad_alloc included: libFuzzer's -rss_limit and
        // -malloc_limit_mb report allocations that are too large before they get here).
    }
}

void projectFile(const uint8_t* d, size_t n) {
    guarded([&] { parseProject(std::string(reinterpret_cast<const char*>(d), n), "fuzz.strata"); });
}

void idx(const uint8_t* d, size_t n) {
    const TempInput in(d, n, "-images-idx3-ubyte");
    guarded([&] { data::readIdxU8(in.path(), 3); });
    guarded([&] { data::readIdxU8(in.path(), 1); });
}

void csv(const uint8_t* d, size_t n) {
    guarded([&] { data::parseCsv(std::string(reinterpret_cast<const char*>(d), n), "fuzz.csv"); });
    // The whole tabular path: header, label column, numbers, standardization.
    const TempInput in(d, n, ".csv");
    guarded([&] {
        DatasetSettings s;
        s.kind = DatasetKind::Csv;
        s.trainPath = in.path();
        s.validationSplit = 0.25;
        s.normalization = NormalizationMode::Standardize;
        loadDataset(s, "");
    });
}

void textCsv(const uint8_t* d, size_t n) {
    const TempInput in(d, n, ".csv");
    for (Tokenizer t : {Tokenizer::Char, Tokenizer::Word})
        guarded([&] {
            DatasetSettings s;
            s.kind = DatasetKind::Text;
            s.trainPath = in.path();
            s.tokenizer = t;
            s.maxTokens = 16;
            s.maxVocab = 64;
            s.validationSplit = 0.25;
            loadDataset(s, "");
        });
}

void png(const uint8_t* d, size_t n) {
    const TempInput in(d, n, ".png");
    guarded([&] { data::readImageFile(in.path()); });
}

void checkpoint(const uint8_t* d, size_t n) {
    const TempInput in(d, n, ".safetensors");
    guarded([&] { loadCheckpoint(in.path()); });
}

void safetensors(const uint8_t* d, size_t n) {
    const TempInput in(d, n, ".safetensors");
    guarded([&] { readSafetensors(in.path()); });
}

void gguf(const uint8_t* d, size_t n) {
    const TempInput in(d, n, ".gguf");
    guarded([&] {
        const GgufFile f = readGguf(in.path());
        for (const GgufTensor& t : f.tensors()) f.tensorFloats(t.name);
    });
}

void onnx(const uint8_t* d, size_t n) {
    guarded([&] { readOnnxBytes("fuzz.onnx", d, n); });
}

}  // namespace

const std::vector<Target>& targets() {
    static const std::vector<Target> all = {
        {"project", projectFile},     {"idx", idx},   {"csv", csv},
        {"text_csv", textCsv},        {"png", png},   {"checkpoint", checkpoint},
        {"safetensors", safetensors}, {"gguf", gguf}, {"onnx", onnx},
    };
    return all;
}

const Target* findTarget(const std::string& name) {
    for (const Target& t : targets())
        if (name == t.name) return &t;
    return nullptr;
}

}  // namespace strata::fuzz
