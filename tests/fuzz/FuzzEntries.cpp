#include "tests/fuzz/FuzzEntries.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <new>

#include <unistd.h>

#include "core/data/CsvReader.h"
#include "core/data/Dataset.h"
#include "core/data/IdxReader.h"
#include "core/data/ImageFile.h"
#include "core/data/ImageFolder.h"
#include "core/export/Gguf.h"
#include "core/export/Onnx.h"
#include "core/export/OnnxImport.h"
#include "core/graph/Project.h"
#include "core/io/Safetensors.h"
#include "core/train/Checkpoint.h"

namespace strata::fuzz {

namespace {

namespace fs = std::filesystem;

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

// A folder tree described by the input, made afresh in a per-process temporary folder, then listed and loaded as
// an image_folder data set. Records, until the input ends:
//   op (1 byte)  path length (1 byte)  path  payload length (2 bytes, little-endian)  payload
// op 'd': a folder; 'f': a file holding the payload; 'l': a symbolic link whose target is the payload; 'c': a CSV
// image list holding the payload (listed as a source of its own). Paths are relative, at most 4 components, none
// empty, "." or ".."; a link's target may climb ("../") only at its start and must stay inside the tree (judged
// from the link's real folder), so nothing outside the tree is listed or read.
class TreeInput {
public:
    explicit TreeInput(const uint8_t* d, size_t n) {
        const char* dir = std::getenv("TMPDIR");
        m_root = fs::path(dir && *dir ? dir : "/tmp") / ("strata-fuzz-tree-" + std::to_string(::getpid()));
        std::error_code ec;
        fs::remove_all(m_root, ec);
        fs::create_directories(m_root / "data", ec);
        m_root = fs::canonical(m_root, ec);
        m_data = m_root / "data";
        size_t at = 0;
        for (int records = 0; records < 64 && at + 4 <= n; ++records) {
            const char op = static_cast<char>(d[at]);
            const size_t pathLength = d[at + 1];
            if (at + 2 + pathLength + 2 > n) break;
            const std::string rel(reinterpret_cast<const char*>(d + at + 2), pathLength);
            const size_t payloadLength = d[at + 2 + pathLength] | size_t(d[at + 3 + pathLength]) << 8;
            const size_t payloadAt = at + 4 + pathLength;
            if (payloadAt + payloadLength > n) break;
            const std::string payload(reinterpret_cast<const char*>(d + payloadAt), payloadLength);
            at = payloadAt + payloadLength;
            make(op, rel, payload);
        }
    }
    ~TreeInput() {
        std::error_code ec;
        fs::remove_all(m_root, ec);
    }
    TreeInput(const TreeInput&) = delete;
    TreeInput& operator=(const TreeInput&) = delete;
    std::string data() const { return m_data.string(); }
    std::string project() const { return (m_root / "p.strata").string(); }
    const std::vector<std::string>& csvFiles() const { return m_csv; }
    // Only what lies inside the tree (a CSV may name any path).
    bool inside(const std::string& path) const {
        const fs::path p = fs::path(path).lexically_normal();
        const auto [end, unused] = std::mismatch(m_data.begin(), m_data.end(), p.begin(), p.end());
        return end == m_data.end() && path.find("..") == std::string::npos;
    }

private:
    static bool plainPath(const fs::path& p, int maxParts) {
        int parts = 0;
        for (const fs::path& c : p) {
            const std::string s = c.string();
            if (s.empty() || s == "." || s == ".." || s.find('\0') != std::string::npos || ++parts > maxParts)
                return false;
        }
        return parts > 0 && p.is_relative();
    }
    void make(char op, const std::string& rel, const std::string& payload) {
        const fs::path relPath(rel);
        if (!plainPath(relPath, 4)) return;
        std::error_code ec;
        // The folder the entry goes into, as it really is (links resolved): it must lie inside the tree.
        const fs::path parent = fs::weakly_canonical(m_data / relPath.parent_path(), ec);
        if (ec || !inside(parent.string()) || !fs::is_directory(parent, ec)) return;
        const fs::path where = parent / relPath.filename();
        switch (op) {
            case 'd': fs::create_directory(where, ec); break;
            case 'f':
            case 'c': {
                if (fs::exists(fs::symlink_status(where, ec))) return;
                std::ofstream(where, std::ios::binary).write(payload.data(), std::streamsize(payload.size()));
                if (op == 'c') m_csv.push_back(where.string());
                break;
            }
            case 'l': {
                // "../" only at the start, then plain components (or none: ".", "..", "../..").
                fs::path target(payload);
                fs::path rest;
                bool climbing = true;
                for (const fs::path& c : target) {
                    const std::string s = c.string();
                    if (climbing && (s == ".." || s == ".")) continue;
                    climbing = false;
                    if (s.empty() || s == "." || s == ".." || s.find('\0') != std::string::npos) return;
                    rest /= c;
                }
                if (payload.empty() || target.is_absolute() || payload.size() > 200 ||
                    !inside((parent / target).lexically_normal().string()))
                    return;
                fs::create_symlink(target, where, ec);
                break;
            }
            default: break;
        }
    }
    fs::path m_root, m_data;
    std::vector<std::string> m_csv;
};

void imageFolder(const uint8_t* d, size_t n) {
    const TreeInput tree(d, n);
    for (const bool strict : {false, true})
        guarded([&] {
            DatasetSettings s;
            s.kind = DatasetKind::ImageFolder;
            s.trainPath = tree.data();
            s.imageShape = {1, 4, 4};
            s.strictImages = strict;
            s.decodeThreads = 1;
            s.validationSplit = 0.25;
            loadDataset(s, tree.project());
        });
    guarded([&] { data::listImages(tree.data(), {"a", "b"}, false); });
    for (const std::string& csv : tree.csvFiles())
        guarded([&] {
            const data::ImageList list = data::listImages(csv, {}, false);
            std::vector<std::string> inside;
            for (const std::string& p : list.paths)
                if (tree.inside(p)) inside.push_back(p);
            data::decodeImages(inside, Shape{1, 4, 4}, data::ResizePolicy::CenterCrop, 1, false);
        });
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

// The importer on whatever readOnnx accepts: rewrites, the mapping table's readers, the graph built and laid out
// (partial, so that graphs with unmapped nodes go all the way through).
void onnxImport(const uint8_t* d, size_t n) {
    guarded([&] {
        OnnxImportOptions options;
        options.partial = true;
        importOnnxModel(readOnnxBytes("fuzz.onnx", d, n), "fuzz.onnx", options);
    });
}

}  // namespace

const std::vector<Target>& targets() {
    static const std::vector<Target> all = {
        {"project", projectFile},
        {"idx", idx},
        {"csv", csv},
        {"text_csv", textCsv},
        {"png", png},
        {"checkpoint", checkpoint},
        {"safetensors", safetensors},
        {"gguf", gguf},
        {"onnx", onnx},
        {"onnx_import", onnxImport},
        {"image_folder", imageFolder},
        {"sentencepiece_model", sentencePieceModel},
    };
    return all;
}

const Target* findTarget(const std::string& name) {
    for (const Target& t : targets())
        if (name == t.name) return &t;
    return nullptr;
}

}  // namespace strata::fuzz
