// The data against the graph before training (core/train/DataCheck): an image, a text and a table data set each
// disagreeing with a graph in every way at once, every mismatch listed with the node, both numbers and its fix,
// the fixes applied making the list empty; an Embedding smaller than the text vocabulary (issue 35: caught only
// in the forward pass before) refused by the Trainer and by strata-train before the first step, naming the
// Embedding, its size and the vocabulary's.
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <fstream>

#include "core/train/DataCheck.h"
#include "tests/support/TestBackends.h"
#include "tests/support/TestProjects.h"

using namespace strata;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Applies every available fix to `graph`, as the workbench's buttons do (one parameter each).
void applyFixes(Graph& graph, const std::vector<DataMismatch>& mismatches) {
    for (const DataMismatch& m : mismatches) {
        QVERIFY2(m.fix.available(), m.message.c_str());
        Json params = graph.node(m.fix.node)->params;
        params[m.fix.param] = m.fix.value;
        graph.setParams(m.fix.node, params);
    }
}

// Input [tokens] -> Embedding (vocab) -> mean over the sequence -> Dense classes.
Project textProject(int64_t tokens, int64_t vocab, int classes) {
    Project p;
    p.name = "text-check";
    test::addChain(p.graph, {{"Input", "tokens", {{"shape", {tokens}}}},
                             {"Embedding", "embed", {{"vocab", vocab}, {"dim", 8}}},
                             {"SequenceMeanPool", "mean"},
                             {"Dense", "logits", {{"units", classes}}}});
    p.dataset.kind = DatasetKind::Text;
    p.dataset.tokenizer = Tokenizer::Word;
    p.dataset.maxTokens = int(tokens);
    p.training.epochs = 1;
    p.training.batchSize = 4;
    p.training.device = "cpu";
    p.training.threads = 1;
    return p;
}

// A "label,text" file whose words number `words` distinct ones (+ <pad> and <unk>: the vocabulary's size is
// words + 2), in two classes.
void writeTexts(const std::string& path, int words) {
    std::ofstream f(path);
    f << "label,text\n";
    for (int i = 0; i < words; ++i) f << (i % 2 ? "neg" : "pos") << ",word" << i << " word" << (i + 1) % words << "\n";
}

}  // namespace

class TestDataCheck : public QObject {
    Q_OBJECT
private slots:
    // Images: Fashion-MNIST's facts against a flat MLP with 4 outputs behind a Softmax: the Input and the last
    // Dense (found through the Softmax) are both named, with their fixes; fixed, nothing is left.
    void imagesEveryMismatchListed() {
        Graph g;
        test::addChain(g, {{"Input", "image", {{"shape", {784}}}},
                           {"Flatten", "flat"},
                           {"Dense", "hidden", {{"units", 32}}},
                           {"ReLU", "relu"},
                           {"Dense", "logits", {{"units", 4}}},
                           {"Softmax", "probs"}});
        DataFacts facts;
        facts.sampleShape = Shape{1, 28, 28};
        facts.numClasses = 10;
        const std::vector<DataMismatch> m = checkDataAgainstGraph(g, facts);
        QCOMPARE(m.size(), size_t(2));
        QCOMPARE(m[0].node, g.nodeByName("image")->id);
        QVERIFY2(contains(m[0].message, "Input 'image' expects [784] but the data's samples are [1, 28, 28]"),
                 m[0].message.c_str());
        QCOMPARE(m[0].fix.param, std::string("shape"));
        QVERIFY(m[0].fix.value == Json::array({1, 28, 28}));
        QCOMPARE(m[1].node, g.nodeByName("logits")->id);  // the Dense, not the Softmax after it
        QVERIFY2(contains(m[1].message, "'probs' (Softmax) is [4] but the data has 10 classes") &&
                     contains(m[1].message, "'logits' (Dense)"),
                 m[1].message.c_str());
        QCOMPARE(m[1].fix.text, std::string("set its units to 10"));
        const std::string all = dataMismatchText(m);
        QVERIFY2(contains(all, "(2 problems)") && contains(all, "set its shape to [1, 28, 28]") &&
                     contains(all, "set its units to 10"),
                 all.c_str());
        applyFixes(g, m);
        QVERIFY(analyzeGraph(g).ok());
        QVERIFY(checkDataAgainstGraph(g, facts).empty());
    }

    // Text: a sequence too short, an Embedding smaller than the vocabulary and the wrong class count, all three
    // at once; the Embedding's line names its size and the vocabulary's.
    void textEveryMismatchListed() {
        Project p = textProject(16, 1000, 4);
        DataFacts facts;
        facts.sampleShape = Shape{32};
        facts.numClasses = 2;
        facts.vocabularySize = 5000;
        const std::vector<DataMismatch> m = checkDataAgainstGraph(p.graph, facts);
        QCOMPARE(m.size(), size_t(3));
        QCOMPARE(m[0].fix.param, std::string("shape"));
        QCOMPARE(m[1].node, p.graph.nodeByName("embed")->id);
        QVERIFY2(contains(m[1].message, "Embedding 'embed' has a vocabulary of 1000 but the data's has 5000 tokens"),
                 m[1].message.c_str());
        QCOMPARE(m[1].fix.param, std::string("vocab"));
        QCOMPARE(m[1].fix.value.get<int64_t>(), int64_t(5000));
        QCOMPARE(m[2].fix.param, std::string("units"));
        applyFixes(p.graph, m);
        QVERIFY(checkDataAgainstGraph(p.graph, facts).empty());
        // A larger Embedding is fine; image data (no vocabulary) never checks it.
        facts.vocabularySize = 10;
        QVERIFY(checkDataAgainstGraph(p.graph, facts).empty());
    }

