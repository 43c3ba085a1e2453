// Untrusted input, round three (issue 35): JSON depth and size limits at every JSON read, FIFOs and devices
// refused before they are read, graph loading linear in the nodes, node names bounded, paths that are not
// UTF-8 refused before training, dimensions past 2^63 - 1 never printed as negative numbers.
//
// Reads that used to hang (a FIFO blocks in open(); /dev/zero is read until memory runs out) run in a child
// process with a deadline and a memory limit, so a regression fails the test instead of hanging it.
#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QtTest>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <tuple>

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "app/Cli.h"
#include "core/data/CsvReader.h"
#include "core/data/Dataset.h"
#include "core/data/IdxReader.h"
#include "core/data/ImageFile.h"
#include "core/data/SubwordTokenizer.h"
#include "core/export/ExportModel.h"
#include "core/graph/Project.h"
#include "core/graph/Settings.h"
#include "core/io/InputFile.h"
#include "core/io/JsonInput.h"
#include "core/io/Safetensors.h"
#include "core/train/Checkpoint.h"
#include "core/train/Trainer.h"
#include "tests/support/TestBackends.h"
#include "tests/support/TestFiles.h"
#include "tests/support/TestProjects.h"

using namespace strata;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// What a call did in a child process: its exception's message ("" when it returned), or why it did not
// finish ("timed out after N s", "killed by signal N").
struct ChildOutcome {
    bool finished = false;  // returned or threw within the deadline
    bool threw = false;
    std::string message;
};

// Runs `call` in a forked child with `seconds` to finish and at most 2 GiB of new memory; an old reader
// that blocks on a FIFO or reads /dev/zero for ever cannot hang the test.
ChildOutcome runInChild(const std::function<void()>& call, int seconds = 30) {
    int fds[2];
    if (::pipe(fds) != 0) return {false, false, "pipe failed"};
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fds[0]);
        // A crash ends the child plainly (QtTest's handler would try to start a debugger from the forked child).
        for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE}) std::signal(sig, SIG_DFL);
        rlimit lim{};
        if (::getrlimit(RLIMIT_DATA, &lim) == 0) {
            lim.rlim_cur = rlim_t{2} << 30;
            ::setrlimit(RLIMIT_DATA, &lim);
        }
        std::string out = "R";
        try {
            call();
        } catch (const std::exception& e) {
            out = std::string("E") + e.what();
        } catch (...) {
            out = "Eunknown exception";
        }
        const char* p = out.data();
        size_t left = out.size();
        while (left > 0) {
            const ssize_t w = ::write(fds[1], p, left);
            if (w <= 0) break;
            p += w;
            left -= static_cast<size_t>(w);
        }
        ::_exit(0);
    }
    ::close(fds[1]);
    std::string got;
    QElapsedTimer timer;
    timer.start();
    bool eof = false;
    while (!eof && timer.elapsed() < seconds * 1000) {
        pollfd pfd{fds[0], POLLIN, 0};
        if (::poll(&pfd, 1, 200) <= 0) continue;
        char buf[4096];
        const ssize_t n = ::read(fds[0], buf, sizeof buf);
        if (n <= 0)
            eof = true;
        else
            got.append(buf, static_cast<size_t>(n));
    }
    ::close(fds[0]);
    int status = 0;
    if (!eof) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        return {false, false, "timed out after " + std::to_string(seconds) + " s"};
    }
    ::waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) return {false, false, "killed by signal " + std::to_string(WTERMSIG(status))};
    if (got.empty()) return {false, false, "the child said nothing"};
    return {true, got[0] == 'E', got.substr(1)};
}

// The child's call must end quickly with an error naming `file` (the data readers name its file name alone)
// and containing `needle`.
void expectRefusedInChild(const std::function<void()>& call, const std::string& file, const std::string& needle) {
    QElapsedTimer timer;
    timer.start();
    const ChildOutcome r = runInChild(call);
    const std::string what = file + ": " + (r.finished ? (r.threw ? r.message : "accepted") : r.message);
    QVERIFY2(r.finished && r.threw, what.c_str());
    const std::string name = std::filesystem::path(file).filename().string();
    QVERIFY2(contains(r.message, name + ": ") && contains(r.message, needle), what.c_str());
    // "At once": no read to the end of a device, no wait for a writer.
    QVERIFY2(timer.elapsed() < 10000, (what + " took " + std::to_string(timer.elapsed()) + " ms").c_str());
}

