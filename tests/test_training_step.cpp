// The training step in parts (core/train/TrainingStep, issue 36). Profile runs the Trainer's own step: its
// losses equal a training run's first steps' exactly (dropout, learning-rate warm-up, clipping, Adam, fp16 loss
// scaling, across an epoch boundary). One step calls its parts in order (its phases, the hook after the update
// with the update applied, the hook after the metrics) and equals forward, loss, backward and update written out.
// The divergence hook ends a run naming the step, the epoch and the last good checkpoint.
#include <QTest>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/backend/BackendRegistry.h"
#include "core/data/DataLoader.h"
#include "core/graph/Model.h"
#include "core/train/BackendOptionsFor.h"
#include "core/train/BatchLoss.h"
#include "core/train/BatchStager.h"
#include "core/train/Checkpoint.h"
#include "core/train/DataParallel.h"
#include "core/train/Optimizer.h"
#include "core/train/Precision.h"
#include "core/train/Profile.h"
#include "core/train/StepHooks.h"
#include "core/train/Trainer.h"
#include "core/train/TrainingStep.h"
#include "tests/support/TestProjects.h"

using namespace strata;

namespace {

// A hook that writes down when the step calls it, and whether the weights had changed by then.
struct RecordingHook : StepHook {
    std::vector<std::string>* events = nullptr;
    Model* model = nullptr;
    std::vector<float> before;
    bool updatedBeforeHook = false;
    StepOutcome seen;
    void afterUpdate(const StepInput&) override {
        events->push_back("afterUpdate");
        updatedBeforeHook = modelWeights(*model).at("dense1.weight") != before;
    }
    void afterMetrics(const StepInput&, const StepOutcome& out) override {
        events->push_back("afterMetrics");
        seen = out;
    }
};

const char* phaseName(StepPhase p) {
    switch (p) {
        case StepPhase::Forward: return "Forward";
        case StepPhase::Loss: return "Loss";
        case StepPhase::ZeroGrad: return "ZeroGrad";
        case StepPhase::Backward: return "Backward";
        case StepPhase::Update: return "Update";
        case StepPhase::Metrics: return "Metrics";
    }
    return "?";
}

// The first batch of the project's training split, in order.
Batch firstBatch(const Project& p, const DatasetBundle& data) {
    DataLoader loader(data.train, p.training.batchSize, false, p.training.seed);
    loader.startEpoch(0);
    Batch b;
    if (!loader.next(b)) qFatal("no batch");
    return b;
}

}  // namespace

class TestTrainingStep : public QObject {
    Q_OBJECT

private slots:
    void profileRunsTheTrainersSteps_data() {
        QTest::addColumn<QString>("precision");
        QTest::newRow("fp32") << "fp32";
        QTest::newRow("fp16") << "fp16";
    }
    // The profile's steps are a training run's first steps, so their losses are the same numbers: the same
    // batches, dropout masks, learning rates (a warm-up), clipping, optimizer and (fp16) loss scale. 33 steps
    // cross the end of the first epoch (900 training samples in batches of 32).
    void profileRunsTheTrainersSteps() {
        QFETCH(QString, precision);
        Project p = test::blobsMlpProject("profile-steps", 16, 4, true);
        p.training.optimizer = OptimizerKind::Adam;
        p.training.learningRate = 0.01;
        p.training.warmupSteps = 10;
        p.training.clipNorm = 0.5;
        p.training.epochs = 2;
        p.training.deterministic = true;
        p.training.precision = parseComputePrecision(precision.toStdString());
        auto backend = backendRegistry().create(Device::cpu(), backendOptionsFor(p.training));

        ProfileOptions po;
        po.warmupSteps = 3;
        po.steps = 15;
        po.measureRoofline = false;
        const ProfileReport r = profileProject(p, "", *backend, po);
        QCOMPARE(r.losses.size(), size_t(33));

        test::RecordedRun run;
        TrainerOptions o;
        o.maxSteps = 33;
        o.telemetryIntervalMs = 0;
        Trainer trainer(p, *backend, &run, o);
        QVERIFY2(trainer.run(), run.error.c_str());
        QCOMPARE(run.steps.size(), size_t(33));
        for (size_t i = 0; i < run.steps.size(); ++i)
            QVERIFY2(r.losses[i] == run.steps[i], qPrintable(QString("step %1: profile %2, training %3")
                                                                 .arg(i + 1)
                                                                 .arg(r.losses[i], 0, 'g', 17)
                                                                 .arg(run.steps[i], 0, 'g', 17)));
        // The steps trained: the loss fell.
        QVERIFY(run.steps.back() < run.steps.front());
    }

