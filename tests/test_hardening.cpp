// Hardening (issue 18): sizes that cannot wrap, divergence caught, options and metadata range-checked.
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/tensor/Device.h"
#include "core/tensor/Shape.h"
#include "core/train/Trainer.h"
#include "tests/support/TestBackends.h"
#include "tests/support/TestProjects.h"

using namespace strata;

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
        QVERIFY2(!rec.errors.empty() && contains(rec.errors.front(), "dataset.synthetic_shape [65536, 65536, 65536, "
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