// A value nested `depth` levels deep: [[[...]]].
std::string nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// A chain Input -> n-2 ReLUs -> Dense, as a project file's text (named "relu<i>" unless `unnamed`).
std::string chainProjectText(int n, bool unnamed = false) {
    std::string s = R"({"format_version": 1, "name": "chain", "graph": {"nodes": [)";
    s += R"({"id": 1, "type": "Input", "name": "input", "params": {"shape": [4]}})";
    for (int i = 2; i < n; ++i) {
        s += R"(, {"id": )" + std::to_string(i) + R"(, "type": "ReLU")";
        if (!unnamed) s += R"(, "name": "relu)" + std::to_string(i) + "\"";
        s += "}";
    }
    s += R"(, {"id": )" + std::to_string(n) +
         R"(, "type": "Dense", "name": "out", "params": {"units": 2}}], "edges": [)";
    for (int i = 2; i <= n; ++i) {
        if (i > 2) s += ", ";
        s += R"({"from": {"node": )" + std::to_string(i - 1) + R"(, "port": "out"}, "to": {"node": )" +
             std::to_string(i) + R"(, "port": "in"}})";
    }
    s += "]}}";
    return s;
}

std::string minimalProjectText() { return projectToJson(test::blobsMlpProject("small", 4, 2)).dump(); }

void writeText(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

}  // namespace

class TestInputLimits : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    std::string path(const std::string& name) const { return (m_dir.path() + "/").toStdString() + name; }
    std::string fifo(const std::string& name) const {
        const std::string p = path(name);
        ::unlink(p.c_str());
        if (::mkfifo(p.c_str(), 0600) != 0) qFatal("mkfifo %s failed", p.c_str());
        return p;
    }

