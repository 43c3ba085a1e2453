// Tests for the data-parallel pieces that need no MPI: the sampler's sharding of each global batch
// (batchShard, DataLoader::setShard), dropout's global counters, the model's gradients-ready hook and the
// gradient bucket plan (GradientBuckets over the single-rank communicator) and async mode's one-step-stale
// exchange (AsyncGradients). The multi-process checks are
// tests/dist (mpirun).
#include <QtTest>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "core/backend/Backend.h"
#include "core/data/DataLoader.h"
#include "core/dist/Communicator.h"
#include "core/graph/Model.h"
#include "core/train/GradientBuckets.h"
#include "core/train/Trainer.h"
#include "tests/support/TestBackends.h"
#include "tests/support/TestProjects.h"

using namespace strata;

namespace {

// A split of `count` samples of one value each: the value is the sample's index.
DataSplit indexSplit(int64_t count) {
    DataSplit s;
    s.sampleShape = Shape{1};
    s.count = count;
    for (int64_t i = 0; i < count; ++i) {
        s.inputs.push_back(static_cast<float>(i));
        s.labels.push_back(static_cast<int32_t>(i % 3));
    }
    return s;
}

}  // namespace

class TestDistSampler : public QObject {
    Q_OBJECT
private slots:
    void shardsPartitionEveryBatch() {
        for (int size = 1; size <= 5; ++size)
            for (int64_t batch = 0; batch <= 13; ++batch) {
                int64_t next = 0, smallest = batch, largest = 0;
                for (int r = 0; r < size; ++r) {
                    const BatchShard s = batchShard(batch, r, size);
                    QCOMPARE(s.begin, next);  // contiguous, in rank order
                    next = s.begin + s.count;
                    smallest = std::min(smallest, s.count);
                    largest = std::max(largest, s.count);
                }
                QCOMPARE(next, batch);
                QVERIFY(largest - smallest <= 1);
            }
        QCOMPARE(batchShard(10, 2, 3).count, int64_t(4));
        QCOMPARE(batchShard(1, 0, 3).count, int64_t(0));  // fewer samples than ranks: some get none
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, batchShard(4, 3, 3));
    }

    // Every rank's loader, same seed: the shards of each batch are disjoint, together they are the batch one
    // process would get (same order), and each epoch covers every sample once, uneven last batch included.
    void loadersShardEachEpoch() {
        const DataSplit split = indexSplit(23);  // batch 5: 5,5,5,5,3; on 3 ranks 1,1,1 then 1,2 ...
        for (int ranks : {2, 3, 4}) {
            DataLoader whole(split, 5, true, 99);
            std::vector<std::unique_ptr<DataLoader>> parts;
            for (int r = 0; r < ranks; ++r) {
                parts.push_back(std::make_unique<DataLoader>(split, 5, true, 99));
                parts.back()->setShard(r, ranks);
            }
            for (int epoch = 1; epoch <= 2; ++epoch) {
                whole.startEpoch(epoch);
                for (auto& p : parts) p->startEpoch(epoch);
                std::multiset<int> seen;
                Batch w, b;
                int steps = 0;
                while (whole.next(w)) {
                    ++steps;
                    std::vector<float> joined;
                    for (int r = 0; r < ranks; ++r) {
                        QVERIFY(parts[static_cast<size_t>(r)]->next(b));
                        QCOMPARE(b.globalSize, w.size);
                        QCOMPARE(b.first, batchShard(w.size, r, ranks).begin);
                        QCOMPARE(b.size, batchShard(w.size, r, ranks).count);
                        for (int64_t i = 0; i < b.size; ++i) {
                            joined.push_back(b.inputs[static_cast<size_t>(i)]);
                            seen.insert(static_cast<int>(b.inputs[static_cast<size_t>(i)]));
                        }
                    }
                    QCOMPARE(joined, w.inputs);
                }
                QCOMPARE(steps, 5);
                for (auto& p : parts) QVERIFY(!p->next(b));  // every rank ends the epoch together
                QCOMPARE(static_cast<int>(seen.size()), 23);
                QCOMPARE(static_cast<int>(std::set<int>(seen.begin(), seen.end()).size()), 23);  // once each
            }
        }
    }

    // Dropout's counters: the mask of a slice drawn with `first` is the whole batch's mask there.
    void dropoutSliceMatchesWholeBatch() {
        std::vector<std::unique_ptr<Backend>> backends;
        backends.push_back(test::makeReferenceBackend());
        backends.push_back(test::makeCpuBackend());
        for (auto& owned : backends) {
            Backend* be = owned.get();
            const int64_t n = 60;
            std::vector<float> x(n, 1.0f);
            Tensor X = be->fromHost(Shape{n}, x.data()), Y = be->empty(Shape{n}), Z = be->empty(Shape{n});
            be->dropoutForward(Y.f32(), X.f32(), n, 0.5f, 1234);
            be->dropoutForward(Z.f32(), X.f32(), 25, 0.5f, 1234, 0);
            be->dropoutForward(Z.f32() + 25, X.f32(), 35, 0.5f, 1234, 25);
            std::vector<float> y(n), z(n);
            be->toHost(Y, y.data());
            be->toHost(Z, z.data());
            QCOMPARE(z, y);
            be->dropoutForward(Z.f32(), X.f32(), n, 0.5f, 1234, 1);  // another offset: another mask
            be->toHost(Z, z.data());
            QVERIFY(z != y);
        }
    }

    // The hook reports finished suffixes of the packed gradient block, shrinking to 0; the bucket plan cuts the
    // block at parameter boundaries into ranges that cover it, from the end.
    void gradientBucketsFollowBackward() {
        std::unique_ptr<Backend> owned = test::makeCpuBackend();
        Backend& be = *owned;
        std::unique_ptr<Model> model = compile(test::blobsMlpProject("b", 16, 4, true).graph, be, 1);
        const int64_t total = model->packedGradients().numel();
        std::vector<int64_t> froms;
        model->setGradientsReadyHook([&](int64_t from) { froms.push_back(from); });
        std::vector<float> in(3 * 16, 0.5f);
        Tensor input = be.fromHost(Shape{3, 16}, in.data());
        const Tensor& out = model->forward(input, true, 5);
        Tensor dout = be.zeros(out.shape());
        model->zeroGrad();
        model->backward(dout);
        QVERIFY(!froms.empty());
        QCOMPARE(froms.back(), int64_t(0));
        for (size_t i = 1; i < froms.size(); ++i) QVERIFY(froms[i] < froms[i - 1]);

        auto comm = makeSingleRankCommunicator();
        GradientBuckets tiny(*comm, *model, 4);  // one parameter per bucket at least
        GradientBuckets huge(*comm, *model, int64_t(1) << 30);
        QCOMPARE(huge.bucketCount(), 1);
        QCOMPARE(huge.bucketRange(0), std::make_pair(int64_t(0), total));
        QCOMPARE(tiny.bucketCount(), static_cast<int>(froms.size()) * 2);  // weight and bias per Dense
        int64_t hi = total;
        for (int i = 0; i < tiny.bucketCount(); ++i) {
            QCOMPARE(tiny.bucketRange(i).second, hi);
            QVERIFY(tiny.bucketRange(i).first < hi);
            hi = tiny.bucketRange(i).first;
        }
        QCOMPARE(hi, int64_t(0));
        tiny.beginStep();
        for (int64_t from : froms) tiny.ready(from);
        tiny.finish();
        QVERIFY(tiny.lastStep().hiddenFraction() >= 0.0);
    }

    // Async mode: each exchange hands back the previous step's (summed) gradients with their learning rate and
    // keeps this step's; the first has nothing to give; drain gives the last and leaves nothing pending.
    void asyncGradientsAreOneStepStale() {
        std::unique_ptr<Backend> owned = test::makeCpuBackend();
        std::unique_ptr<Model> model = compile(test::blobsMlpProject("b", 16, 4, true).graph, *owned, 1);
        const Tensor& g = model->packedGradients();
        const auto n = static_cast<size_t>(g.numel());
        float* block = g.f32();
        auto fill = [&](float base) {
            for (size_t i = 0; i < n; ++i) block[i] = base + static_cast<float>(i);
        };
        auto holds = [&](float base) {
            for (size_t i = 0; i < n; ++i)
                if (block[i] != base + static_cast<float>(i)) return false;
            return true;
        };
        auto comm = makeSingleRankCommunicator();
        AsyncGradients async(*comm, *model);
        QVERIFY(!async.drain());  // nothing in flight
        fill(100.0f);
        QVERIFY(!async.exchange(0.1));  // step 1: nothing to apply yet
        QVERIFY(async.pending());
        QVERIFY(holds(100.0f));  // left as it was
        fill(200.0f);
        QVERIFY(async.exchange(0.2));  // step 2 applies step 1's
        QVERIFY(holds(100.0f));
        QCOMPARE(async.previousLearningRate(), 0.1);
        async.progress();
        fill(300.0f);
        QVERIFY(async.exchange(0.3));
        QVERIFY(holds(200.0f));
        QCOMPARE(async.previousLearningRate(), 0.2);
        QVERIFY(async.lastStep().windowSeconds >= 0.0);
        fill(-1.0f);
        QVERIFY(async.drain());  // the end of an epoch: step 3's
        QVERIFY(holds(300.0f));
        QCOMPARE(async.previousLearningRate(), 0.3);
        QVERIFY(!async.pending());
        QVERIFY(!async.drain());
        fill(400.0f);
        QVERIFY(!async.exchange(0.4));  // the next epoch starts afresh
    }

    void distModesParse() {
        QCOMPARE(parseDistMode("sync").localSgdSteps, 0);
        QVERIFY(!parseDistMode("sync").async);
        QVERIFY(parseDistMode("async").async);
        QCOMPARE(parseDistMode("local-sgd:8").localSgdSteps, 8);
        QVERIFY(!parseDistMode("local-sgd:8").async);
        for (const char* bad : {"", "Async", "local-sgd:0", "local-sgd:", "local-sgd:x", "async:2"}) {
            try {
                parseDistMode(bad);
                QFAIL(bad);
            } catch (const std::invalid_argument& e) {
                QVERIFY(std::string(e.what()).find("training.dist_mode") != std::string::npos);
            }
        }
    }
};

QTEST_GUILESS_MAIN(TestDistSampler)
#include "test_dist_sampler.moc"
