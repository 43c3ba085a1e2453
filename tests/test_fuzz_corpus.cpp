// Replays every seed and past finding in tests/fuzz/corpus/<target>/ through the fuzz targets' entry functions
// (tests/fuzz/FuzzEntries.h) in the normal build, so an input that once crashed a reader keeps being run.
// Each target must have a corpus folder with at least one file.
#include <QtTest>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "tests/fuzz/FuzzEntries.h"

class TestFuzzCorpus : public QObject {
    Q_OBJECT

private slots:
    void replay_data() {
        QTest::addColumn<QString>("target");
        for (const strata::fuzz::Target& t : strata::fuzz::targets()) QTest::newRow(t.name) << QString(t.name);
    }
    void replay() {
        QFETCH(QString, target);
        const strata::fuzz::Target* t = strata::fuzz::findTarget(target.toStdString());
        QVERIFY(t);
        const std::filesystem::path dir = std::filesystem::path(STRATA_SOURCE_DIR) / "tests/fuzz/corpus" / t->name;
        QVERIFY2(std::filesystem::is_directory(dir), dir.c_str());
        int files = 0;
        for (const auto& e : std::filesystem::directory_iterator(dir)) {
            if (!e.is_regular_file()) continue;
            std::ifstream in(e.path(), std::ios::binary);
            const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
            t->run(bytes.data(), bytes.size());
            ++files;
        }
        QVERIFY2(files > 0, qPrintable("no corpus files in " + QString::fromStdString(dir.string())));
    }
};

QTEST_GUILESS_MAIN(TestFuzzCorpus)
#include "test_fuzz_corpus.moc"