    // One step calls its parts in order, the update lands before the after-update hook (pruning masks rely on
    // it), and the step is forward, loss, zeroing, backward and the update written out, to the bit.
    void stepCallsItsPartsInOrder() {
        Project p = test::blobsMlpProject("step-order", 16, 4, false);
        p.training.deterministic = true;
        auto backend = backendRegistry().create(Device::cpu(), backendOptionsFor(p.training));
        const DatasetBundle data = loadDataset(p.dataset, "");
        const Batch batch = firstBatch(p, data);

        // The step.
        std::unique_ptr<Model> model = compile(p.graph, *backend, p.training.seed);
        Optimizer optimizer(*model, p.training);
        BatchLoss loss(*backend, p.training.loss, model->outputShape(), p.training.batchSize, data.numClasses);
        Precision precision(*backend, 65536.0f, 2000);
        DataParallel alone;
        TrainingStep step(*model, optimizer, loss, precision, alone, 0.0);
        std::vector<std::string> events;
        RecordingHook hook;
        hook.events = &events;
        hook.model = model.get();
        hook.before = modelWeights(*model).at("dense1.weight");
        step.addHook(&hook);
        step.setPhaseHook([&](StepPhase ph) { events.push_back(phaseName(ph)); });
        BatchStager stager(*backend, model->inputShape(), p.training.batchSize);
        const BatchStager::Staged staged = stager.stage(batch);
        bool consumed = false;
        const StepOutcome out = step.run(StepInput{.batch = batch,
                                                   .input = staged.input,
                                                   .labels = staged.labels,
                                                   .index = 0,
                                                   .epoch = 1,
                                                   .learningRate = 0.05,
                                                   .seed = stepSeed(p.training.seed, 0)},
                                         [&] {
                                             consumed = true;
                                             events.push_back("inputConsumed");
                                         });
        const std::vector<std::string> expected = {"Forward",     "Loss",   "ZeroGrad", "inputConsumed", "Backward",
                                                   "afterUpdate", "Update", "Metrics",  "afterMetrics"};
        auto joined = [](const std::vector<std::string>& v) {
            std::string s;
            for (const std::string& e : v) s += e + " ";
            return s;
        };
        QCOMPARE(joined(events), joined(expected));
        QVERIFY(consumed);
        QVERIFY(hook.updatedBeforeHook);
        QVERIFY(out.applied && out.haveGradients);
        QCOMPARE(out.samples, batch.size);
        QCOMPARE(out.loss, out.metrics.lossSum / static_cast<double>(batch.size));
        QCOMPARE(hook.seen.loss, out.loss);
        QVERIFY(std::isnan(out.gradNorm));  // no clipping: not measured

        // Written out on a second model from the same seed.
        std::unique_ptr<Model> model2 = compile(p.graph, *backend, p.training.seed);
        Optimizer optimizer2(*model2, p.training);
        BatchLoss loss2(*backend, p.training.loss, model2->outputShape(), p.training.batchSize, data.numClasses);
        BatchStager stager2(*backend, model2->inputShape(), p.training.batchSize);
        const BatchStager::Staged staged2 = stager2.stage(batch);
        const Tensor& logits = model2->forward(staged2.input, true, stepSeed(p.training.seed, 0), batch.first);
        loss2.compute(logits, batch, staged2.labels, true);
        model2->zeroGrad();
        model2->backward(loss2.gradient(batch.size));
        optimizer2.step(0.05);
        const Backend::StepMetrics m = loss2.metrics(logits, batch, staged2.labels);
        QCOMPARE(m.lossSum, out.metrics.lossSum);
        QCOMPARE(m.correct, out.metrics.correct);
        QVERIFY(modelWeights(*model2) == modelWeights(*model));
    }

    // The divergence hook ends the run with the step (1-based), the epoch, the layer and the last checkpoint.
    void divergenceHookNamesTheStep() {
        Project p = test::blobsMlpProject("divergence-hook", 16, 4, false);
        auto backend = backendRegistry().create(Device::cpu(), backendOptionsFor(p.training));
        std::unique_ptr<Model> model = compile(p.graph, *backend, p.training.seed);
        DivergenceHook hook(*model, p.graph, 4, [] { return std::string("/runs/epoch-1.safetensors"); });
        const Batch batch;
        const Tensor none;
        const StepInput in{.batch = batch, .input = none, .labels = none, .index = 41, .epoch = 2, .learningRate = 0.5};
        StepOutcome out;
        out.loss = std::numeric_limits<double>::quiet_NaN();
        try {
            hook.afterMetrics(in, out);
            QFAIL("a NaN loss went on");
        } catch (const std::runtime_error& e) {
            const std::string m = e.what();
            QVERIFY2(m.find("step 42 (epoch 2): the loss is NaN") == 0, e.what());
            QVERIFY2(m.find("the last good checkpoint is /runs/epoch-1.safetensors") != std::string::npos, e.what());
        }
        out.loss = 1.0;
        hook.afterMetrics(in, out);  // the first finite loss: the reference
        out.loss = 1e6;
        try {
            hook.afterMetrics(in, out);
            QFAIL("a loss 10^6 times the first went on");
        } catch (const std::runtime_error& e) {
            const std::string m = e.what();
            QVERIFY2(m.find("step 42 (epoch 2): ") == 0, e.what());
            QVERIFY2(m.find("lower the learning rate (now 0.5)") != std::string::npos, e.what());
        }
    }
};

QTEST_GUILESS_MAIN(TestTrainingStep)
#include "test_training_step.moc"
