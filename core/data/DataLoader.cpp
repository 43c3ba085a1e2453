#include "core/data/DataLoader.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>

#include "core/data/DataRandom.h"

namespace strata {

namespace {

// Three buffers: one being filled, up to two waiting; the consumer's own Batch is a fourth.
constexpr int kQueuedBatches = 3;

}  // namespace

Augmentation trainingAugmentation(const DatasetSettings& settings, const Normalization& norm) {
    Augmentation aug;
    aug.cropPadding = settings.cropPadding;
    aug.horizontalFlip = settings.horizontalFlip;
    aug.noiseStd = settings.noiseStd;
    aug.padValue = norm.std != 0.f ? (0.f * norm.scale - norm.mean) / norm.std : 0.f;
    return aug;
}

DataLoader::DataLoader(const DataSplit& split, int batchSize, bool shuffle, uint64_t seed, Augmentation aug,
                       bool dropLast)
    : m_split(split), m_batchSize(batchSize), m_shuffle(shuffle), m_seed(seed), m_aug(aug), m_dropLast(dropLast) {
    if (batchSize < 1)
        throw std::invalid_argument("DataLoader: batch size " + std::to_string(batchSize) + " (must be at least 1)");
    m_sampleSize = split.sampleShape.numel();
    if (static_cast<int64_t>(split.labels.size()) != split.count ||
        static_cast<int64_t>(split.inputs.size()) != split.count * m_sampleSize)
        throw std::invalid_argument("DataLoader: split holds " + std::to_string(split.inputs.size()) + " inputs and " +
                                    std::to_string(split.labels.size()) + " labels for " + std::to_string(split.count) +
                                    " samples of " + split.sampleShape.toString());
    if (aug.cropPadding < 0 || aug.noiseStd < 0.f)
        throw std::invalid_argument("DataLoader: crop padding and noise must not be negative");
    const int rank = split.sampleShape.rank();
    if (aug.cropPadding > 0 || aug.horizontalFlip) {
        if (rank != 2 && rank != 3)
            throw std::invalid_argument(
                "DataLoader: crop and flip augmentation need image samples [C,H,W]; samples are " +
                split.sampleShape.toString());
        m_channels = rank == 3 ? split.sampleShape[0] : 1;
        m_height = split.sampleShape[rank - 2];
        m_width = split.sampleShape[rank - 1];
    }
    m_slots.resize(kQueuedBatches);
    for (int i = 0; i < kQueuedBatches; ++i) m_free.push_back(i);
    m_worker = std::thread([this] { workerLoop(); });
}

DataLoader::~DataLoader() {
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_stop = true;
    }
    m_workerWake.notify_all();
    m_consumerWake.notify_all();
    if (m_worker.joinable()) m_worker.join();
}

std::vector<int64_t> epochOrder(int64_t count, bool shuffle, uint64_t seed, int epoch) {
    std::vector<int64_t> order(static_cast<size_t>(std::max<int64_t>(count, 0)));
    std::iota(order.begin(), order.end(), 0);
    if (shuffle) {
        uint64_t rng = data::mixSeed(seed, static_cast<uint64_t>(static_cast<int64_t>(epoch)));
        for (int64_t i = count - 1; i > 0; --i)
            std::swap(order[static_cast<size_t>(i)], order[data::randomBelow(rng, static_cast<uint64_t>(i + 1))]);
    }
    return order;
}

int64_t DataLoader::batchesPerEpoch() const {
    const int64_t n = m_split.count;
    return m_dropLast ? n / m_batchSize : (n + m_batchSize - 1) / m_batchSize;
}

void DataLoader::startEpoch(int epoch) {
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        ++m_generation;
        m_epoch = epoch;
        m_started = true;
        m_consumed = 0;
        // Batches queued for the previous epoch are dropped; a slot the worker is filling
        // comes back when it sees the new generation.
        for (int s : m_ready) m_free.push_back(s);
        m_ready.clear();
    }
    m_workerWake.notify_all();
}

bool DataLoader::next(Batch& out) {
    std::unique_lock<std::mutex> lock(m_mutex);
    if (!m_started) throw std::logic_error("DataLoader::next called before startEpoch");
    const int64_t total = batchesPerEpoch();
    if (m_consumed >= total) return false;
    m_consumerWake.wait(lock, [this] { return !m_ready.empty() || m_stop; });
    if (m_stop) return false;
    const int slot = m_ready.front();
    m_ready.pop_front();
    Batch& b = m_slots[static_cast<size_t>(slot)];
    std::swap(out.inputs, b.inputs);
    std::swap(out.labels, b.labels);
    out.size = b.size;
    m_free.push_back(slot);
    ++m_consumed;
    lock.unlock();
    m_workerWake.notify_one();
    return true;
}

