#include "core/data/DataLoader.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <utility>

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
    aug.resizedCropMinArea = static_cast<float>(settings.resizedCropMinArea);
    aug.rotationDegrees = static_cast<float>(settings.rotationDegrees);
    aug.brightness = static_cast<float>(settings.brightness);
    aug.contrast = static_cast<float>(settings.contrast);
    aug.pixelUnit = norm.std != 0.f ? norm.scale / norm.std : 1.f;
    if (!norm.featureStd.empty()) {
        // Per-feature statistics are in raw units: x' = (x - mean) / std; and the border is the mean.
        aug.padValue = 0.f;
        aug.featurePixelUnit.resize(norm.featureStd.size());
        for (size_t j = 0; j < norm.featureStd.size(); ++j) aug.featurePixelUnit[j] = 1.f / norm.featureStd[j];
    }
    if (settings.task == TaskKind::ImageToImage && settings.imageTarget == ImageTarget::Denoise)
        aug.maskFraction = static_cast<float>(settings.maskingFraction);
    return aug;
}

Augmentation validationAugmentation(const DatasetSettings& settings, const Normalization& norm) {
    if (settings.task != TaskKind::ImageToImage || settings.imageTarget != ImageTarget::Denoise) return {};
    const Augmentation train = trainingAugmentation(settings, norm);
    Augmentation aug;
    aug.noiseStd = train.noiseStd;
    aug.maskFraction = train.maskFraction;
    aug.padValue = train.padValue;
    return aug;
}

void warpImage(const float* src, float* dst, int64_t channels, int64_t height, int64_t width, const Warp& warp,
               float pad) {
    const double pi = 3.14159265358979323846;
    const double a = warp.angleDegrees * pi / 180.0, ca = std::cos(a), sa = std::sin(a);
    const double cy = warp.top + warp.height / 2.0 - 0.5, cx = warp.left + warp.width / 2.0 - 0.5;
    const double sy = warp.height / double(height), sx = warp.width / double(width);
    for (int64_t y = 0; y < height; ++y)
        for (int64_t x = 0; x < width; ++x) {
            // Output centre -> crop position -> rotated about the crop's centre.
            const double v = warp.top + (double(y) + 0.5) * sy - 0.5 - cy;
            const double u = warp.left + (double(x) + 0.5) * sx - 0.5 - cx;
            double px = cx + ca * u + sa * v, py = cy - sa * u + ca * v;
            // Within half a pixel of the border is still the image (its edge pixel): a crop resized up
            // keeps its edges; only rotation brings in the fill.
            px = (px >= -0.5 && px < 0)                                  ? 0
                 : (px > double(width - 1) && px <= double(width) - 0.5) ? double(width - 1)
                                                                         : px;
            py = (py >= -0.5 && py < 0)                                    ? 0
                 : (py > double(height - 1) && py <= double(height) - 0.5) ? double(height - 1)
                                                                           : py;
            const double fx = std::floor(px), fy = std::floor(py);
            const auto x0 = static_cast<int64_t>(fx), y0 = static_cast<int64_t>(fy);
            const double wx = px - fx, wy = py - fy;
            for (int64_t c = 0; c < channels; ++c) {
                const float* plane = src + c * height * width;
                auto at = [&](int64_t yy, int64_t xx) -> double {
                    return (yy >= 0 && yy < height && xx >= 0 && xx < width) ? plane[yy * width + xx] : pad;
                };
                // Exact at integer positions: a zero weight never reads a neighbour.
                double value = 0;
                const double w00 = (1 - wx) * (1 - wy), w01 = wx * (1 - wy), w10 = (1 - wx) * wy, w11 = wx * wy;
                if (w00 > 0) value += w00 * at(y0, x0);
                if (w01 > 0) value += w01 * at(y0, x0 + 1);
                if (w10 > 0) value += w10 * at(y0 + 1, x0);
                if (w11 > 0) value += w11 * at(y0 + 1, x0 + 1);
                dst[c * height * width + y * width + x] = static_cast<float>(value);
            }
        }
}

