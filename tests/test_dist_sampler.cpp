// Tests for the data-parallel pieces that need no MPI: the sampler's sharding of each global batch
// (batchShard, DataLoader::setShard), dropout's global counters, the model's gradients-ready hook and the
// gradient bucket plan (GradientBuckets over the single-rank communicator) and async mode's one-step-stale
// exchange (AsyncGradients), the thread group of one process (ThreadCommunicator), device lists, the
// data-parallel path in a job of one rank, each rank's memory check, and the Trainer's GPU path on pretend GPUs;
// the ranks' start-up comparison (compareAcrossRanks, and Trainers of one thread group given other options) and
// the thread group's bounded waits (a rank that never arrives, a pause that stops the clock).
// The multi-process and multi-replica runs are tests/dist (mpirun, --device cpu,cpu).
#include <QtTest>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/backend/Backend.h"
#include "core/backend/CpuBackend.h"
#include "core/data/DataLoader.h"
#include "core/dist/Agreement.h"
#include "core/dist/Communicator.h"
#include "core/dist/DeviceCommunicator.h"
#include "core/dist/ThreadCommunicator.h"
#include "core/graph/Model.h"
#include "core/train/BackendOptionsFor.h"
#include "core/train/GradientBuckets.h"
#include "core/train/MemoryEstimate.h"
#include "core/train/ReplicaRun.h"
#include "core/train/RunAgreement.h"
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

// A CPU backend that says it is a GPU: the Trainer's GPU data-parallel path (a device communicator made at
// setup, gradient buckets and async's buffers in "device" memory) on memory the host can read.
class PretendGpuBackend : public CpuBackend {
public:
    PretendGpuBackend(int index, const BackendOptions& options) : CpuBackend(options), m_index(index) {}
    Device device() const override { return Device::cuda(m_index); }

private:
    int m_index;
};

