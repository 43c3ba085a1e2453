// DataParallel: see DataParallel.h.
#include "core/train/DataParallel.h"

#include <map>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "core/data/DataLoader.h"
#include "core/graph/Model.h"
#include "core/train/Checkpoint.h"
#include "core/train/MemoryEstimate.h"
#include "core/train/Optimizer.h"
#include "core/train/RankGroup.h"
#include "core/train/Trainer.h"

namespace strata {

int64_t DataParallel::globalSamples(const Batch& batch) const { return batch.size; }

namespace {

// BatchNorm's cross-replica sums (LayerContext::replicas) over a communicator.
class CommunicatorSum : public ReplicaSum {
public:
    explicit CommunicatorSum(Communicator& comm) : m_comm(comm) {}
    void sum(double* values, int64_t count) override {
        m_comm.setActivity("BatchNorm's global sums");
        m_comm.allReduce(values, count, ReduceOp::Sum);
    }

private:
    Communicator& m_comm;
};

// What every data-parallel mode shares: the global batch, the metrics' sums, and the replicas' average.
class Ranks : public DataParallel {
public:
    Ranks(RankGroup& ranks, Model& model, const std::string& description)
        : m_ranks(ranks), m_model(model), m_description(description) {}
    ~Ranks() override { m_model.setGradientsReadyHook({}); }

    std::string description() const override { return m_description; }
    int64_t globalSamples(const Batch& batch) const override { return batch.globalSize; }
    void reduceMetrics(Backend::StepMetrics& metrics) override {
        double sums[2] = {metrics.lossSum, static_cast<double>(metrics.correct)};
        m_ranks.sum(sums, 2, "the sums of the step's loss and accuracy");
        metrics.lossSum = sums[0];
        metrics.correct = static_cast<int64_t>(sums[1]);
    }

protected:
    // The parameters (unless statisticsOnly) and BatchNorm running statistics become the average over the ranks,
    // each weighted by the samples it trained on since the last average (host memory: CPU backend).
    void averageReplicas(bool statisticsOnly) {
        m_ranks.at("the averaging of the replicas");
        Communicator& comm = m_ranks.comm();
        double total = m_samplesSinceAverage;
        comm.allReduce(&total, 1, ReduceOp::Sum);
        const float weight = total > 0 ? static_cast<float>(m_samplesSinceAverage / total) : 0.0f;
        m_samplesSinceAverage = 0;
        if (total <= 0) return;
        Backend& backend = m_model.backend();
        auto average = [&](const Tensor& t) {
            if (!t.defined() || t.numel() == 0) return;
            backend.scale(t.f32(), weight, t.numel());
            backend.synchronize();
            comm.allReduce(t.f32(), t.numel(), ReduceOp::Sum);
        };
        if (!statisticsOnly) average(m_model.packedValues());
        for (const auto& np : m_model.namedParameters())
            if (!np.param->trainable && !np.param->frozen) average(np.param->value);  // frozen: equal everywhere
    }

    float share(const Batch& batch) const {
        return static_cast<float>(static_cast<double>(batch.size) / static_cast<double>(batch.globalSize));
    }

    RankGroup& m_ranks;
    Model& m_model;
    std::string m_description;
    double m_samplesSinceAverage = 0;
};

class Sync : public Ranks {
public:
    Sync(RankGroup& ranks, Model& model, int64_t bucketBytes, bool automatic, const std::string& prefix)
        : Ranks(ranks, model, prefix), m_replicaSum(ranks.comm()) {
        m_buckets = std::make_unique<GradientBuckets>(ranks.comm(), model, bucketBytes);
        model.setReplicaSum(&m_replicaSum);
        model.setGradientsReadyHook([this](int64_t from) { m_buckets->ready(from); });
        std::ostringstream msg;
        msg << "sync: gradients summed in " << m_buckets->bucketCount() << " bucket(s) of up to "
            << formatBytes(static_cast<uint64_t>(bucketBytes)) << (automatic ? " (automatic)" : "")
            << " while backward runs";
        m_description += msg.str();
    }
    ~Sync() override { m_model.setReplicaSum(nullptr); }