DataLoader::DataLoader(const DataSplit& split, int batchSize, bool shuffle, uint64_t seed, Augmentation aug,
                       bool dropLast)
    : m_split(split),
      m_batchSize(batchSize),
      m_shuffle(shuffle),
      m_seed(seed),
      m_aug(std::move(aug)),
      m_dropLast(dropLast) {
    if (batchSize < 1)
        throw std::invalid_argument("DataLoader: batch size " + std::to_string(batchSize) + " (must be at least 1)");
    m_sampleSize = split.sampleShape.numel();
    if (static_cast<int64_t>(split.labels.size()) != split.count ||
        (!split.streamed() && static_cast<int64_t>(split.inputs.size()) != split.count * m_sampleSize))
        throw std::invalid_argument("DataLoader: split holds " + std::to_string(split.inputs.size()) + " inputs and " +
                                    std::to_string(split.labels.size()) + " labels for " + std::to_string(split.count) +
                                    " samples of " + split.sampleShape.toString());
    if (m_aug.cropPadding < 0 || m_aug.noiseStd < 0.f || m_aug.resizedCropMinArea < 0.f ||
        m_aug.resizedCropMinArea > 1.f || m_aug.rotationDegrees < 0.f || m_aug.brightness < 0.f || m_aug.contrast < 0.f)
        throw std::invalid_argument(
            "DataLoader: crop padding, noise, rotation, brightness and contrast must not be negative, the resized "
            "crop's area 0 to 1");
    if (!m_aug.featurePixelUnit.empty() &&
        static_cast<int64_t>(m_aug.featurePixelUnit.size()) != split.sampleShape.numel())
        throw std::invalid_argument("DataLoader: per-feature pixel units do not match the samples");
    const int rank = split.sampleShape.rank();
    if (m_aug.geometric()) {
        if (rank != 2 && rank != 3)
            throw std::invalid_argument(
                "DataLoader: crop, flip, resized crop and rotation need image samples [C,H,W]; samples are " +
                split.sampleShape.toString());
        m_channels = rank == 3 ? split.sampleShape[0] : 1;
        m_height = split.sampleShape[rank - 2];
        m_width = split.sampleShape[rank - 1];
    }
    const int queued = split.streamed() ? std::max(1, split.source->queuedBatches()) : kQueuedBatches;
    m_slots.resize(static_cast<size_t>(queued));
    for (int i = 0; i < queued; ++i) m_free.push_back(i);
    if (split.streamed())
        for (int t = 1; t < std::max(1, split.source->threads()); ++t) m_helpers.emplace_back([this] { helperLoop(); });
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
    {
        std::lock_guard<std::mutex> lock(m_decodeMutex);
        m_decodeStop = true;
    }
    m_decodeWake.notify_all();
    for (std::thread& t : m_helpers) t.join();
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

BatchShard batchShard(int64_t batch, int rank, int size) {
    if (size < 1 || rank < 0 || rank >= size)
        throw std::invalid_argument("batchShard: rank " + std::to_string(rank) + " of " + std::to_string(size));
    const int64_t begin = batch * rank / size, end = batch * (rank + 1) / size;
    return {begin, end - begin};
}

void DataLoader::setShard(int rank, int size) {
    batchShard(1, rank, size);  // checks the arguments
    std::lock_guard<std::mutex> lock(m_mutex);
    if (m_started) throw std::logic_error("DataLoader::setShard called after startEpoch");
    m_shardRank = rank;
    m_shardSize = size;
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
        m_error = nullptr;
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
    m_consumerWake.wait(lock, [this] { return !m_ready.empty() || m_stop || m_error; });
    if (m_stop) return false;
    if (m_ready.empty() && m_error) std::rethrow_exception(m_error);
    const int slot = m_ready.front();
    m_ready.pop_front();
    Batch& b = m_slots[static_cast<size_t>(slot)];
    std::swap(out.inputs, b.inputs);
    std::swap(out.labels, b.labels);
    std::swap(out.targets, b.targets);
    out.size = b.size;
    out.first = b.first;
    out.globalSize = b.globalSize;
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
            return m_stop || m_generation != generation ||
                   (generation != 0 && produced < total && !m_free.empty() && !m_error);
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
        std::exception_ptr error;
        try {
            fillBatch(m_slots[static_cast<size_t>(slot)], order, epoch, batchIndex);
        } catch (...) {
            error = std::current_exception();
        }
        lock.lock();
        if (error) {
            m_free.push_back(slot);
            if (m_generation == generation) {
                m_error = error;  // next() throws it once the batches before it are taken
                m_consumerWake.notify_all();
            }
            continue;
        }
        if (m_generation == generation && !m_stop) {
            m_ready.push_back(slot);
            ++produced;
            m_consumerWake.notify_one();
        } else {
            m_free.push_back(slot);  // stale: startEpoch came while we were filling
        }
    }
}

