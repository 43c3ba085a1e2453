// BatchStager: where a run's batches come from and how they reach the device.
//
// Training batches come from a DataLoader (cut and augmented on the host by its worker thread) or, when the
// training split is held in backend memory (ResidentData), are gathered there by index in the order a
// DataLoader would give. Either way a batch is staged into one of two slots, input and label buffers used
// in turn, so the next batch uploads (Backend::uploadAsync) while the current step still reads the other.
// The step's labels are read once more after the next batch is staged, by its metrics, so they need a pair
// too. Buffers are sized for the configured batch at once: a buffer replaced later could still be read by
// queued work while an asynchronous upload reuses its memory.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/data/DataLoader.h"
#include "core/tensor/Tensor.h"
#include "core/train/ResidentData.h"

namespace strata {

class Backend;

class BatchStager {
public:
    // A batch on the device: views of one slot's input and label buffers.
    struct Staged {
        Tensor input, labels;
    };
    using Log = std::function<void(const std::string&)>;

    BatchStager(Backend& backend, const Shape& inputShape, int batchSize);
    ~BatchStager();
    BatchStager(const BatchStager&) = delete;
    BatchStager& operator=(const BatchStager&) = delete;

    // Data parallel: training batches become this rank's shard of each global batch (batchShard). Call
    // before setUpTraining.
    void setShard(int rank, int size) {
        m_shardRank = rank;
        m_shardSize = size;
    }
    // Decides where training batches come from and, for resident data, uploads the split once. `split`
    // must outlive the stager. Decisions the user should know about go to `log`.
    void setUpTraining(const DataSplit& split, const Augmentation& augmentation, uint64_t seed, ResidentData mode,
                       int64_t residentMaxBytes, const Log& log);
    bool residentTraining() const { return m_resident != nullptr; }
    int64_t trainBatchesPerEpoch() const;
    void startTrainEpoch(int epoch);
    // The next training batch: from the loader, or (resident data) its size and host labels only; the
    // inputs are gathered on the device by stageTrain.
    bool nextTrainBatch(Batch& batch);
    // Streamed training data: the files left out since the last call (DataLoader::takeSkipped).
    std::vector<SkippedFile> takeTrainSkipped();
    // stage() for the batch nextTrainBatch just gave: resident data is gathered on the device.
    Staged stageTrain(const Batch& batch);

    // Starts the upload of a host batch into the slot the current step does not use. Call it after the ops
    // of the current step that read its input (forward, backward): the upload may overlap the rest of it.
    Staged stage(const Batch& batch);

private:
    struct Resident;
    void ensureCapacity(int64_t batch);
    // Views of the slot the current step does not use, for a batch of `size`; the next call gives the other.
    Staged takeSlot(int64_t size);

    Backend& m_backend;
    Shape m_inputShape;
    int m_batchSize;
    Tensor m_inputBufs[2], m_labelBufs[2];
    int m_nextSlot = 0;
    int m_shardRank = 0, m_shardSize = 1;
    int64_t m_capacity = 0;
    const DataSplit* m_train = nullptr;
    std::unique_ptr<Resident> m_resident;
    std::unique_ptr<DataLoader> m_trainLoader;  // when the split is not resident
};

}  // namespace strata