// The device communicator of a pretend GPU: every collective passed to the host communicator (the memory is
// the host's), and it says it takes device memory, as NCCL's does.
class PassThroughDeviceCommunicator : public Communicator {
public:
    explicit PassThroughDeviceCommunicator(Communicator& host) : m_host(host) {}
    int rank() const override { return m_host.rank(); }
    int size() const override { return m_host.size(); }
    std::string name() const override { return "pretend-device"; }
    bool acceptsDeviceMemory() const override { return true; }
    void allReduce(float* data, int64_t count, ReduceOp op) override { m_host.allReduce(data, count, op); }
    void allReduce(double* data, int64_t count, ReduceOp op) override { m_host.allReduce(data, count, op); }
    std::unique_ptr<CommRequest> iallReduce(float* data, int64_t count, ReduceOp op) override {
        return m_host.iallReduce(data, count, op);
    }
    void broadcast(void* data, int64_t bytes, int root) override { m_host.broadcast(data, bytes, root); }
    void barrier() override { m_host.barrier(); }
    void abortJob(const std::string& reason, int code) override { m_host.abortJob(reason, code); }
    std::string jobFailure() const override { return m_host.jobFailure(); }

private:
    Communicator& m_host;
};

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

    void automaticBucketSize() {
        QCOMPARE(autoBucketBytes(0), int64_t(256) << 10);                    // at least 256 KiB
        QCOMPARE(autoBucketBytes(int64_t(1700) << 10), int64_t(256) << 10);  // fashion_cnn: 1.7 MB
        QCOMPARE(autoBucketBytes(int64_t(40) << 20), int64_t(5) << 20);      // an eighth
        QCOMPARE(autoBucketBytes(int64_t(1) << 30), int64_t(25) << 20);      // at most PyTorch DDP's 25 MiB
    }

    // training.dist_mode is a choice of the settings table, parsed once where it comes in (file, flag); the
    // Trainer gets the enum. The one string "local-sgd:K" that files and --dist-mode took before still reads,
    // as dist_mode local-sgd and local_sgd_steps K.
    void distModesParse() {
        auto read = [](const Json& mode) {
            Json j = projectToJson(Project{});
            j["training"].erase("local_sgd_steps");
            j["training"]["dist_mode"] = mode;
            return projectFromJson(j).training;
        };
        QVERIFY(read("sync").distMode == DistMode::Sync);
        QVERIFY(read("async").distMode == DistMode::Async);
        QVERIFY(read("local-sgd").distMode == DistMode::LocalSgd);
        QCOMPARE(read("local-sgd").localSgdSteps, 8);  // the table's default
        const TrainingSettings local = read("local-sgd:5");
        QVERIFY(local.distMode == DistMode::LocalSgd);
        QCOMPARE(local.localSgdSteps, 5);
        for (const char* bad : {"", "Async", "local-sgd:0", "local-sgd:", "local-sgd:x", "async:2", "sync:1"}) {
            try {
                read(bad);
                QFAIL(bad);
            } catch (const ProjectError& e) {
                QVERIFY2(std::string(e.what()).find("/training/dist_mode") != std::string::npos, e.what());
            }
        }
        // Both forms in one file must agree.
        Json j = projectToJson(Project{});
        j["training"]["dist_mode"] = "local-sgd:4";
        j["training"]["local_sgd_steps"] = 4;
        QCOMPARE(projectFromJson(j).training.localSgdSteps, 4);
        j["training"]["local_sgd_steps"] = 6;
        QVERIFY_THROWS_EXCEPTION(ProjectError, projectFromJson(j));
        // Written back as the choice's name and the steps.
        Project p;
        p.training.distMode = DistMode::LocalSgd;
        p.training.localSgdSteps = 3;
        QCOMPARE(projectToJson(p)["training"]["dist_mode"].get<std::string>(), std::string("local-sgd"));
        QCOMPARE(projectToJson(p)["training"]["local_sgd_steps"].get<int>(), 3);
        // The flag: "local-sgd:K" sets both settings; K is checked against local_sgd_steps' range.
        const SettingInfo* flag = settingForFlag("--dist-mode");
        QVERIFY(flag);
        const std::vector<SettingValue> values = parseSettingFlag(*flag, "local-sgd:3");
        QCOMPARE(values.size(), size_t(2));
        QCOMPARE(values[0].value.get<int>(), int(DistMode::LocalSgd));
        QCOMPARE(values[1].setting->key, std::string("local_sgd_steps"));
        QCOMPARE(values[1].value.get<int>(), 3);
        QCOMPARE(parseSettingFlag(*flag, "async").size(), size_t(1));
        try {
            parseSettingFlag(*flag, "local-sgd:0");
            QFAIL("local-sgd:0");
        } catch (const std::invalid_argument& e) {
            QVERIFY2(
                std::string(e.what()).find(
                    "--dist-mode: local-sgd:0: training.local_sgd_steps 0 is out of range (1 to ") != std::string::npos,
                e.what());
        }
    }

    // The thread group of one process (ReplicaRun's host communicator): sums in rank order, means, doubles,
    // a broadcast from a rank other than 0, a non-blocking sum that runs when waited for, and an abort that
    // wakes a rank waiting in a collective.
    void threadGroupCollectives() {
        const int n = 3;
        std::vector<std::unique_ptr<Communicator>> comms = makeThreadCommunicators(n);
        std::vector<std::vector<float>> sums(n), means(n), deferred(n);
        std::vector<std::vector<double>> doubles(n);
        std::vector<std::string> texts(n);
        std::vector<int> testedBeforeWait(n, -1);
        auto rankMain = [&](int r) {
            Communicator& c = *comms[static_cast<size_t>(r)];
            // 1001 elements: slices of 334, 334, 333.
            std::vector<float> v(1001);
            for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((r + 1) * 1000 + static_cast<int>(i));
            sums[static_cast<size_t>(r)] = v;
            c.allReduce(sums[static_cast<size_t>(r)].data(), 1001, ReduceOp::Sum);
            means[static_cast<size_t>(r)] = v;
            c.allReduce(means[static_cast<size_t>(r)].data(), 1001, ReduceOp::Mean);
            doubles[static_cast<size_t>(r)] = {0.25 * r, 1e300};
            c.allReduce(doubles[static_cast<size_t>(r)].data(), 1, ReduceOp::Sum);  // the second stays
            texts[static_cast<size_t>(r)] = r == 2 ? "from rank two" : "";
            c.broadcast(texts[static_cast<size_t>(r)], 2);
            deferred[static_cast<size_t>(r)] = {static_cast<float>(r), 1.0f};
            std::unique_ptr<CommRequest> q = c.iallReduce(deferred[static_cast<size_t>(r)].data(), 2);
            testedBeforeWait[static_cast<size_t>(r)] = q->test() ? 1 : 0;
            c.barrier();
            q->wait();
            QVERIFY(q->test());
        };
        std::vector<std::thread> threads;
        for (int r = 1; r < n; ++r) threads.emplace_back(rankMain, r);
        rankMain(0);
        for (auto& t : threads) t.join();
        for (int r = 0; r < n; ++r) {
            const size_t k = static_cast<size_t>(r);
            for (int i : {0, 333, 334, 667, 668, 1000}) {
                QCOMPARE(sums[k][static_cast<size_t>(i)], static_cast<float>(6000 + 3 * i));
                QCOMPARE(means[k][static_cast<size_t>(i)], static_cast<float>(2000 + i));
            }
            QCOMPARE(doubles[k][0], 0.75);
            QCOMPARE(doubles[k][1], 1e300);
            QCOMPARE(texts[k], std::string("from rank two"));
            QCOMPARE(deferred[k][0], 3.0f);
            QCOMPARE(deferred[k][1], 3.0f);
            QCOMPARE(testedBeforeWait[k], 0);
            QVERIFY(comms[k]->jobFailure().empty());
        }

        // Rank 1 fails while ranks 0 and 2 wait in an all-reduce: both throw, naming rank 1 and its reason.
        std::vector<std::string> caught(n);
        auto waiting = [&](int r) {
            double x = 1;
            try {
                comms[static_cast<size_t>(r)]->allReduce(&x, 1);
            } catch (const CommAborted& e) {
                caught[static_cast<size_t>(r)] = e.what();
            }
        };
        std::thread t0(waiting, 0), t2(waiting, 2);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        comms[1]->abortJob("bad file");
        comms[0]->abortJob("a second failure is not the one reported");
        t0.join();
        t2.join();
        for (int r : {0, 2}) QCOMPARE(caught[static_cast<size_t>(r)], std::string("rank 1 of 3 failed: bad file"));
        QCOMPARE(comms[2]->jobFailure(), std::string("rank 1 of 3 failed: bad file"));
        QVERIFY_THROWS_EXCEPTION(CommAborted, comms[1]->barrier());
    }

    // compareAcrossRanks: every rank gets the same message, naming the first field in which a rank differs, every
    // rank that differs in it, the first differing entry (by key) and both values; equal fields give "".
    void ranksCompareTheirFields() {
        const int n = 3;
        std::vector<std::unique_ptr<Communicator>> comms = makeThreadCommunicators(n);
        auto compare = [&](const std::function<std::vector<AgreementField>(int)>& fieldsOf) -> std::string {
            std::vector<std::string> out(n);
            auto rankMain = [&](int r) {
                out[static_cast<size_t>(r)] = compareAcrossRanks(*comms[static_cast<size_t>(r)], fieldsOf(r));
            };
            std::vector<std::thread> threads;
            for (int r = 1; r < n; ++r) threads.emplace_back(rankMain, r);
            rankMain(0);
            for (auto& t : threads) t.join();
            for (int r = 1; r < n; ++r)
                if (out[static_cast<size_t>(r)] != out[0]) return "rank " + std::to_string(r) + " said otherwise";
            return out[0];
        };
        auto fields = [](const std::string& steps, const std::string& lr) {
            return std::vector<AgreementField>{
                {"the project's training settings", {{"training.epochs", "3"}, {"training.learning_rate", lr}}},
                {"max_steps (--max-steps)", {{"max_steps (--max-steps)", steps}}}};
        };
        QCOMPARE(compare([&](int) { return fields("none", "0.05"); }), std::string());
        // Ranks 1 and 2 differ in the second field, rank 2 in the first too: the first field is named, with rank 2.
        QCOMPARE(compare([&](int r) { return fields(r == 0 ? "none" : "5", r == 2 ? "0.04" : "0.05"); }),
                 std::string("rank 2 of 3 differs from rank 0 in the project's training settings, "
                             "training.learning_rate: rank 0 has 0.05, rank 2 has 0.04; every rank must run the same "
                             "project with the same options"));
        QCOMPARE(compare([&](int r) { return fields(r == 0 ? "none" : "5", "0.05"); }),
                 std::string("ranks 1 and 2 of 3 differ from rank 0 in max_steps (--max-steps): rank 0 has none, "
                             "rank 1 has 5; every rank must run the same project with the same options"));
        // An entry only one side has, and another build's number of fields.
        const std::string absent = compare([&](int r) {
            std::vector<AgreementField> f = fields("none", "0.05");
            if (r == 1) f[0].entries.emplace_back("training.nesterov", "true");
            return f;
        });
        QVERIFY2(absent.find("training.nesterov: rank 0 has (absent), rank 1 has true") != std::string::npos,
                 absent.c_str());
        const std::string builds = compare([&](int r) {
            std::vector<AgreementField> f = fields("none", "0.05");
            if (r == 2) f.push_back({"new", {{"new", "x"}}});
            return f;
        });
        QVERIFY2(builds.find("rank 2 of 3 compares 3 settings at the start, rank 0 2") != std::string::npos,
                 builds.c_str());
        for (const auto& c : comms) QVERIFY(c->jobFailure().empty());  // a difference is not a failure of the group
    }

    // Two Trainers of one thread group (as ReplicaRun's, but given other options, as two mpirun ranks with other
    // command lines would be): each stops at the start, before loading data, naming rank 1, the option and both
    // values. Before, rank 0 waited forever for a rank that had stopped after 5 steps.
    void trainersOfOneJobCompareTheirOptions() {
        Project p = test::convBatchNormProject();
        p.training.threads = 1;
        struct Case {
            std::function<void(TrainerOptions&)> change;
            std::string expected;
        };
        const std::vector<Case> cases = {
            {[](TrainerOptions& o) { o.maxSteps = 5; },
             "data parallel: rank 1 of 2 differs from rank 0 in max_steps (--max-steps): rank 0 has none, rank 1 "
             "has 5"},
            {[](TrainerOptions& o) { o.bucketBytes = 4096; },
             "rank 1 of 2 differs from rank 0 in bucket_size (--bucket-mb): rank 0 has automatic, rank 1 has 4096 "
             "bytes"},
            {[](TrainerOptions& o) { o.distMode = DistMode::Async; },
             "in dist_mode (--dist-mode): rank 0 has sync, rank 1 has async"},
            {[](TrainerOptions& o) { o.resumeFrom = "/nonexistent/run"; },
             "in resume (--resume): rank 0 has none, rank 1 has /nonexistent/run (latest)"},
        };
        for (const Case& c : cases) {
            std::vector<std::unique_ptr<Communicator>> comms = makeThreadCommunicators(2);
            std::vector<test::RecordedRun> out(2);
            std::vector<char> ok(2, 1);
            auto rankMain = [&](int r) {
                std::unique_ptr<Backend> be = test::makeCpuBackend(backendOptionsFor(p.training));
                TrainerOptions o;
                o.telemetryIntervalMs = 0;
                o.communicator = comms[static_cast<size_t>(r)].get();
                o.collectiveTimeoutSeconds = 20;  // without the comparison: a failure, not a hang
                if (r == 1) c.change(o);
                Trainer t(p, *be, &out[static_cast<size_t>(r)], o);
                ok[static_cast<size_t>(r)] = t.run() ? 1 : 0;
            };
            const auto start = std::chrono::steady_clock::now();
            std::thread other(rankMain, 1);
            rankMain(0);
            other.join();
            const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            for (int r = 0; r < 2; ++r) {
                QVERIFY(!ok[static_cast<size_t>(r)]);
                const std::string& e = out[static_cast<size_t>(r)].error;
                QVERIFY2(e.find(c.expected) != std::string::npos, e.c_str());
                QVERIFY2(out[static_cast<size_t>(r)].log.find("loading data") == std::string::npos,
                         out[static_cast<size_t>(r)].log.c_str());
                QVERIFY(out[static_cast<size_t>(r)].steps.empty());
            }
            QVERIFY2(took < 30, std::to_string(took).c_str());
        }
    }

    // The thread group's waits are bounded: a rank that never arrives fails the group after the bound, naming
    // the rank that waited, its step and collective and the rank it waited for; every rank then throws that
    // reason. While a rank is paused the clock stops, and restarts when the pause ends.
    void threadGroupWaitsAreBounded() {
        {
            std::vector<std::unique_ptr<Communicator>> comms = makeThreadCommunicators(3);
            for (const auto& c : comms) c->setTimeout(0.3);
            comms[0]->setStep(7);
            comms[0]->setActivity("the stop vote");
            std::string caught0, caught2;
            const auto start = std::chrono::steady_clock::now();
            std::thread t2([&] {
                double x = 1;
                try {
                    comms[2]->allReduce(&x, 1);
                } catch (const CommAborted& e) {
                    caught2 = e.what();
                }
            });
            double x = 1;
            try {
                comms[0]->allReduce(&x, 1);
            } catch (const CommAborted& e) {
                caught0 = e.what();
            }
            t2.join();
            const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            QVERIFY2(took >= 0.3 && took < 5, std::to_string(took).c_str());
            // Ranks 0 and 2 both ran out; the first to do so is the one reported, by both.
            QCOMPARE(caught0, caught2);
            QVERIFY2(caught0.find("waited longer than 0.3 s for rank 1 (--collective-timeout)") != std::string::npos,
                     caught0.c_str());
            QVERIFY2(caught0.rfind("rank 0 of 3: step 7: the stop vote", 0) == 0 ||
                         caught0.rfind("rank 2 of 3: at the start: a collective", 0) == 0,
                     caught0.c_str());
            QCOMPARE(comms[1]->jobFailure(), caught0);
            QVERIFY_THROWS_EXCEPTION(CommAborted, comms[1]->barrier());
        }
        {
            // Rank 1 pauses for 1 s while rank 0 waits with a bound of 0.4 s: no failure; rank 1 then joins.
            std::vector<std::unique_ptr<Communicator>> comms = makeThreadCommunicators(2);
            for (const auto& c : comms) c->setTimeout(0.4);
            comms[1]->setPaused(true);
            std::string caught;
            std::thread t0([&] {
                double x = 1;
                try {
                    comms[0]->allReduce(&x, 1);
                } catch (const CommAborted& e) {
                    caught = e.what();
                }
            });
            std::this_thread::sleep_for(std::chrono::milliseconds(1000));
            comms[1]->setPaused(false);
            std::this_thread::sleep_for(std::chrono::milliseconds(100));  // within the bound after the pause
            double y = 2;
            comms[1]->allReduce(&y, 1);
            t0.join();
            QVERIFY2(caught.empty(), caught.c_str());
            QCOMPARE(y, 3.0);
            // Timeout 0: forever (here: longer than a bound of 0.3 s would allow).
            for (const auto& c : comms) c->setTimeout(0);
            std::thread late([&] {
                std::this_thread::sleep_for(std::chrono::milliseconds(600));
                comms[1]->barrier();
            });
            comms[0]->barrier();
            late.join();
            QVERIFY(comms[0]->jobFailure().empty());
        }
    }

    // The data-parallel path in a job of one rank (dataParallelWithOneRank, the check one GPU runs with NCCL):
    // gradient buckets of 64 bytes and BatchNorm's global sums give the plain run's losses; async is one step
    // stale, so its losses differ.
    void dataParallelPathWithOneRank() {
        Project p = test::convBatchNormProject();
        p.training.threads = 1;
        auto train = [&](bool dp, bool async) {
            test::RecordedRun out;
            std::unique_ptr<Backend> be = test::makeCpuBackend(backendOptionsFor(p.training));
            std::unique_ptr<Communicator> single = makeSingleRankCommunicator();
            TrainerOptions o = test::oneRankDataParallel(*single, 64, async);
            if (!dp) o = TrainerOptions{};
            o.telemetryIntervalMs = 0;
            Trainer t(p, *be, &out, o);
            if (!t.run()) QTest::qFail(out.error.c_str(), __FILE__, __LINE__);
            return out;
        };
        const test::RecordedRun plain = train(false, false), sync = train(true, false), async = train(true, true);
        QVERIFY(plain.steps.size() > 10);
        QCOMPARE(sync.steps.size(), plain.steps.size());
        QCOMPARE(async.steps.size(), plain.steps.size());
        double syncGap = 0, asyncGap = 0;
        for (size_t i = 0; i < plain.steps.size(); ++i) {
            syncGap = std::max(syncGap, std::fabs(sync.steps[i] - plain.steps[i]));
            asyncGap = std::max(asyncGap, std::fabs(async.steps[i] - plain.steps[i]));
        }
        qInfo("loss gaps to the plain run: sync %.3g, async %.3g; losses first %.3g, last %.3g plain, %.3g async",
              syncGap, asyncGap, plain.steps.front(), plain.steps.back(), async.steps.back());
        QVERIFY(syncGap < 1e-5);
        QVERIFY(asyncGap > 1e-4);
        QVERIFY(async.steps.back() < 0.5 * async.steps.front());  // stale by a step, it still learns
    }

    // A data-parallel rank holds its share of the global batch, so that share is what must fit: a memory limit
    // between the estimates of batch 30 and batch 60 refuses one process on batch 60 and lets two replicas
    // (30 each) train.
    void eachRankNeedsRoomForItsShare() {
        Project p = test::convBatchNormProject();
        p.training.threads = 1;
        const uint64_t half = estimateTrainingMemory(p.graph, p.training, 30).totalOn(true),
                       whole = estimateTrainingMemory(p.graph, p.training, 60).totalOn(true);
        QVERIFY(half < whole);
        TrainerOptions o;
        o.telemetryIntervalMs = 0;
        o.maxSteps = 2;
        o.availableMemoryBytes = (half + whole) / 2;
        std::unique_ptr<Backend> a = test::makeCpuBackend(backendOptionsFor(p.training)),
                                 b = test::makeCpuBackend(backendOptionsFor(p.training));
        test::RecordedRun one, two;
        QVERIFY(!Trainer(p, *a, &one, o).run());
        QVERIFY2(one.error.find("does not fit") != std::string::npos, one.error.c_str());
        ReplicaRun replicas(p, {a.get(), b.get()}, &two, o);
        QVERIFY2(replicas.run(), two.error.c_str());
        QVERIFY2(
            two.log.find("memory: rank 0's share of the global batch 60 over 2 ranks, 30: about") != std::string::npos,
            two.log.c_str());
    }

    // The Trainer's GPU path without a GPU: two pretend GPUs in one process (ReplicaRun) ask the registry for
    // their device communicator at setup and sum "device" gradients through it, in buckets (sync) and in
    // async's device-side buffers; the results equal the CPU replicas' (sync: one process), so the device path
    // moves the same numbers. Without a registered communicator a GPU rank is refused with the reason.
    void gpuDataParallelPathWithPretendGpus() {
        Project p = test::convBatchNormProject();
        p.training.threads = 1;
        const BackendOptions options = backendOptionsFor(p.training);
        auto train = [&](bool pretend, bool async) {
            std::vector<std::unique_ptr<Backend>> owned;
            std::vector<Backend*> list;
            for (int i = 0; i < 2; ++i) {
                owned.push_back(pretend ? std::unique_ptr<Backend>(std::make_unique<PretendGpuBackend>(i, options))
                                        : test::makeCpuBackend(options));
                list.push_back(owned.back().get());
            }
            TrainerOptions o;
            o.telemetryIntervalMs = 0;
            o.bucketBytes = 256;
            o.distMode = async ? DistMode::Async : DistMode::Sync;
            test::RecordedRun out;
            ReplicaRun run(p, list, &out, o);
            if (!run.run()) QTest::qFail(out.error.c_str(), __FILE__, __LINE__);
            return out;
        };
        registerDeviceCommunicator(DeviceType::Cuda, [](Communicator& host, Backend&) {
            return std::make_unique<PassThroughDeviceCommunicator>(host);
        });
        const test::RecordedRun gpuSync = train(true, false), cpuSync = train(false, false),
                                gpuAsync = train(true, true), cpuAsync = train(false, true);
        QVERIFY2(gpuSync.log.find("data parallel: rank 0 of 2 (pretend-device)") != std::string::npos,
                 gpuSync.log.c_str());
        QVERIFY2(cpuSync.log.find("data parallel: rank 0 of 2 (threads)") != std::string::npos, cpuSync.log.c_str());
        QVERIFY(cpuSync.steps.size() > 10);
        for (const auto& [gpu, cpu] : {std::pair{&gpuSync, &cpuSync}, std::pair{&gpuAsync, &cpuAsync}}) {
            QCOMPARE(gpu->steps.size(), cpu->steps.size());
            for (size_t i = 0; i < cpu->steps.size(); ++i) QCOMPARE(gpu->steps[i], cpu->steps[i]);
        }
        bool asyncDiffers = false;
        for (size_t i = 0; i < cpuSync.steps.size(); ++i) asyncDiffers |= cpuAsync.steps[i] != cpuSync.steps[i];
        QVERIFY(asyncDiffers);

        registerDeviceCommunicator(DeviceType::Cuda, nullptr);
        test::RecordedRun refused;
        PretendGpuBackend a(0, options), b(1, options);
        TrainerOptions o;
        o.telemetryIntervalMs = 0;
        QVERIFY(!ReplicaRun(p, {&a, &b}, &refused, o).run());
        QVERIFY2(refused.error.find("cuda:0: this build has no communicator for its device memory (NCCL)") !=
                     std::string::npos,
                 refused.error.c_str());
    }

    void deviceListsParse() {
        QCOMPARE(Device::parseList("cpu").size(), size_t(1));
        const std::vector<Device> two = Device::parseList("cuda:0,cuda:1");
        QCOMPARE(two.size(), size_t(2));
        QVERIFY(two[1] == Device::cuda(1));
        QCOMPARE(Device::parseList("cpu,cpu").size(), size_t(2));  // CPU replicas, for checks
        for (const char* bad : {"", "cuda:0,", ",cpu", "cuda:0,cuda:0", "cuda:1,cuda,cuda:0", "cpu;cpu", "gpu"}) {
            try {
                Device::parseList(bad);
                QFAIL(bad);
            } catch (const std::invalid_argument& e) {
                QVERIFY2(std::string(e.what()).find("device") != std::string::npos, e.what());
            }
        }
    }
};

QTEST_GUILESS_MAIN(TestDistSampler)
#include "test_dist_sampler.moc"
