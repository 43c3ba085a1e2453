// DataLoader: cuts a DataSplit into batches on a worker thread that stays a
// few batches ahead (bounded queue), shuffling and augmenting there. The order
// and the augmentation depend only on (seed, epoch), never on thread timing.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "core/data/Dataset.h"

namespace strata {

// Image augmentation, applied per sample on the worker. Crop and flip need
// samples of shape [C,H,W] or [H,W]. padValue fills the border a crop shifts in:
// 0 in raw pixels is (0*scale - mean)/std in model inputs.
struct Augmentation {
    int cropPadding = 0;          // random shift by up to this many pixels each way
    bool horizontalFlip = false;  // mirror left-right with probability 1/2
    float noiseStd = 0.f;         // add Gaussian noise
    float padValue = 0.f;
    // Random resized crop: a region of this fraction of the area or more (aspect ratio 3/4 to 4/3), resized
    // back to the sample's size; 0: off. Rotation: uniform in +-rotationDegrees about the centre. Both in
    // one bilinear warp (warpImage), the border filled with padValue.
    float resizedCropMinArea = 0.f;
    float rotationDegrees = 0.f;
    // Brightness: add up to +-brightness of the full pixel range (255 raw) ; contrast: scale each image's
    // deviations from its mean by 1 +- contrast. On model inputs, so one raw pixel level is pixelUnit
    // (scale / std of the normalization) -- per feature when the normalization is (featurePixelUnit).
    float brightness = 0.f, contrast = 0.f;
    float pixelUnit = 1.f;
    std::vector<float> featurePixelUnit;
    // Masking noise (denoising): each value becomes padValue (a raw zero) with this probability, after the
    // Gaussian noise.
    float maskFraction = 0.f;
    bool geometric() const {
        return cropPadding > 0 || horizontalFlip || resizedCropMinArea > 0.f || rotationDegrees > 0.f;
    }
    bool active() const {
        return geometric() || noiseStd > 0.f || brightness > 0.f || contrast > 0.f || maskFraction > 0.f;
    }
};

// One random resized crop and rotation: output pixel centres map into the crop (top, left, height, width,
// in source pixels), then rotate by angleDegrees about the crop's centre, then sample the source
// bilinearly. A position within half a pixel outside the image takes the edge pixel; further out, the
// neighbours outside count as `pad`.
struct Warp {
    double top = 0, left = 0, height = 0, width = 0;
    double angleDegrees = 0;
};
void warpImage(const float* src, float* dst, int64_t channels, int64_t height, int64_t width, const Warp& warp,
               float pad);

// The training split's augmentation from the project's dataset settings; the crop border
// is a raw zero pixel mapped through `norm`.
Augmentation trainingAugmentation(const DatasetSettings& settings, const Normalization& norm);
// The validation split's: none, except the noise of image_to_image denoise (drawn from the validation loader's
// seed and epoch 0, so every evaluation sees the same noisy inputs).
Augmentation validationAugmentation(const DatasetSettings& settings, const Normalization& norm);

// The sample order of an epoch: 0..count-1, shuffled by a function of (seed, epoch) only when `shuffle`.
// DataLoader batches follow it; so does the Trainer when the data lives in device memory.
std::vector<int64_t> epochOrder(int64_t count, bool shuffle, uint64_t seed, int epoch);

// Data parallel: the part of a global batch of `batch` samples that rank `rank` of `size` takes: contiguous,
// in rank order, [begin, begin + count). Counts differ by at most one; with fewer samples than ranks some
// ranks get none (they still join the step's collectives).
struct BatchShard {
    int64_t begin = 0, count = 0;
};
BatchShard batchShard(int64_t batch, int rank, int size);

struct Batch {
    int64_t size = 0;
    // Data parallel (DataLoader::setShard): this rank's part of a global batch of globalSize samples starts
    // at sample `first` of it. Without shards: 0 and size.
    int64_t first = 0;
    int64_t globalSize = 0;
    std::vector<float> inputs;    // size * sampleShape.numel()
    std::vector<int32_t> labels;  // size
    std::vector<float> targets;   // size * the split's targetSize() (tasks with targets; clean inputs before noise)
};

// A streamed split (DataSplit::source) is read by `source->threads()` decode threads, the worker among
// them, sample by sample within each batch; at most `source->queuedBatches()` batches are held (filled,
// being filled or waiting), the consumer's own Batch besides. A sample the source cannot read is left out
// of its batch (the batch is that much smaller) and reported once by takeSkipped; an error the source
// throws (strict mode) comes out of next().
class DataLoader {
public:
    // `split` must outlive the loader. Throws std::invalid_argument for a batch size
    // below 1 or crop/flip on samples that are not images.
    DataLoader(const DataSplit& split, int batchSize, bool shuffle, uint64_t seed, Augmentation aug = {},
               bool dropLast = false);
    ~DataLoader();  // stops and joins the worker, also mid-epoch
    DataLoader(const DataLoader&) = delete;
    DataLoader& operator=(const DataLoader&) = delete;