void DataLoader::workerLoop() {
    std::vector<int64_t> order;
    uint64_t generation = 0;  // the epoch this worker is producing; 0: none yet
    int epoch = 0;
    int64_t produced = 0;
    const int64_t total = batchesPerEpoch();
    std::unique_lock<std::mutex> lock(m_mutex);
    for (;;) {
        m_workerWake.wait(lock, [&] {
            return m_stop || m_generation != generation || (generation != 0 && produced < total && !m_free.empty());
        });
        if (m_stop) return;
        if (m_generation != generation) {
            generation = m_generation;
            epoch = m_epoch;
            produced = 0;
            lock.unlock();
            order = epochOrder(m_split.count, m_shuffle, m_seed, epoch);
            lock.lock();
            continue;
        }
        const int slot = m_free.back();
        m_free.pop_back();
        const int64_t batchIndex = produced;
        lock.unlock();
        fillBatch(m_slots[static_cast<size_t>(slot)], order, epoch, batchIndex);
        lock.lock();
        if (m_generation == generation && !m_stop) {
            m_ready.push_back(slot);
            ++produced;
            m_consumerWake.notify_one();
        } else {
            m_free.push_back(slot);  // stale: startEpoch came while we were filling
        }
    }
}

void DataLoader::fillBatch(Batch& batch, const std::vector<int64_t>& order, int epoch, int64_t batchIndex) const {
    const int64_t begin = batchIndex * m_batchSize;
    const int64_t size = std::min<int64_t>(m_batchSize, m_split.count - begin);
    batch.size = size;
    // resize() within capacity does not allocate: the buffers circulate between worker and consumer.
    batch.inputs.resize(static_cast<size_t>(size * m_sampleSize));
    batch.labels.resize(static_cast<size_t>(size));
    // Augmentation draws from a stream keyed by (seed, epoch, batch): independent of thread timing.
    uint64_t rng =
        data::mixSeed(data::mixSeed(m_seed ^ 0xA0A0A0A0ull, static_cast<uint64_t>(static_cast<int64_t>(epoch))),
                      static_cast<uint64_t>(batchIndex));
    const bool augment = m_aug.active();
    for (int64_t i = 0; i < size; ++i) {
        const int64_t src = order[static_cast<size_t>(begin + i)];
        float* dst = batch.inputs.data() + i * m_sampleSize;
        std::memcpy(dst, m_split.inputs.data() + src * m_sampleSize, static_cast<size_t>(m_sampleSize) * sizeof(float));
        batch.labels[static_cast<size_t>(i)] = m_split.labels[static_cast<size_t>(src)];
        if (augment) augmentSample(dst, rng);
    }
}

void DataLoader::augmentSample(float* sample, uint64_t& rng) const {
    if (m_aug.cropPadding > 0 || m_aug.horizontalFlip) {
        const int64_t pad = m_aug.cropPadding;
        // Crop a window of the original size from the zero-padded image: a shift by (dy, dx).
        const int64_t dy =
            pad > 0 ? static_cast<int64_t>(data::randomBelow(rng, static_cast<uint64_t>(2 * pad + 1))) - pad : 0;
        const int64_t dx =
            pad > 0 ? static_cast<int64_t>(data::randomBelow(rng, static_cast<uint64_t>(2 * pad + 1))) - pad : 0;
        const bool flip = m_aug.horizontalFlip && (data::nextRandom(rng) & 1u);
        if (dy != 0 || dx != 0 || flip) {
            thread_local std::vector<float> plane;
            plane.resize(static_cast<size_t>(m_height * m_width));
            for (int64_t c = 0; c < m_channels; ++c) {
                float* img = sample + c * m_height * m_width;
                std::copy_n(img, m_height * m_width, plane.begin());
                for (int64_t y = 0; y < m_height; ++y) {
                    const int64_t sy = y + dy;
                    for (int64_t x = 0; x < m_width; ++x) {
                        const int64_t cx = flip ? m_width - 1 - x : x;  // flip after the crop
                        const int64_t sx = cx + dx;
                        img[y * m_width + x] = (sy >= 0 && sy < m_height && sx >= 0 && sx < m_width)
                                                   ? plane[static_cast<size_t>(sy * m_width + sx)]
                                                   : m_aug.padValue;
                    }
                }
            }
        }
    }
    if (m_aug.noiseStd > 0.f)
        for (int64_t j = 0; j < m_sampleSize; ++j)
            sample[j] += m_aug.noiseStd * static_cast<float>(data::randomNormal(rng));
}

}  // namespace strata
