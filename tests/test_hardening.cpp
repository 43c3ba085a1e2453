// Hardening (issue 18): sizes that cannot wrap, divergence caught, options and metadata range-checked.
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <new>
#include <sstream>

#include "app/CliCommands.h"
#include "core/data/CsvReader.h"
#include "core/data/Dataset.h"
#include "core/data/IdxReader.h"
#include "core/export/ExportModel.h"
#include "core/export/Gguf.h"
#include "core/export/Onnx.h"
#include "core/io/Checksum.h"
#include "core/io/Safetensors.h"
#include "core/tensor/Device.h"
#include "core/tensor/Shape.h"
#include "core/train/Checkpoint.h"
#include "core/train/Divergence.h"
#include "core/train/Trainer.h"
#include "tests/support/TestBackends.h"
#include "tests/support/TestFiles.h"
#include "tests/support/TestProjects.h"

using namespace strata;

// The largest single allocation while g_trackAllocations is set: shows that a reader never asks for memory
// an untrusted size field claims (reserve() allocates without touching pages, so RSS would not show it).
namespace {
std::atomic<bool> g_trackAllocations{false};
std::atomic<size_t> g_largestAllocation{0};
std::atomic<size_t> g_failAllocationsAbove{0};  // nonzero: larger requests throw std::bad_alloc
}  // namespace