    // Data parallel: every batch becomes this rank's shard of it (batchShard): each epoch's order and batch
    // boundaries stay those of one process, so the ranks together see every sample once. Call before the
    // first startEpoch.
    void setShard(int rank, int size);
    // Starts (or restarts, dropping what is queued) an epoch; the order is a function of (seed, epoch).
    void startEpoch(int epoch);
    // Blocks until the next batch is ready; false at the end of the epoch. Swaps buffers with
    // `out`, so reusing the same Batch allocates nothing in steady state.
    // Throws std::logic_error before the first startEpoch.
    bool next(Batch& out);
    int64_t batchesPerEpoch() const;
    const Shape& sampleShape() const { return m_split.sampleShape; }
    // Streamed: the samples left out since the last call (each bad file once per loader), with reasons.
    std::vector<SkippedFile> takeSkipped();
    int queuedBatches() const { return static_cast<int>(m_slots.size()); }

private:
    // One batch's samples read from the source by the decode threads.
    struct DecodeJob {
        const int64_t* indices = nullptr;  // split indices, `size` of them
        int64_t size = 0;
        float* dst = nullptr;
        float* targetDst = nullptr;  // a source with targets (SampleSource::hasTargets): theirs
        uint64_t batchRng = 0;
        int64_t rngBase = 0;  // the first sample's position in the global batch
        std::vector<char> ok;
        std::vector<std::string> why;
        std::atomic<int64_t> next{0};
        int64_t errorAt = -1;  // the first sample (by position) whose read threw
        std::exception_ptr error;
    };
    void workerLoop();
    void helperLoop();
    void runJob();
    void fillBatch(Batch& batch, const std::vector<int64_t>& order, int epoch, int64_t batchIndex);
    void readStreamed(Batch& batch, const int64_t* indices, uint64_t batchRng, int64_t rngBase);
    void augmentSample(float* sample, uint64_t& rngState) const;

    const DataSplit& m_split;
    const int m_batchSize;
    const bool m_shuffle;
    const uint64_t m_seed;
    const Augmentation m_aug;
    const bool m_dropLast;
    int64_t m_sampleSize = 0;
    int64_t m_channels = 1, m_height = 1, m_width = 1;
    int m_shardRank = 0, m_shardSize = 1;

    std::mutex m_mutex;
    std::condition_variable m_workerWake;
    std::condition_variable m_consumerWake;
    std::vector<Batch> m_slots;  // a few batch buffers in circulation
    std::deque<int> m_ready;     // filled slots, in batch order
    std::vector<int> m_free;
    uint64_t m_generation = 0;  // bumped by startEpoch; stale work is discarded
    int m_epoch = 0;
    bool m_started = false;
    bool m_stop = false;
    int64_t m_consumed = 0;
    std::exception_ptr m_error;  // the worker's failure for the current epoch, thrown by next()
    std::vector<SkippedFile> m_skipped;
    std::unordered_set<int64_t> m_badSeen;
    std::thread m_worker;

    // Streamed splits: the decode helpers (threads() - 1 of them; the worker is the last).
    std::mutex m_decodeMutex;
    std::condition_variable m_decodeWake, m_decodeDone;
    DecodeJob m_job;
    uint64_t m_jobId = 0;
    int m_helpersBusy = 0;
    bool m_decodeStop = false;
    std::vector<std::thread> m_helpers;
};

}  // namespace strata