void DataLoader::fillBatch(Batch& batch, const std::vector<int64_t>& order, int epoch, int64_t batchIndex) {
    const int64_t globalBegin = batchIndex * m_batchSize;
    const int64_t globalSize = std::min<int64_t>(m_batchSize, m_split.count - globalBegin);
    const BatchShard shard = batchShard(globalSize, m_shardRank, m_shardSize);
    const int64_t begin = globalBegin + shard.begin;
    const int64_t size = shard.count;
    batch.size = size;
    batch.first = shard.begin;
    batch.globalSize = globalSize;
    // resize() within capacity does not allocate: the buffers circulate between worker and consumer.
    batch.inputs.resize(static_cast<size_t>(size * m_sampleSize));
    batch.labels.resize(static_cast<size_t>(size));
    const int64_t targetSize = m_split.targetSize();
    batch.targets.resize(static_cast<size_t>(size * targetSize));
    // Augmentation draws from a stream keyed by (seed, epoch, batch, sample's index in the batch): independent
    // of thread timing, and of how a data-parallel job splits the batch.
    const uint64_t batchRng =
        data::mixSeed(data::mixSeed(m_seed ^ 0xA0A0A0A0ull, static_cast<uint64_t>(static_cast<int64_t>(epoch))),
                      static_cast<uint64_t>(batchIndex));
    if (m_split.streamed()) {
        readStreamed(batch, order.data() + begin, batchRng, shard.begin);
        return;
    }
    const bool augment = m_aug.active();
    for (int64_t i = 0; i < size; ++i) {
        const int64_t src = order[static_cast<size_t>(begin + i)];
        float* dst = batch.inputs.data() + i * m_sampleSize;
        std::memcpy(dst, m_split.inputs.data() + src * m_sampleSize, static_cast<size_t>(m_sampleSize) * sizeof(float));
        batch.labels[static_cast<size_t>(i)] = m_split.labels[static_cast<size_t>(src)];
        // Before augmentation: a denoising target is the clean input.
        if (targetSize > 0) m_split.copyTargets(src, batch.targets.data() + i * targetSize);
        if (augment) {
            uint64_t rng = data::mixSeed(batchRng, static_cast<uint64_t>(shard.begin + i));
            augmentSample(dst, rng);
        }
    }
}

std::vector<SkippedFile> DataLoader::takeSkipped() {
    std::lock_guard<std::mutex> lock(m_mutex);
    return std::exchange(m_skipped, {});
}

void DataLoader::helperLoop() {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(m_decodeMutex);
    for (;;) {
        m_decodeWake.wait(lock, [&] { return m_decodeStop || m_jobId != seen; });
        if (m_decodeStop) return;
        seen = m_jobId;
        lock.unlock();
        runJob();
        lock.lock();
        if (--m_helpersBusy == 0) m_decodeDone.notify_all();
    }
}

void DataLoader::runJob() {
    DecodeJob& job = m_job;
    const bool augment = m_aug.active();
    for (;;) {
        const int64_t i = job.next.fetch_add(1);
        if (i >= job.size) return;
        float* dst = job.dst + i * m_sampleSize;
        try {
            job.ok[static_cast<size_t>(i)] = m_split.source->read(job.indices[i], dst, job.why[static_cast<size_t>(i)]);
            if (job.ok[static_cast<size_t>(i)] && job.targetDst)
                job.ok[static_cast<size_t>(i)] = m_split.source->readTarget(
                    job.indices[i], job.targetDst + i * m_split.targetSize(), job.why[static_cast<size_t>(i)]);
            if (job.ok[static_cast<size_t>(i)] && augment) {
                uint64_t rng = data::mixSeed(job.batchRng, static_cast<uint64_t>(job.rngBase + i));
                augmentSample(dst, rng);
            }
        } catch (...) {
            job.ok[static_cast<size_t>(i)] = 0;
            std::lock_guard<std::mutex> lock(m_decodeMutex);
            if (job.errorAt < 0 || i < job.errorAt) {
                job.errorAt = i;
                job.error = std::current_exception();
            }
        }
    }
}

