#include "core/train/BatchStager.h"

#include <algorithm>
#include <limits>

#include "core/backend/Backend.h"

namespace strata {

struct BatchStager::Resident {
    Tensor inputs, labels, order;  // [count * sample] f32, [count] i32, [count] i32
    std::vector<int64_t> hostOrder;
    uint64_t seed = 0;
    int64_t nextBatch = 0, begin = 0;  // the batch nextTrainBatch hands out next; the last one's start
};

BatchStager::BatchStager(Backend& backend, const Shape& inputShape, int batchSize)
    : m_backend(backend), m_inputShape(inputShape), m_batchSize(batchSize) {}

BatchStager::~BatchStager() = default;

void BatchStager::ensureCapacity(int64_t batch) {
    if (batch <= m_capacity) return;
    batch = std::max<int64_t>(batch, m_batchSize);
    try {
        for (Tensor& t : m_inputBufs) t = m_backend.empty(m_inputShape.withBatch(batch));
        for (Tensor& t : m_labelBufs) t = m_backend.empty(Shape{batch}, DType::I32);
    } catch (const OutOfMemoryError& e) {
        throw OutOfMemoryError("the input buffers for batch " + std::to_string(batch) + ": " + e.what(), e.bytes());
    }
    m_capacity = batch;
}

BatchStager::Staged BatchStager::takeSlot(int64_t size) {
    ensureCapacity(size);
    Staged st{m_inputBufs[m_nextSlot].view(m_inputShape.withBatch(size)), m_labelBufs[m_nextSlot].view(Shape{size})};
    m_nextSlot ^= 1;
    return st;
}

BatchStager::Staged BatchStager::stage(const Batch& b) {
    Staged st = takeSlot(b.size);
    m_backend.uploadAsync(st.input.raw(), b.inputs.data(), st.input.bytes());
    m_backend.copyFromHost(st.labels.raw(), b.labels.data(), static_cast<size_t>(b.size) * sizeof(int32_t));
    return st;
}

void BatchStager::setUpTraining(const DataSplit& split, const Augmentation& aug, uint64_t seed, ResidentData mode,
                                int64_t residentMaxBytes, const Log& log) {
    m_train = &split;
    m_resident.reset();
    m_trainLoader.reset();
    const int64_t bytes = split.count * (split.sampleShape.numel() + 1) * 4;
    const std::string device = m_backend.device().toString();
    auto mib = [](int64_t b) { return std::to_string((b + (1 << 20) - 1) >> 20) + " MiB"; };
    bool use = false;
    switch (mode) {
        case ResidentData::Off: break;
        case ResidentData::On: use = true; break;
        case ResidentData::Auto: use = !m_backend.device().isCpu() && bytes <= residentMaxBytes; break;
    }
    if (use && aug.active()) {
        use = false;  // augmentation runs on the host, per sample
        if (mode == ResidentData::On) log("training data stays on the host: augmentation runs there");
    }
    if (use && split.count > std::numeric_limits<int32_t>::max()) use = false;
    if (use && split.streamed()) {
        use = false;  // the images are read from disk batch by batch
        if (mode == ResidentData::On) log("training data stays on the host: it is streamed from its files");
    }
    if (!use) {
        m_trainLoader = std::make_unique<DataLoader>(split, m_batchSize, true, seed, aug);
        m_trainLoader->setShard(m_shardRank, m_shardSize);
        return;
    }
    auto resident = std::make_unique<Resident>();
    resident->seed = seed;
    try {
        resident->inputs = m_backend.fromHost(Shape{split.count * split.sampleShape.numel()}, split.inputs.data());
        resident->labels = m_backend.empty(Shape{split.count}, DType::I32);
        m_backend.copyFromHost(resident->labels.raw(), split.labels.data(), split.labels.size() * sizeof(int32_t));
        resident->order = m_backend.empty(Shape{split.count}, DType::I32);
    } catch (const OutOfMemoryError& e) {
        if (mode == ResidentData::On)
            throw OutOfMemoryError("the training data in " + device + " memory: " + e.what(), e.bytes());
        // Auto: the same batches, cut on the host instead.
        log("the training data (" + mib(bytes) + ") does not fit in " + device + " memory (" + e.what() +
            "): batches come from the host");
        m_trainLoader = std::make_unique<DataLoader>(split, m_batchSize, true, seed, aug);
        m_trainLoader->setShard(m_shardRank, m_shardSize);
        return;
    }
    m_resident = std::move(resident);
    log("training data held in " + device + " memory (" + mib(bytes) + "): batches are gathered there");
}

int64_t BatchStager::trainBatchesPerEpoch() const {
    if (m_trainLoader) return m_trainLoader->batchesPerEpoch();
    return (m_train->count + m_batchSize - 1) / m_batchSize;
}

void BatchStager::startTrainEpoch(int epoch) {
    if (m_trainLoader) return m_trainLoader->startEpoch(epoch);
    m_resident->hostOrder = epochOrder(m_train->count, true, m_resident->seed, epoch);
    const std::vector<int32_t> order(m_resident->hostOrder.begin(), m_resident->hostOrder.end());
    m_backend.copyFromHost(m_resident->order.raw(), order.data(), order.size() * sizeof(int32_t));
    m_resident->nextBatch = 0;
}

std::vector<SkippedFile> BatchStager::takeTrainSkipped() {
    return m_trainLoader ? m_trainLoader->takeSkipped() : std::vector<SkippedFile>{};
}

bool BatchStager::nextTrainBatch(Batch& b) {
    if (m_trainLoader) return m_trainLoader->next(b);
    if (m_resident->nextBatch >= trainBatchesPerEpoch()) return false;
    const int64_t globalBegin = m_resident->nextBatch++ * m_batchSize;
    const int64_t globalSize = std::min<int64_t>(m_batchSize, m_train->count - globalBegin);
    const BatchShard shard = batchShard(globalSize, m_shardRank, m_shardSize);
    const int64_t begin = globalBegin + shard.begin;
    b.size = shard.count;
    b.first = shard.begin;
    b.globalSize = globalSize;
    b.inputs.clear();
    b.labels.resize(static_cast<size_t>(b.size));
    for (int64_t i = 0; i < b.size; ++i)
        b.labels[static_cast<size_t>(i)] =
            m_train->labels[static_cast<size_t>(m_resident->hostOrder[static_cast<size_t>(begin + i)])];
    // Float targets (tasks other than classification) go up with the loss (BatchLoss), from the host.
    const int64_t t = m_train->targetSize();
    b.targets.resize(static_cast<size_t>(b.size * t));
    for (int64_t i = 0; t > 0 && i < b.size; ++i)
        m_train->copyTargets(m_resident->hostOrder[static_cast<size_t>(begin + i)], b.targets.data() + i * t);
    m_resident->begin = begin;
    return true;
}

BatchStager::Staged BatchStager::stageTrain(const Batch& b) {
    if (!m_resident) return stage(b);
    Staged st = takeSlot(b.size);
    const int32_t* rows = m_resident->order.i32() + m_resident->begin;
    m_backend.gatherRows(st.input.raw(), m_resident->inputs.raw(), m_train->count, rows, b.size,
                         m_train->sampleShape.numel());
    m_backend.gatherRows(st.labels.raw(), m_resident->labels.raw(), m_train->count, rows, b.size, 1);
    return st;
}

}  // namespace strata