private slots:
    // QTemporaryDir cannot remove the folders whose names are not UTF-8.
    void cleanupTestCase() {
        std::error_code ec;
        std::filesystem::remove_all(m_dir.path().toStdString(), ec);
    }

    // ---- JSON depth and size -----------------------------------------------------------------------------

    void jsonDepthLimitIsExact() {
        checkJsonLimits(nested(kMaxJsonDepth), "t");  // exactly at the limit: fine
        try {
            checkJsonLimits(nested(kMaxJsonDepth + 1), "t");
            QFAIL("257 levels accepted");
        } catch (const JsonLimitError& e) {
            QCOMPARE(e.line(), size_t(1));
            QCOMPARE(e.column(), size_t(kMaxJsonDepth + 1));
            QVERIFY2(contains(e.what(), "deeper than 256 levels"), e.what());
        }
        // Brackets inside strings, and escaped quotes, are text, not nesting.
        const std::string quoted = "{\"a\\\"[[[\": \"" + std::string(1000, '[') + "\"}";
        checkJsonLimits(quoted, "t");
        QVERIFY(!parseJson<Json>(quoted, "t").is_discarded());
        // The pointer names the keys and indexes on the way, and where in the text.
        const std::string text = "{\n\"graph\": {\"nodes\": [{}, {\"params\": {\"a/b\": " + nested(300) + "}}]}}";
        try {
            checkJsonLimits(text, "net.strata");
            QFAIL("300 levels accepted");
        } catch (const JsonLimitError& e) {
            QVERIFY2(e.pointer().rfind("/graph/nodes/1/params/a~1b/0/0/", 0) == 0, e.pointer().c_str());
            QVERIFY2(contains(e.pointer(), "more levels)"), e.pointer().c_str());
            QCOMPARE(e.line(), size_t(2));
            QCOMPARE(e.file(), std::string("net.strata"));
        }
        QVERIFY(tryParseJson<Json>(nested(100000)).is_discarded());
    }

    void jsonSizeLimit() {
        try {
            checkJsonLimits("[1, 2, 3]", "small", {.maxBytes = 8});
            QFAIL("9 bytes accepted under a limit of 8");
        } catch (const JsonLimitError& e) {
            QVERIFY2(contains(e.what(), "small") && contains(e.what(), "9 bytes") && contains(e.what(), "limit is 8"),
                     e.what());
        }
    }

    // 100,000 levels (a 200 KB file) in params or dataset overflowed the stack in the JSON copy (SIGSEGV in
    // strata-train; how deep a stack overflows depends on the build's frame sizes, so 1,000,000 levels too). In a
    // child process, so that the crash the limit prevents fails this test instead of ending it.
    void deepNestingInAProjectIsAProjectError() {
        const std::string base = minimalProjectText();
        const std::string shape = "\"shape\":[4]";
        QVERIFY(base.find(shape) != std::string::npos);
        for (size_t depth : {size_t(100000), size_t(1000000)}) {
            std::string inParams = base, inDataset = base;
            inParams.replace(inParams.find(shape), shape.size(), "\"shape\":" + nested(depth));
            inDataset.replace(inDataset.find("\"dataset\":{"), 11,
                              "\"dataset\":{\"train_path\":" + nested(depth) + ",");
            writeText(path("deep-params.strata"), inParams);
            writeText(path("deep-dataset.strata"), inDataset);
            for (const auto& [where, text, file] :
                 {std::tuple{std::string("/graph/nodes/0/params/shape/0/0/"), inParams, path("deep-params.strata")},
                  std::tuple{std::string("/dataset/train_path/0/0/"), inDataset, path("deep-dataset.strata")}}) {
                const ChildOutcome parsed = runInChild([&] {
                    try {
                        parseProject(text, "deep.strata");
                    } catch (const ProjectError& e) {
                        throw std::runtime_error(std::string(e.what()) + "\npath " + e.jsonPath());
                    }
                });
                QVERIFY2(parsed.finished && parsed.threw, parsed.message.c_str());
                QVERIFY2(contains(parsed.message, "deep.strata: " + where) &&
                             contains(parsed.message, "deeper than 256 levels") &&
                             contains(parsed.message, "line 1, column ") && contains(parsed.message, "\npath " + where),
                         parsed.message.c_str());
                const ChildOutcome read = runInChild([&] { readProject(file); });
                QVERIFY2(read.finished && read.threw && contains(read.message, file + ": " + where) &&
                             contains(read.message, "deeper than 256 levels"),
                         read.message.c_str());
            }
        }
    }

    // A checkpoint's embedded project: predict (loadModelFile), export (loadCheckpoint) and --resume (Trainer).
    void deepNestingInACheckpointsProject() {
        Project p = test::blobsMlpProject("deep", 4, 2);
        // 300 levels in the sweep definition (kept as written): writable, and over the limit on reading.
        Json sweep = Json::object();
        for (int i = 0; i < 300; ++i) sweep = Json{{"a", std::move(sweep)}};
        p.sweep = sweep;
        Checkpoint c;
        c.project = p;
        c.weights["dense1.weight"] = std::vector<float>(4 * 32, 0.f);
        const std::string file = path("deep-ck.safetensors");
        saveCheckpoint(c, file);
        for (const auto& [entry, load] : std::vector<std::pair<std::string, std::function<void()>>>{
                 {"loadCheckpoint", [&] { loadCheckpoint(file); }}, {"loadModelFile", [&] { loadModelFile(file); }}}) {
            try {
                load();
                QFAIL((entry + " accepted a project nested 300 deep").c_str());
            } catch (const std::exception& e) {
                QVERIFY2(contains(e.what(), file) && contains(e.what(), "/project/sweep/a/a/a") &&
                             contains(e.what(), "deeper than 256 levels"),
                         e.what());
            }
        }
        {
            auto backend = test::makeCpuBackend();
            test::RecordedRun rec;
            TrainerOptions o;
            o.resumeFrom = file;
            Trainer t(test::blobsMlpProject("deep", 4, 2), *backend, &rec, o);
            QVERIFY(!t.run());
            QVERIFY2(contains(rec.error, "deeper than 256 levels"), rec.error.c_str());
            QVERIFY(rec.steps.empty());
        }
        // 100,000 levels written into the metadata text: refused, whichever check sees it first, without a crash.
        SafetensorsContents contents = readSafetensors(path("deep-ck.safetensors"));
        std::string& meta = contents.metadata.at("strata.checkpoint");
        const size_t at = meta.find("\"dataset\":{");
        QVERIFY(at != std::string::npos);
        meta.insert(at + 11, "\"train_path\":" + nested(100000) + ",");
        const std::string deeper = path("deeper-ck.safetensors");
        writeSafetensors(deeper, contents.tensors, contents.metadata);
        for (const auto& load :
             std::vector<std::function<void()>>{[&] { loadCheckpoint(deeper); }, [&] { loadModelFile(deeper); }}) {
            const ChildOutcome r = runInChild(load);
            QVERIFY2(r.finished && r.threw, r.message.c_str());
            QVERIFY2(contains(r.message, deeper), r.message.c_str());
        }
    }

    // ---- FIFOs and devices ---------------------------------------------------------------------------------

    void fifosAndDevicesAreRefusedAtOnce() {
        // Each reader, with a FIFO (blocked in open() before) and /dev/zero (read to 4 GB before).
        const std::string zero = "/dev/zero";
        // The image-list entry and the image read are named .png (the list takes image file names only).
        const std::string zeroPng = path("zero.png");
        std::filesystem::remove(zeroPng);
        std::filesystem::create_symlink(zero, zeroPng);
        struct Reader {
            std::string what;
            std::function<void(const std::string&)> read;
        };
        const std::vector<Reader> readers{
            {"project", [](const std::string& f) { readProject(f); }},
            {"model", [](const std::string& f) { loadModelFile(f); }},
            {"checkpoint", [](const std::string& f) { loadCheckpoint(f); }},
            {"CSV", [](const std::string& f) { data::readCsvFile(f); }},
            {"IDX", [](const std::string& f) { data::readIdxU8(f, 3); }},
            {"image", [](const std::string& f) { data::readImageFile(f); }},
            {"SentencePiece model", [](const std::string& f) { SubwordTokenizer::fromFile(f); }},
            {"export source", [](const std::string& f) { cli::looksLikeProjectFile(f); }},
            {"safetensors", [](const std::string& f) { readSafetensors(f); }},
        };
        for (const Reader& r : readers) {
            const std::string pipe = fifo("pipe.png");
            qInfo("%s", r.what.c_str());
            expectRefusedInChild([&] { r.read(pipe); }, pipe, "FIFO");
            expectRefusedInChild([&] { r.read(zeroPng); }, zeroPng, "character device");
        }
        expectRefusedInChild([&] { readProject(zero); }, zero, "is a character device, not a regular file");
    }

    // An image-list entry that is a FIFO or a device: left out naming the entry (not the list), at once.
    void imageListEntriesThatAreNotFilesAreSkipped() {
        const std::string dir = path("list");
        std::filesystem::create_directories(dir);
        // Two real 8x8 grey images per class (PGM), then a FIFO and /dev/zero among the entries.
        std::ofstream csv(dir + "/list.csv");
        csv << "path,label\n";
        for (const char* cls : {"a", "b"})
            for (int k = 0; k < 2; ++k) {
                const std::string name = std::string(cls) + std::to_string(k) + ".pgm";
                writeText(dir + "/" + name, "P5\n8 8\n255\n" + std::string(64, char(40 * k)));
                csv << name << "," << cls << "\n";
            }
        ::mkfifo((dir + "/pipe.png").c_str(), 0600);
        std::filesystem::create_symlink("/dev/zero", dir + "/zero.png");
        csv << "pipe.png,a\nzero.png,b\n";
        csv.close();
        DatasetSettings s;
        s.kind = DatasetKind::ImageFolder;
        s.trainPath = dir + "/list.csv";
        s.imageShape = {1, 8, 8};
        s.normalization = NormalizationMode::None;
        s.validationSplit = 0;
        std::string skipped;
        const ChildOutcome r = runInChild([&] {
            const DatasetBundle b = loadDataset(s, "");
            std::string out;
            for (const SkippedFile& f : b.skipped) out += f.path + " -- " + f.reason + "\n";
            throw std::runtime_error(out);  // the list, back to the parent
        });
        QVERIFY2(r.finished && r.threw, r.message.c_str());
        QVERIFY2(contains(r.message, dir + "/pipe.png -- ") && contains(r.message, "FIFO"), r.message.c_str());
        QVERIFY2(contains(r.message, dir + "/zero.png -- ") && contains(r.message, "character device"),
                 r.message.c_str());
        QVERIFY2(!contains(r.message, "list.csv"), r.message.c_str());
    }

    void sentencePieceModelThatIsAFifoNamesTheSetting() {
        writeText(path("texts.csv"), "label,text\na,hello there\nb,good bye\na,hello again\nb,bye now\n");
        DatasetSettings s;
        s.kind = DatasetKind::Text;
        s.trainPath = path("texts.csv");
        s.tokenizer = Tokenizer::SentencePiece;
        s.tokenizerModel = fifo("sp.model");
        s.validationSplit = 0;
        expectRefusedInChild([&] { loadDataset(s, ""); }, s.tokenizerModel, "dataset.tokenizer_model");
    }

    void filesOverTheirLimitAreRefusedBeforeReading() {
        // A sparse 5 GB file: its size is refused before a byte is read.
        const std::string big = path("big.strata");
        { std::ofstream f(big, std::ios::binary); }
        std::filesystem::resize_file(big, 5 * kGiB);
        QElapsedTimer t;
        t.start();
        try {
            readProject(big);
            QFAIL("a 5 GB project file was read");
        } catch (const ProjectError& e) {
            QVERIFY2(contains(e.what(), "is 5368709120 bytes (5 GiB); a project file is at most 67108864 bytes"),
                     e.what());
        }
        try {
            readFileText(big, kMaxTokenizerModelBytes, "a SentencePiece model");
            QFAIL("read");
        } catch (const FormatError& e) {
            QVERIFY2(contains(e.what(), "a SentencePiece model is at most 268435456 bytes (256 MiB)"), e.what());
        }
        QVERIFY(t.elapsed() < 2000);
        std::filesystem::remove(big);
    }

    // ---- graph size --------------------------------------------------------------------------------------

    // Graph::insertNode -> nodeByName (and connect -> edgeInto, analysis -> edgesFrom) were linear scans:
    // 100,000 layers never finished loading (90 s in strata-train). Measured here: about 2 s.
    void hundredThousandLayersLoadInSeconds() {
        const std::string text = chainProjectText(100000);
        QElapsedTimer t;
        t.start();
        const Project p = parseProject(text, "chain.strata");
        const qint64 parsed = t.elapsed();
        const GraphAnalysis a = analyzeGraph(p.graph);
        const qint64 analysed = t.elapsed();
        qInfo("100,000 layers: parsed in %lld ms, analysed in %lld ms more", parsed, analysed - parsed);
        QVERIFY2(a.ok(), a.problems.empty() ? "" : a.problems[0].message.c_str());
        QCOMPARE(p.graph.nodes().size(), size_t(100000));
        QVERIFY2(analysed < 10000, std::to_string(analysed).c_str());
    }

    // Unnamed nodes were named by trying relu1, relu2, ... from 1 for each: 10,000 took over ten minutes.
    void tenThousandUnnamedLayersLoadInSeconds() {
        QElapsedTimer t;
        t.start();
        const Project p = parseProject(chainProjectText(10000, true), "unnamed.strata");
        qInfo("10,000 unnamed layers: %lld ms", t.elapsed());
        // Input and the last Dense keep their names; the ReLUs between are relu1 ... relu9998.
        QVERIFY(p.graph.nodeByName("relu1") && p.graph.nodeByName("relu9998") && !p.graph.nodeByName("relu9999"));
        QVERIFY2(t.elapsed() < 10000, std::to_string(t.elapsed()).c_str());
    }

    // A 100 MB node name took 4.8 GB and 36 s (copied into every message and label).
    void hugeNodeNameIsRefusedQuickly() {
        std::string text = minimalProjectText();
        const std::string name = "\"name\":\"dense1\"";
        QVERIFY(text.find(name) != std::string::npos);
        text.replace(text.find(name), name.size(), "\"name\":\"" + std::string(100'000'000, 'n') + "\"");
        QElapsedTimer t;
        t.start();
        try {
            parseProject(text, "long.strata");
            QFAIL("a 100 MB node name was accepted");
        } catch (const ProjectError& e) {
            QCOMPARE(e.jsonPath(), std::string("/graph/nodes/1/name"));
            QVERIFY2(contains(e.message(), "is 100000000 bytes long; a node name is at most 256 bytes"), e.what());
            QVERIFY(std::string(e.what()).size() < 400);
        }
        QVERIFY2(t.elapsed() < 10000, std::to_string(t.elapsed()).c_str());
        // From a file, the size alone refuses it.
        writeText(path("long.strata"), text);
        try {
            readProject(path("long.strata"));
            QFAIL("a 100 MB project file was read");
        } catch (const ProjectError& e) {
            QVERIFY2(contains(e.what(), "a project file is at most 67108864 bytes"), e.what());
        }
        std::filesystem::remove(path("long.strata"));
        // The editor's rename holds the same limit.
        Graph g;
        const int id = g.addNode("ReLU");
        try {
            g.rename(id, std::string(300, 'r'));
            QFAIL("a 300-byte name was accepted");
        } catch (const GraphError& e) {
            QVERIFY2(contains(e.what(), "at most 256 bytes"), e.what());
        }
        g.rename(id, std::string(256, 'r'));
    }

    // ---- paths that are not UTF-8 ------------------------------------------------------------------------

    // A --checkpoint-dir that is not UTF-8 trained an epoch, then failed writing the checkpoint's JSON.
    void nonUtf8CheckpointDirIsRefusedBeforeTraining() {
        const SettingInfo* flag = settingForFlag("--checkpoint-dir");
        QVERIFY(flag);
        try {
            parseSettingFlag(*flag, "/tmp/run\xff/x");
            QFAIL("accepted");
        } catch (const std::invalid_argument& e) {
            QVERIFY2(contains(e.what(), "--checkpoint-dir") && contains(e.what(), "byte 0xFF at offset 8"), e.what());
        }
        // A cut multi-byte sequence too.
        QVERIFY_THROWS_EXCEPTION(ProjectError, checkSettingValue(*flag, Json("ck\xc3"), "/training/checkpoint_dir"));
    }