void DataLoader::readStreamed(Batch& batch, const int64_t* indices, uint64_t batchRng, int64_t rngBase) {
    const int64_t size = batch.size;
    {
        std::lock_guard<std::mutex> lock(m_decodeMutex);
        m_job.indices = indices;
        m_job.size = size;
        m_job.dst = batch.inputs.data();
        m_job.targetDst = m_split.source->hasTargets() ? batch.targets.data() : nullptr;
        m_job.batchRng = batchRng;
        m_job.rngBase = rngBase;
        m_job.ok.assign(static_cast<size_t>(size), 0);
        m_job.why.assign(static_cast<size_t>(size), std::string());
        m_job.next = 0;
        m_job.errorAt = -1;
        m_job.error = nullptr;
        m_helpersBusy = static_cast<int>(m_helpers.size());
        ++m_jobId;
    }
    m_decodeWake.notify_all();
    runJob();
    {
        std::unique_lock<std::mutex> lock(m_decodeMutex);
        m_decodeDone.wait(lock, [this] { return m_helpersBusy == 0; });
    }
    if (m_job.error) std::rethrow_exception(m_job.error);
    // Samples that could not be read leave the batch; the others keep their order, labels and augmentation.
    for (int64_t i = 0; i < size; ++i)
        batch.labels[static_cast<size_t>(i)] = m_split.labels[static_cast<size_t>(indices[i])];
    int64_t kept = 0;
    for (int64_t i = 0; i < size; ++i) {
        if (!m_job.ok[static_cast<size_t>(i)]) {
            std::lock_guard<std::mutex> lock(m_mutex);
            if (m_badSeen.insert(indices[i]).second)
                m_skipped.push_back({m_split.source->sampleName(indices[i]), m_job.why[static_cast<size_t>(i)]});
            continue;
        }
        if (kept != i) {
            std::memmove(batch.inputs.data() + kept * m_sampleSize, batch.inputs.data() + i * m_sampleSize,
                         static_cast<size_t>(m_sampleSize) * sizeof(float));
            batch.labels[static_cast<size_t>(kept)] = batch.labels[static_cast<size_t>(i)];
            if (m_job.targetDst) {
                const int64_t t = m_split.targetSize();
                std::memmove(batch.targets.data() + kept * t, batch.targets.data() + i * t,
                             static_cast<size_t>(t) * sizeof(float));
            }
        }
        ++kept;
    }
    if (kept != size) {
        batch.globalSize -= size - kept;
        batch.size = kept;
        batch.inputs.resize(static_cast<size_t>(kept * m_sampleSize));
        batch.labels.resize(static_cast<size_t>(kept));
        if (m_job.targetDst) batch.targets.resize(static_cast<size_t>(kept * m_split.targetSize()));
    }
    // An autoencoder's targets are the inputs as read (Task.h allows no augmentation with them, and denoising is
    // refused for streamed images); a folder's targets were read beside them (SampleSource::readTarget).
    if (m_split.targetsAreInputs) batch.targets = batch.inputs;
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
    if (m_aug.resizedCropMinArea > 0.f || m_aug.rotationDegrees > 0.f) {
        Warp w{0, 0, double(m_height), double(m_width), 0};
        if (m_aug.resizedCropMinArea > 0.f) {
            const double area = m_aug.resizedCropMinArea + (1.0 - m_aug.resizedCropMinArea) * data::randomUnit(rng);
            const double logRatio = std::log(3.0 / 4.0) + std::log(16.0 / 9.0) * data::randomUnit(rng);
            const double ratio = std::exp(logRatio);  // width / height
            w.width = std::min(double(m_width), double(m_width) * std::sqrt(area * ratio));
            w.height = std::min(double(m_height), double(m_height) * std::sqrt(area / ratio));
            w.top = (double(m_height) - w.height) * data::randomUnit(rng);
            w.left = (double(m_width) - w.width) * data::randomUnit(rng);
        }
        if (m_aug.rotationDegrees > 0.f) w.angleDegrees = (2.0 * data::randomUnit(rng) - 1.0) * m_aug.rotationDegrees;
        thread_local std::vector<float> copy;
        copy.assign(sample, sample + m_sampleSize);
        warpImage(copy.data(), sample, m_channels, m_height, m_width, w, m_aug.padValue);
    }
    if (m_aug.brightness > 0.f || m_aug.contrast > 0.f) {
        const double shift =
            m_aug.brightness > 0.f ? (2.0 * data::randomUnit(rng) - 1.0) * m_aug.brightness * 255.0 : 0.0;
        const double factor = m_aug.contrast > 0.f ? 1.0 + (2.0 * data::randomUnit(rng) - 1.0) * m_aug.contrast : 1.0;
        double mean = 0;
        for (int64_t j = 0; j < m_sampleSize; ++j) mean += sample[j];
        mean /= double(std::max<int64_t>(1, m_sampleSize));
        const bool perFeature = !m_aug.featurePixelUnit.empty();
        for (int64_t j = 0; j < m_sampleSize; ++j) {
            const double unit = perFeature ? m_aug.featurePixelUnit[static_cast<size_t>(j)] : m_aug.pixelUnit;
            sample[j] = static_cast<float>(mean + factor * (double(sample[j]) - mean) + shift * unit);
        }
    }
    if (m_aug.maskFraction > 0.f)
        for (int64_t j = 0; j < m_sampleSize; ++j)
            if (data::randomUnit(rng) < m_aug.maskFraction) sample[j] = m_aug.padValue;
    if (m_aug.noiseStd > 0.f)
        for (int64_t j = 0; j < m_sampleSize; ++j)
            sample[j] += m_aug.noiseStd * static_cast<float>(data::randomNormal(rng));
}

}  // namespace strata
