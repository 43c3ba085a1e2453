// SyntheticDataset: the synthetic loader. Gaussian blobs, one per class, of synthetic_shape, from a fixed seed:
// a data set that needs no file, for trying a graph out and for tests.
#include <cstdint>

#include "core/data/DataRandom.h"
#include "core/data/DatasetLoader.h"

namespace strata::data {

namespace {

// Fixed, as the split's: a project must see the same data on every run.
constexpr uint64_t kSyntheticSeed = 0x5EEDB10Bull;

// The synthetic data set lives in memory whole: at most 2^30 floats (4 GiB) in all.
constexpr int64_t kMaxSyntheticValues = int64_t{1} << 30;

}  // namespace

DatasetBundle loadSyntheticDataset(const DatasetSettings& s, const std::string& /*projectPath*/,
                                   Streaming /*streaming*/) {
    if (s.syntheticClasses < 2)
        throw DataError("dataset.synthetic_classes: " + std::to_string(s.syntheticClasses) + " (must be at least 2)");
    if (s.syntheticSamples < 2)
        throw DataError("dataset.synthetic_samples: " + std::to_string(s.syntheticSamples) + " (must be at least 2)");
    if (s.syntheticShape.empty()) throw DataError("dataset.synthetic_shape is empty");
    for (int64_t d : s.syntheticShape)
        if (d < 1) throw DataError("dataset.synthetic_shape: every dimension must be at least 1");
    RawSplit train;
    train.shape = Shape(s.syntheticShape);
    int64_t n = 1, total = 0;
    for (int64_t d : s.syntheticShape)
        if (__builtin_mul_overflow(n, d, &n) || n > kMaxSampleElements)
            throw DataError("dataset.synthetic_shape " + train.shape.toString() + ": more than " +
                            std::to_string(kMaxSampleElements) + " values per sample");
    if (__builtin_mul_overflow(n, s.syntheticSamples, &total) || total > kMaxSyntheticValues)
        throw DataError("dataset.synthetic_samples: " + std::to_string(s.syntheticSamples) + " samples of " +
                        train.shape.toString() + " exceed " + std::to_string(kMaxSyntheticValues) +
                        " values (4 GiB); use fewer or smaller samples");
    if (__builtin_mul_overflow(n, int64_t{s.syntheticClasses}, &total) || total > kMaxSyntheticValues)
        throw DataError("dataset.synthetic_classes: " + std::to_string(s.syntheticClasses) + " class centers of " +
                        train.shape.toString() + " exceed " + std::to_string(kMaxSyntheticValues) + " values");
    const int classes = s.syntheticClasses;
    // One Gaussian blob per class: centers ~ N(0, 1) per element, samples ~ center + N(0, 1).
    // Centers are about sqrt(2n) apart against unit noise: learnable, not instantly.
    uint64_t rng = mixSeed(kSyntheticSeed, static_cast<uint64_t>(n * 1000 + classes));
    std::vector<float> centers(static_cast<size_t>(n) * static_cast<size_t>(classes));
    for (float& c : centers) c = static_cast<float>(randomNormal(rng));
    train.values.resize(static_cast<size_t>(n * s.syntheticSamples));
    train.labels.resize(static_cast<size_t>(s.syntheticSamples));
    for (int64_t i = 0; i < s.syntheticSamples; ++i) {
        const int32_t label = static_cast<int32_t>(randomBelow(rng, static_cast<uint64_t>(classes)));
        train.labels[static_cast<size_t>(i)] = label;
        const float* c = centers.data() + static_cast<int64_t>(label) * n;
        float* dst = train.values.data() + i * n;
        for (int64_t j = 0; j < n; ++j) dst[j] = c[j] + static_cast<float>(randomNormal(rng));
    }
    RawSplit validation;
    splitAndLimit(train, validation, false, s);
    DatasetBundle b;
    normalize(train, validation, s.normalization, false, b.normalization);
    b.numClasses = classes;
    if (!s.classNames.empty() && static_cast<int>(s.classNames.size()) == classes) {
        b.classNames = s.classNames;
    } else {
        for (int c = 0; c < classes; ++c) b.classNames.push_back("class " + std::to_string(c));
    }
    b.description =
        "Synthetic blobs " + train.shape.toString() + ": " + splitCounts(train.count(), validation.count(), classes);
    b.train = toSplit(std::move(train));
    b.validation = toSplit(std::move(validation));
    return b;
}

}  // namespace strata::data