#ifdef STRATA_TRAIN_EXE
    // The command line: refused at start-up (no epoch, no folder); a project in a folder whose name is not
    // UTF-8 trains and writes its metrics file (checkpoint paths in it had ended the run after the epoch).
    void nonUtf8PathsOnTheCommandLine() {
        const std::string project = path("small.strata");
        writeProject(test::blobsMlpProject("small", 4, 2), project);
        auto run = [&](std::vector<std::string> args, std::string& output) {
            const std::string log = path("strata-train.log");
            const pid_t pid = ::fork();
            if (pid == 0) {
                const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
                ::dup2(fd, 1);
                ::dup2(fd, 2);
                std::vector<char*> argv{const_cast<char*>(STRATA_TRAIN_EXE)};
                for (std::string& a : args) argv.push_back(a.data());
                argv.push_back(nullptr);
                ::execv(STRATA_TRAIN_EXE, argv.data());
                ::_exit(127);
            }
            int status = 0;
            ::waitpid(pid, &status, 0);
            std::ifstream in(log);
            output.assign(std::istreambuf_iterator<char>(in), {});
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
        };
        std::string out;
        const std::string badDir = path("ck\xff");
        const int rc = run({project, "--checkpoint-dir", badDir, "--history", "off", "--quiet"}, out);
        QVERIFY2(rc != 0, out.c_str());
        QVERIFY2(contains(out, "--checkpoint-dir") && contains(out, "not valid UTF-8 (byte 0xFF"), out.c_str());
        QVERIFY2(!std::filesystem::exists(badDir), "the run started");

        const std::string folder = path("proj\xfe");
        std::filesystem::create_directories(folder);
        writeProject(test::blobsMlpProject("small", 4, 2), folder + "/small.strata");
        const std::string metrics = path("metrics.jsonl");
        QCOMPARE(run({folder + "/small.strata", "--metrics-out", metrics, "--history", "off", "--quiet"}, out), 0);
        std::ifstream m(metrics);
        int checkpoints = 0;
        for (std::string line; std::getline(m, line);) {
            const Json j = Json::parse(line);
            if (j.value("event", "") == "checkpoint") ++checkpoints;
        }
        QVERIFY2(checkpoints > 0, out.c_str());
    }