    float lossShare(const Batch& batch) const override { return share(batch); }
    void beginBackward(const Batch&) override { m_buckets->beginStep(); }
    bool idlesOnEmptyShard() const override { return true; }
    void finishBackward() override { m_buckets->finish(); }
    const GradientBuckets::StepTimes* communication() const override { return &m_buckets->lastStep(); }

private:
    CommunicatorSum m_replicaSum;
    std::unique_ptr<GradientBuckets> m_buckets;
};

class LocalSgd : public Ranks {
public:
    LocalSgd(RankGroup& ranks, Model& model, int steps, const std::string& prefix)
        : Ranks(ranks, model,
                prefix + "local SGD: parameters averaged every " + std::to_string(steps) +
                    " step(s) and at each epoch's end"),
          m_steps(steps) {}

    bool updatesOnEmptyShard() const override { return false; }
    void afterUpdate(int64_t step, const Batch& batch) override {
        m_samplesSinceAverage += static_cast<double>(batch.size);
        if ((step + 1) % m_steps == 0) averageReplicas(false);
    }
    // Every rank then validates and saves the same weights.
    void endEpoch() override { averageReplicas(false); }

private:
    int m_steps;
};

class Async : public Ranks {
public:
    Async(RankGroup& ranks, Model& model, Optimizer& optimizer, double clipNorm, const std::string& prefix)
        : Ranks(ranks, model,
                prefix +
                    "async: each step applies the previous step's gradients, summed while it computed "
                    "(BatchNorm on each rank's own shard)"),
          m_optimizer(optimizer),
          m_clipNorm(clipNorm),
          m_grads(ranks.comm(), model) {
        model.setGradientsReadyHook([this](int64_t) { m_grads.progress(); });
    }

    float lossShare(const Batch& batch) const override { return share(batch); }
    void beginBackward(const Batch& batch) override { m_samplesSinceAverage += static_cast<double>(batch.size); }
    bool idlesOnEmptyShard() const override { return true; }
    // The block now holds the previous step's summed gradients (none on the first step), applied with that
    // step's learning rate; this step's are summed while the next one computes.
    bool exchange(double learningRate, double& applyWith) override {
        const bool have = m_grads.exchange(learningRate);
        applyWith = m_grads.previousLearningRate();
        return have;
    }
    // The last step's gradients are applied before the epoch (or the run) ends, on every rank alike (the loop
    // ends at the same step everywhere), so validation and checkpoints see every update; then BatchNorm's
    // running statistics are averaged.
    void endEpoch() override {
        if (m_grads.drain()) {
            if (m_clipNorm > 0) m_optimizer.clipGradNorm(m_clipNorm);
            m_optimizer.step(m_grads.previousLearningRate());
        }
        averageReplicas(true);
    }
    const GradientBuckets::StepTimes* communication() const override { return &m_grads.lastStep(); }

private:
    Optimizer& m_optimizer;
    double m_clipNorm;
    AsyncGradients m_grads;
};

// Rank 0's weights and state (BatchNorm statistics) to every rank.
void broadcastWeights(RankGroup& ranks, Model& model) {
    ranks.at("the broadcast of rank 0's weights");
    std::map<std::string, std::vector<float>> w = modelWeights(model);
    for (auto& [name, v] : w) ranks.comm().broadcast(v.data(), static_cast<int64_t>(v.size() * sizeof(float)), 0);
    applyWeights(model, w);
}

}  // namespace

std::unique_ptr<DataParallel> makeDataParallel(RankGroup& ranks, Model& model, Optimizer& optimizer,
                                               const DataParallelSettings& s) {
    if (!ranks.dataParallel()) return std::make_unique<DataParallel>();
    broadcastWeights(ranks, model);
    std::ostringstream prefix;
    prefix << "data parallel: rank " << ranks.rank() << " of " << ranks.size() << " (" << ranks.comm().name()
           << "), global batch " << s.globalBatch << ", ";
    if (s.localSgdSteps > 0) return std::make_unique<LocalSgd>(ranks, model, s.localSgdSteps, prefix.str());
    if (s.async) {
        if (s.scalesLoss)
            throw std::invalid_argument(
                "training.dist_mode async: not with fp16 precision (the loss scale "
                "of a step would be undone on the next one's gradients); use sync");
        if (s.prunes) throw std::invalid_argument("training.dist_mode async: not with pruning; use sync");
        return std::make_unique<Async>(ranks, model, optimizer, s.clipNorm, prefix.str());
    }
    const Tensor& grads = model.packedGradients();
    const int64_t bucketBytes = s.bucketBytes > 0
                                    ? s.bucketBytes
                                    : autoBucketBytes(grads.defined() ? grads.numel() * int64_t(sizeof(float)) : 0);
    return std::make_unique<Sync>(ranks, model, bucketBytes, s.bucketBytes <= 0, prefix.str());
}

}  // namespace strata