void* operator new(size_t n) {
    if (g_trackAllocations.load(std::memory_order_relaxed)) {
        size_t seen = g_largestAllocation.load();
        while (n > seen && !g_largestAllocation.compare_exchange_weak(seen, n)) {
        }
    }
    if (const size_t limit = g_failAllocationsAbove.load(std::memory_order_relaxed); limit && n > limit)
        throw std::bad_alloc();
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace {

struct Recorder : TrainingObserver {
    std::vector<StepEvent> steps;
    std::vector<std::string> logs, errors;
    bool finished = false;
    void onStep(const StepEvent& e) override { steps.push_back(e); }
    void onLog(const std::string& m) override { logs.push_back(m); }
    void onError(const std::string& m) override { errors.push_back(m); }
    void onFinished(const FinishedEvent&) override { finished = true; }
    std::string all() const {
        std::string s;
        for (const std::string& l : logs) s += l + "\n";
        for (const std::string& l : errors) s += "error: " + l + "\n";
        return s;
    }
};

bool train(const Project& p, Recorder& rec) {
    auto backend = test::makeCpuBackend();
    Trainer t(p, *backend, &rec, {});
    return t.run();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

class TestHardening : public QObject {
    Q_OBJECT

private slots:
    // [65536, 65536, 65536, 65536] multiplied to 2^64 wrapped to 0 and trained "successfully".
    void shapeProductIsChecked() {
        const Shape s{65536, 65536, 65536, 65536};
        QVERIFY_THROWS_EXCEPTION(std::overflow_error, s.numel());
        QVERIFY_THROWS_EXCEPTION(std::overflow_error, s.product(0, 4));
        QCOMPARE(s.product(1, 4), int64_t(1) << 48);
        QCOMPARE(s.product(0, 2), int64_t(1) << 32);
        QCOMPARE((Shape{}).numel(), int64_t(1));
    }

    void hugeSyntheticShapeIsRefused() {
        Project p = test::blobsMlpProject("huge", 16, 4);
        p.dataset.syntheticShape = {65536, 65536, 65536, 65536};
        Recorder rec;
        QVERIFY(!train(p, rec));
        QVERIFY(rec.steps.empty());
        QVERIFY2(!rec.errors.empty() && contains(rec.errors.front(),
                                                 "dataset.synthetic_shape [65536, 65536, 65536, "
                                                 "65536]: more than 268435456 values per sample"),
                 rec.all().c_str());
        // Within the per-sample cap, but too many samples in all.
        p.dataset.syntheticShape = {1 << 20};
        p.dataset.syntheticSamples = 1 << 20;
        Recorder rec2;
        QVERIFY(!train(p, rec2));
        QVERIFY2(!rec2.errors.empty() && contains(rec2.errors.front(), "dataset.synthetic_samples: 1048576 samples"),
                 rec2.all().c_str());
    }

    // The MLP at learning rate 1e6 reached a loss of 8e33, exited 0 and recorded "best epoch 1".
    void divergenceEndsTheRun() {
        Project p = test::blobsMlpProject("diverge", 16, 4);
        p.training.learningRate = 1e6;
        p.training.epochs = 2;
        Recorder rec;
        QVERIFY(!train(p, rec));
        QVERIFY(!rec.finished);
        QVERIFY(rec.steps.size() < 60);
        QVERIFY2(rec.errors.size() == 1, rec.all().c_str());
        const std::string& e = rec.errors.front();
        QVERIFY2(contains(e, "step ") && contains(e, "the loss diverged") &&
                     contains(e, "the largest gradient is in layer '"),
                 e.c_str());
        // The same project at a sane rate trains to the end.
        p.training.learningRate = 0.05;
        Recorder ok;
        QVERIFY2(train(p, ok), ok.all().c_str());
    }

    void divergenceRules() {
        DivergenceMonitor m(10);  // log(10) = 2.303
        QVERIFY(m.addLoss(2.0).empty());
        QCOMPARE(m.startLoss(), 2.0);
        // Above 3 x 2.303 for 49 steps, then back: fine.
        for (int i = 0; i < DivergenceMonitor::kPatience - 1; ++i) QVERIFY(m.addLoss(8.0).empty());
        QVERIFY(m.addLoss(1.0).empty());
        for (int i = 0; i < DivergenceMonitor::kPatience - 1; ++i) QVERIFY(m.addLoss(8.0).empty());
        const std::string longAbove = m.addLoss(8.0);
        QVERIFY2(contains(longAbove, "for 50 steps in a row"), longAbove.c_str());
        DivergenceMonitor e(10);
        QVERIFY(e.addLoss(2.0).empty());
        QVERIFY(e.addLoss(2000.0).empty());  // below 1000 x 2.303
        QVERIFY(contains(e.addLoss(2400.0), "the loss diverged to 2400"));
        // A resumed run keeps its reference.
        DivergenceMonitor r(10);
        r.setReferenceLoss(2.0);
        QVERIFY(contains(r.addLoss(1e30), "diverged"));
        DivergenceMonitor g(10);
        QVERIFY(g.addGradNorm(0.5).empty());
        QVERIFY(g.addGradNorm(4000).empty());  // 8000x: within 10^4
        QVERIFY(contains(g.addGradNorm(6000), "the gradient norm exploded to 6000"));
        DivergenceMonitor small(10);
        QVERIFY(small.addGradNorm(1e-6).empty());
        QVERIFY(small.addGradNorm(1.0).empty());  // 10^6 x, but below the absolute floor
    }

    // A 72-byte broken .gz made the IDX reader reserve 1.87 GB: it trusted the gzip size trailer.
    void gzipTrailerIsNotTrusted() {
        QTemporaryDir dir;
        const std::string file = (dir.path() + "/bomb-idx3-ubyte.gz").toStdString();
        std::vector<uint8_t> gz = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};  // gzip header
        gz.insert(gz.end(), {1, 40, 0, uint8_t(~40), 0xff});             // one stored deflate block of 40 bytes
        for (int i = 0; i < 40; ++i) gz.push_back(uint8_t(i));
        gz.insert(gz.end(), {0xde, 0xad, 0xbe, 0xef});  // CRC32 (wrong)
        gz.insert(gz.end(), {0x00, 0x00, 0x80, 0x6f});  // ISIZE 0x6f800000 = 1.87 GB
        std::ofstream(file, std::ios::binary)
            .write(reinterpret_cast<const char*>(gz.data()), static_cast<std::streamsize>(gz.size()));
        g_largestAllocation = 0;
        g_trackAllocations = true;
        try {
            data::readMaybeGzipFile(file);
            g_trackAllocations = false;
            QFAIL("the broken gzip was accepted");
        } catch (const DataError& e) {
            g_trackAllocations = false;
            QVERIFY2(contains(e.what(), "bomb-idx3-ubyte.gz: byte "), e.what());
        }
        QVERIFY2(g_largestAllocation < (size_t(64) << 20),
                 qPrintable(QString("largest allocation %1 bytes").arg(g_largestAllocation.load())));
    }

    // Out of memory while loading the data names the data set, not "std::bad_alloc".
    void allocationFailureNamesTheData() {
        Project p = test::blobsMlpProject("oom", 1024, 4);
        p.dataset.syntheticSamples = 2000;  // 8 MB of values
        auto backend = test::makeCpuBackend();
        Recorder rec;
        Trainer t(p, *backend, &rec, {});
        g_failAllocationsAbove = size_t(4) << 20;
        const bool ok = t.run();
        g_failAllocationsAbove = 0;
        QVERIFY(!ok);
        QVERIFY2(!rec.errors.empty() &&
                     contains(rec.errors.front(), "the synthetic data set: out of memory while loading the data set"),
                 rec.all().c_str());
    }

    // Found by fuzz_idx under UBSan: three 32-bit dimensions multiplied past 2^63 before the size check.
    void idxDimensionsDoNotOverflow() {
        QTemporaryDir dir;
        const std::string file = (dir.path() + "/huge-idx3-ubyte").toStdString();
        std::ofstream(file, std::ios::binary) << std::string("\0\0\x08\x03", 4) << std::string(12, '\xff');
        try {
            data::readIdxU8(file, 3);
            QFAIL("accepted");
        } catch (const DataError& e) {
            QVERIFY2(contains(e.what(), "dimensions are implausibly large"), e.what());
        }
    }

    void directoriesAreNotDataFiles() {
        QTemporaryDir dir;
        const std::string d = dir.path().toStdString();
        for (auto read : {std::function<void()>([&] { data::readIdxU8(d, 3); }),
                          std::function<void()>([&] { data::readCsvFile(d); })}) {
            try {
                read();
                QFAIL("a directory was read as a data file");
            } catch (const DataError& e) {
                QVERIFY2(contains(e.what(),
                                  std::filesystem::path(d).filename().string() + ": is a directory, not a data file"),
                         e.what());
            }
        }
    }

    // Epoch -5 or 2^40, step -100, step_in_epoch beyond the epoch, normalization std 0: all were accepted.
    void checkpointMetadataIsRangeChecked() {
        QTemporaryDir dir;
        Project p = test::blobsMlpProject("meta", 8, 3);
        p.training.checkpointDir = (dir.path() + "/ck").toStdString();
        Recorder rec;
        QVERIFY2(train(p, rec), rec.all().c_str());
        const std::string good = p.training.checkpointDir + "/epoch-001.safetensors";
        const SafetensorsContents contents = readSafetensors(good);
        const Json meta = Json::parse(contents.metadata.at("strata.checkpoint"));
        auto variant = [&](const std::string& name, const std::function<void(Json&)>& edit) {
            Json m = meta;
            edit(m);
            const std::string file = (dir.path() + "/").toStdString() + name + ".safetensors";
            writeSafetensors(file, contents.tensors, {{"strata.checkpoint", m.dump()}});
            return file;
        };
        const std::vector<std::pair<std::function<void(Json&)>, std::string>> cases = {
            {[](Json& m) { m["epoch"] = -5; }, "epoch -5 is out of range"},
            {[](Json& m) { m["epoch"] = int64_t{1} << 40; }, "epoch 1099511627776 is out of range"},
            {[](Json& m) { m["step"] = -100; }, "step -100 is out of range"},
            {[](Json& m) { m["step_in_epoch"] = 1000; }, "step_in_epoch 1000 is out of range"},
            {[](Json& m) {
                 m["normalization"]["mode"] = "minmax";
                 m["normalization"]["std"] = 0;
             },
             "normalization std 0"},
            {[](Json& m) { m["epoch"] = "three"; }, "checkpoint metadata is malformed"},
        };
        int i = 0;
        for (const auto& [edit, needle] : cases) {
            const std::string file = variant("bad" + std::to_string(i++), edit);
            try {
                loadCheckpoint(file);
                QFAIL(("accepted: " + needle).c_str());
            } catch (const std::runtime_error& e) {
                QVERIFY2(contains(e.what(), file + ": ") && contains(e.what(), needle), e.what());
            }
        }
        // In range for the file, beyond the data set's epoch: refused when the run knows its epoch length.
        const std::string midEpoch = variant("mid", [](Json& m) {
            m["step"] = 6000;
            m["step_in_epoch"] = 5000;
        });
        QCOMPARE(loadCheckpoint(midEpoch).stepInEpoch, int64_t(5000));
        p.training.checkpointDir.clear();
        auto backend = test::makeCpuBackend();
        TrainerOptions o;
        o.resumeFrom = midEpoch;
        Recorder r2;
        Trainer t(p, *backend, &r2, o);
        QVERIFY(!t.run());
        QVERIFY2(!r2.errors.empty() && contains(r2.errors.front(), "saved at step 5000 of an epoch"), r2.all().c_str());
    }

    void predictLabelsOutsideTheClasses() {
        QTemporaryDir dir;
        const std::string d = dir.path().toStdString();
        const Project p = test::blobsMlpProject("labels", 4, 3);
        writeOnnx(d + "/m.onnx", untrainedExportModel(p, d + "/p.strata"));
        std::ofstream(d + "/rows.csv") << "a,b,c,d\n0.1,0.2,0.3,0.4\n0.5,0.6,0.7,0.8\n";
        auto writeLabels = [&](std::vector<uint8_t> labels) {
            std::vector<uint8_t> idx = {0, 0, 8, 1, 0, 0, 0, uint8_t(labels.size())};
            idx.insert(idx.end(), labels.begin(), labels.end());
            std::ofstream(d + "/labels", std::ios::binary)
                .write(reinterpret_cast<const char*>(idx.data()), static_cast<std::streamsize>(idx.size()));
        };
        writeLabels({2, 1});
        std::ostringstream out, err;
        QVERIFY2(runPredictCommand({d + "/m.onnx", d + "/rows.csv", "--labels", d + "/labels"}, out, err) == 0,
                 err.str().c_str());
        writeLabels({2, 7});
        std::ostringstream out2, err2;
        QVERIFY(runPredictCommand({d + "/m.onnx", d + "/rows.csv", "--labels", d + "/labels"}, out2, err2) != 0);
        QVERIFY2(contains(err2.str(), "the label of sample 1, '7', is not one of the model's 3 classes"),
                 err2.str().c_str());
    }

    // 721 of 730 random byte flips in checkpoint weights went undetected.
    void checksumsCatchFlippedBytes() {
        QTemporaryDir dir;
        Project p = test::blobsMlpProject("sums", 8, 3);
        p.training.checkpointDir = (dir.path() + "/ck").toStdString();
        Recorder rec;
        QVERIFY2(train(p, rec), rec.all().c_str());
        const std::string good = p.training.checkpointDir + "/epoch-001.safetensors";
        const std::vector<uint8_t> bytes = test::readBytes(good);
        uint64_t headerLen = 0;
        std::memcpy(&headerLen, bytes.data(), 8);
        const size_t dataStart = 8 + headerLen;
        // Every data byte flipped (one bit, in 40 places spread over the data section) is caught, naming a tensor.
        const std::string flipped = (dir.path() + "/flipped.safetensors").toStdString();
        for (int k = 0; k < 40; ++k) {
            std::vector<uint8_t> b = bytes;
            const size_t at = dataStart + (b.size() - dataStart - 1) * static_cast<size_t>(k) / 39;
            b[at] ^= uint8_t(1u << (k % 8));
            test::writeBytes(flipped, b);
            try {
                loadCheckpoint(flipped);
                QFAIL(qPrintable(QString("flip at byte %1 not detected").arg(at)));
            } catch (const FormatError& e) {
                QVERIFY2(contains(e.what(), "': checksum mismatch") && contains(e.what(), "tensor '"), e.what());
            }
        }
        // An older file without checksums still loads: the same file with the key taken out of its header.
        Json header = Json::parse(std::string(bytes.begin() + 8, bytes.begin() + static_cast<long>(dataStart)));
        QVERIFY(header["__metadata__"].contains(kChecksumMetadataKey));
        header["__metadata__"].erase(kChecksumMetadataKey);
        std::string text = header.dump();
        while ((8 + text.size()) % 8) text.push_back(' ');
        std::vector<uint8_t> legacy;
        for (int i = 0; i < 8; ++i) legacy.push_back(uint8_t(uint64_t(text.size()) >> (8 * i)));
        legacy.insert(legacy.end(), text.begin(), text.end());
        legacy.insert(legacy.end(), bytes.begin() + static_cast<long>(dataStart), bytes.end());
        const std::string old = (dir.path() + "/old.safetensors").toStdString();
        test::writeBytes(old, legacy);
        QCOMPARE(loadCheckpoint(old).epoch, 1);

        // GGUF: a flipped byte, and an F32 tensor relabelled F16 (it then reads other bytes), are caught.
        const ExportModel m = exportModelFromCheckpoint(loadCheckpoint(good));
        const std::string gguf = (dir.path() + "/m.gguf").toStdString();
        writeGgufExport(gguf, m, ExportPrecision::F32);
        QVERIFY(readGguf(gguf).find(kChecksumMetadataKey) != nullptr);
        std::vector<uint8_t> g = test::readBytes(gguf);
        const std::string name = "dense1.weight";
        std::vector<uint8_t> key;
        for (int i = 0; i < 8; ++i) key.push_back(uint8_t(uint64_t(name.size()) >> (8 * i)));
        key.insert(key.end(), name.begin(), name.end());
        const auto it = std::search(g.begin(), g.end(), key.begin(), key.end());
        QVERIFY(it != g.end());
        const size_t typeAt = static_cast<size_t>(it - g.begin()) + key.size() + 4 + 2 * 8;  // rank, two dims
        uint32_t type = 0;
        std::memcpy(&type, g.data() + typeAt, 4);
        QCOMPARE(type, uint32_t(0));
        g[typeAt] = 1;  // F16
        test::writeBytes(gguf, g);
        test::expectFormatError([&] { readGguf(gguf); }, gguf, "tensor 'dense1.weight': checksum mismatch");
        g[typeAt] = 0;
        test::writeBytes(gguf, g);
        const std::vector<uint8_t> w = readGguf(gguf).findTensor(name)->data;
        const auto data = std::search(g.begin(), g.end(), w.begin(), w.begin() + 16);
        QVERIFY(data != g.end());
        data[5] ^= 0x10;
        test::writeBytes(gguf, g);
        test::expectFormatError([&] { readGguf(gguf); }, gguf, "': checksum mismatch");
    }

    void invalidUtf8InTextCsvWarnsWithTheLine() {
        QTemporaryDir dir;
        const std::string file = (dir.path() + "/words.csv").toStdString();
        std::ofstream(file) << "label,text\nen,hello world\nde,gr\xfc\xdf gott\nfr,caf\xc3\xa9\nde,\xc0\xafx\n";
        DatasetSettings s;
        s.kind = DatasetKind::Text;
        s.trainPath = file;
        s.maxTokens = 8;
        s.maxVocab = 32;
        s.normalization = NormalizationMode::None;
        const DatasetBundle b = loadDataset(s, "");
        QVERIFY2(contains(b.description,
                          "warning: words.csv: 2 line(s) hold invalid UTF-8, read as U+FFFD (first: "
                          "line 3)"),
                 b.description.c_str());
        std::ofstream(file) << "label,text\nen,hello world\nfr,caf\xc3\xa9 \xf0\x9f\x98\x80\n";
        QVERIFY(!contains(loadDataset(s, "").description, "UTF-8"));
    }

    void deviceIndexOutOfRange() {
        try {
            Device::parse("cuda:99999999999");
            QFAIL("accepted");
        } catch (const std::invalid_argument& e) {
            QVERIFY2(contains(e.what(), "GPU index is out of range"), e.what());
        }
        QCOMPARE(Device::parse("cuda:3").index, 3);
        try {
            Device::parse(std::string(100000, 'x'));
            QFAIL("accepted");
        } catch (const std::invalid_argument& e) {
            QVERIFY(std::strlen(e.what()) < 400);
        }
    }
};

QTEST_GUILESS_MAIN(TestHardening)
#include "test_hardening.moc"