#endif

    // ---- dimensions past 2^63 - 1 --------------------------------------------------------------------------

    void dimensionsPast2To63AreNotNegative() {
        const std::string big = "9223372036854775808";  // 2^63
        std::string text = minimalProjectText();
        text.replace(text.find("\"shape\":[4]"), 11, "\"shape\":[" + big + "]");
        const Project p = parseProject(text, "big.strata");
        const GraphAnalysis a = analyzeGraph(p.graph);
        QVERIFY(!a.ok());
        const std::string m = a.problems[0].message;
        QVERIFY2(contains(m, big) && !contains(m, "-" + big), m.c_str());

        // A safetensors header's shape.
        const std::string header = R"({"t":{"dtype":"F32","shape":[)" + big + R"(],"data_offsets":[0,4]}})";
        std::string bytes(8, '\0');
        const uint64_t n = header.size();
        std::memcpy(bytes.data(), &n, 8);
        writeText(path("big.safetensors"), bytes + header + std::string(4, '\0'));
        try {
            readSafetensors(path("big.safetensors"));
            QFAIL("accepted");
        } catch (const FormatError& e) {
            QVERIFY2(contains(e.what(), big) && !contains(e.what(), "-" + big), e.what());
        }
    }
};

QTEST_GUILESS_MAIN(TestInputLimits)
#include "test_input_limits.moc"