    // A table: 5 features in 3 classes against Input [4] -> Dense 2; and an output that is a sequence, which no
    // single parameter fixes: the message says what to do and offers no fix.
    void tableAndUnfixableOutput() {
        Graph g;
        test::addChain(g, {{"Input", "row", {{"shape", {4}}}}, {"Dense", "out", {{"units", 2}}}});
        DataFacts facts;
        facts.sampleShape = Shape{5};
        facts.numClasses = 3;
        std::vector<DataMismatch> m = checkDataAgainstGraph(g, facts);
        QCOMPARE(m.size(), size_t(2));
        QVERIFY2(contains(m[0].message, "expects [4] but the data's samples are [5]"), m[0].message.c_str());
        QVERIFY2(contains(m[1].message, "'out' (Dense) is [2] but the data has 3 classes"), m[1].message.c_str());
        applyFixes(g, m);
        QVERIFY(checkDataAgainstGraph(g, facts).empty());

        Project seq = textProject(8, 100, 2);
        seq.graph.removeNode(seq.graph.nodeByName("logits")->id);
        seq.graph.removeNode(seq.graph.nodeByName("mean")->id);
        facts.sampleShape = Shape{8};
        facts.numClasses = 2;
        facts.vocabularySize = 50;
        m = checkDataAgainstGraph(seq.graph, facts);
        QCOMPARE(m.size(), size_t(1));
        QVERIFY(!m[0].fix.available());
        QVERIFY2(contains(m[0].message, "'embed' (Embedding) is [8, 8] but the data has 2 classes") &&
                     contains(m[0].message, "pool or flatten"),
                 m[0].message.c_str());
    }

    // The facts as the workbench reads them: a synthetic set from its settings (a million samples of [3, 32, 32]
    // are not generated), a text set with its vocabulary and its training count, a refusal naming the file.
    void readsFactsCheaply() {
        DatasetSettings synthetic;
        synthetic.kind = DatasetKind::Synthetic;
        synthetic.syntheticSamples = 1000000;
        synthetic.syntheticClasses = 7;
        synthetic.syntheticShape = {3, 32, 32};
        const DataFacts f = readDataFacts(synthetic, "");
        QCOMPARE(f.sampleShape, (Shape{3, 32, 32}));
        QCOMPARE(f.numClasses, 7);
        QCOMPARE(f.vocabularySize, int64_t(0));

        QTemporaryDir dir;
        writeTexts(dir.filePath("texts.csv").toStdString(), 60);
        Project p = textProject(6, 40, 2);
        p.dataset.trainPath = dir.filePath("texts.csv").toStdString();
        const DataFacts t = readDataFacts(p.dataset, "");
        QCOMPARE(t.sampleShape, (Shape{6}));
        QCOMPARE(t.numClasses, 2);
        QCOMPARE(t.vocabularySize, int64_t(62));
        QCOMPARE(t.trainCount, int64_t(60));

        p.dataset.trainPath = dir.filePath("missing.csv").toStdString();
        try {
            readDataFacts(p.dataset, "");
            QFAIL("a missing file was read");
        } catch (const DataError& e) {
            QVERIFY2(contains(e.what(), "missing.csv"), e.what());
        }
    }

    // Issue 35: an Embedding smaller than the vocabulary is refused by the Trainer before its first step (it used
    // to fail inside the forward pass), and so is every other mismatch, in one message.
    void trainerRefusesBeforeTheFirstStep() {
        QTemporaryDir dir;
        const std::string texts = dir.filePath("texts.csv").toStdString();
        writeTexts(texts, 60);  // 62 token ids with <pad> and <unk>
        Project p = textProject(6, 40, 2);
        p.dataset.trainPath = texts;
        auto backend = test::makeCpuBackend();
        test::RecordedRun run;
        Trainer t(p, *backend, &run, {});
        QVERIFY(!t.run());
        QVERIFY(run.steps.empty());
        QVERIFY2(contains(run.error, "Embedding 'embed' has a vocabulary of 40 but the data's has 62 tokens") &&
                     contains(run.error, "set its vocab to 62"),
                 run.error.c_str());
        p.graph.setParams(p.graph.nodeByName("embed")->id, {{"vocab", 62}, {"dim", 8}});
        test::RecordedRun fixed;
        Trainer again(p, *backend, &fixed, {});
        QVERIFY2(again.run(), fixed.error.c_str());
        QVERIFY(!fixed.steps.empty());
    }

    // strata-train: the same refusal at start, before any step line, with a failing exit status.
    void strataTrainRefusesAtStart() {
        QTemporaryDir dir;
        const std::string texts = dir.filePath("texts.csv").toStdString();
        writeTexts(texts, 60);
        Project p = textProject(6, 40, 2);
        p.dataset.trainPath = texts;
        const QString project = dir.filePath("text.strata");
        writeProject(p, project.toStdString());
        QProcess train;
        train.setProcessChannelMode(QProcess::MergedChannels);
        train.start(QStringLiteral(STRATA_TRAIN_EXE),
                    {project, "--metrics-out", dir.filePath("metrics.jsonl"), "--history", dir.filePath("h.sqlite")});
        QVERIFY(train.waitForFinished(120000));
        const std::string out = train.readAll().toStdString();
        QVERIFY2(train.exitCode() != 0, out.c_str());
        QVERIFY2(contains(out, "Embedding 'embed' has a vocabulary of 40 but the data's has 62 tokens"), out.c_str());
        std::ifstream metrics(dir.filePath("metrics.jsonl").toStdString());
        std::string line, steps;
        while (std::getline(metrics, line))
            if (contains(line, "\"step\"")) steps += line + "\n";
        QVERIFY2(steps.empty(), steps.c_str());
    }
};

QTEST_GUILESS_MAIN(TestDataCheck)
#include "test_data_check.moc"
