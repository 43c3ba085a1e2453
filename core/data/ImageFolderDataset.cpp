// ImageFolderDataset: the image_folder loader. Lists the folder (or CSV) with ImageFolder, holds out a stratified
// validation split, takes the seeded limits, then decodes every image (image_loading memory) or hands the
// lists to an ImageStream with its DecodedCache (stream, cache), measuring the normalization on a sample.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>

#include "core/data/DataRandom.h"
#include "core/data/DatasetLoader.h"
#include "core/data/ImageFolder.h"
#include "core/data/ImageStream.h"
#include "core/io/FileIo.h"

namespace strata::data {

namespace {

// Indices of a seeded random subset of `count` of size `limit` (all when limit is 0 or >= count), in order.
std::vector<int64_t> randomSubset(int64_t count, int64_t limit, uint64_t salt) {
    std::vector<int64_t> rows(static_cast<size_t>(count));
    std::iota(rows.begin(), rows.end(), 0);
    if (limit <= 0 || limit >= count) return rows;
    uint64_t rng = mixSeed(kSplitSeed ^ salt, static_cast<uint64_t>(count));
    for (int64_t i = count - 1; i > 0; --i)
        std::swap(rows[static_cast<size_t>(i)], rows[randomBelow(rng, static_cast<uint64_t>(i + 1))]);
    rows.resize(static_cast<size_t>(limit));
    std::sort(rows.begin(), rows.end());
    return rows;
}

ImageList pickImages(const ImageList& list, const std::vector<int64_t>& rows) {
    ImageList out;
    out.classNames = list.classNames;
    for (int64_t r : rows) {
        out.paths.push_back(list.paths[static_cast<size_t>(r)]);
        out.labels.push_back(list.labels[static_cast<size_t>(r)]);
        if (!list.targets.empty()) out.targets.push_back(list.targets[static_cast<size_t>(r)]);
    }
    return out;
}

// Stratified hold-out: in every class, the same seeded fraction (at least one image when the class has two
// or more and the fraction is not 0) goes to validation. Returns (train, validation) rows in list order.
std::pair<std::vector<int64_t>, std::vector<int64_t>> stratifiedHoldOut(const ImageList& list, double fraction) {
    checkSplitFraction(fraction);
    std::vector<std::vector<int64_t>> byClass(list.classNames.size());
    for (size_t i = 0; i < list.labels.size(); ++i)
        byClass[static_cast<size_t>(list.labels[i])].push_back(static_cast<int64_t>(i));
    std::vector<int64_t> train, val;
    for (size_t c = 0; c < byClass.size(); ++c) {
        std::vector<int64_t>& rows = byClass[c];
        const auto count = static_cast<int64_t>(rows.size());
        uint64_t rng = mixSeed(kSplitSeed + c, static_cast<uint64_t>(count));
        for (int64_t i = count - 1; i > 0; --i)
            std::swap(rows[static_cast<size_t>(i)], rows[randomBelow(rng, static_cast<uint64_t>(i + 1))]);
        auto nVal = static_cast<int64_t>(std::llround(fraction * static_cast<double>(count)));
        if (fraction > 0 && nVal == 0 && count >= 2) nVal = 1;
        if (nVal >= count && count > 0) nVal = count - 1;
        val.insert(val.end(), rows.begin(), rows.begin() + nVal);
        train.insert(train.end(), rows.begin() + nVal, rows.end());
    }
    std::sort(train.begin(), train.end());
    std::sort(val.begin(), val.end());
    return {train, val};
}

RawSplit decodeSplit(const ImageList& list, const Shape& shape, const DatasetSettings& s, const char* split,
                     std::vector<SkippedFile>& skipped, std::map<std::pair<int64_t, int64_t>, int64_t>& sizes) {
    DecodedImages d = decodeImages(list.paths, shape, resizePolicyFor(s), s.decodeThreads, s.strictImages);
    RawSplit raw;
    raw.shape = shape;
    addSkipped(skipped, std::move(d.skipped), split);
    for (const auto& size : d.sizes) ++sizes[size];
    if (list.targets.empty()) {
        raw.values = std::move(d.values);
        for (int64_t k : d.kept) raw.labels.push_back(list.labels[static_cast<size_t>(k)]);
        return raw;
    }
    // Paired target images: decoded to the same shape; an image whose target cannot be read is left out with it.
    std::vector<std::string> targetPaths;
    for (int64_t k : d.kept) targetPaths.push_back(list.targets[static_cast<size_t>(k)]);
    DecodedImages t = decodeImages(targetPaths, shape, resizePolicyFor(s), s.decodeThreads, s.strictImages);
    const int64_t n = shape.numel();
    raw.values.resize(t.kept.size() * static_cast<size_t>(n));
    for (size_t j = 0; j < t.kept.size(); ++j) {
        const auto row = static_cast<size_t>(t.kept[j]);
        std::copy_n(d.values.begin() + static_cast<int64_t>(row) * n, n,
                    raw.values.begin() + static_cast<int64_t>(j) * n);
        raw.labels.push_back(list.labels[static_cast<size_t>(d.kept[row])]);
    }
    std::vector<SkippedFile> badTargets;
    for (SkippedFile& f : t.skipped) badTargets.push_back({f.path, "target image: " + f.reason});
    addSkipped(skipped, std::move(badTargets), split);
    raw.targetSize = n;
    raw.targets = std::move(t.values);
    return raw;
}

// RGB images: one mean and standard deviation per channel, measured on the training split (in 0..255
// units). Stored as per-feature statistics (the channel's value at each of its pixels), the form
// checkpoints, exports and predict already carry, so nothing downstream needs to know about channels.
void standardizePerChannel(RawSplit& train, RawSplit& validation, Normalization& norm) {
    norm = Normalization{};
    norm.mode = settingName(NormalizationMode::Standardize);
    const int64_t channels = train.shape.dims()[0], plane = train.shape.numel() / channels;
    std::vector<double> sum(static_cast<size_t>(channels), 0.0), sumSq(static_cast<size_t>(channels), 0.0);
    for (int64_t r = 0; r < train.count(); ++r)
        for (int64_t c = 0; c < channels; ++c) {
            const float* p = train.values.data() + (r * channels + c) * plane;
            for (int64_t i = 0; i < plane; ++i) {
                sum[static_cast<size_t>(c)] += p[i];
                sumSq[static_cast<size_t>(c)] += double(p[i]) * p[i];
            }
        }
    const double n = double(std::max<int64_t>(1, train.count())) * double(plane);
    norm.featureMean.resize(static_cast<size_t>(channels * plane));
    norm.featureStd.resize(static_cast<size_t>(channels * plane));
    for (int64_t c = 0; c < channels; ++c) {
        const double mean = sum[static_cast<size_t>(c)] / n;
        const double var = std::max(0.0, sumSq[static_cast<size_t>(c)] / n - mean * mean);
        const auto sd = var > 1e-12 ? float(std::sqrt(var)) : 1.0f;
        std::fill_n(norm.featureMean.begin() + c * plane, plane, float(mean));
        std::fill_n(norm.featureStd.begin() + c * plane, plane, sd);
    }
    const int64_t f = channels * plane;
    for (RawSplit* split : {&train, &validation}) applyNormalization(norm, split->values.data(), split->count(), f);
}

// Streamed image folders: the normalization statistics come from this many training images (a seeded
// sample), decoded at the start.
constexpr int64_t kStreamStatsImages = 2000;

// Where a split's decoded bytes go (image_loading cache): memory while `memoryLeft` allows, else a file in
// .strata-cache beside the project, named after the folder, the split and the layout key (the paths, shape and
// resize; earlier files of the same folder and split, for other files or shapes, are removed, and so are
// temporaries of runs that died while creating one). What reusing a file found (images decoded again, a rebuild)
// goes to `notes`, one line each.
std::unique_ptr<DecodedCache> makeImageCache(const DatasetSettings& s, const std::string& projectPath,
                                             const std::string& folder, const std::string& splitName,
                                             const ImageList& list, const Shape& shape,
                                             const std::vector<SourceStamp>& stamps, int64_t& memoryLeft,
                                             std::string& where, std::string& notes) {
    namespace fs = std::filesystem;
    const auto count = static_cast<int64_t>(list.paths.size());
    const int64_t bytes = count * shape.numel();
    if (s.imageLoading != ImageLoading::Cache || count == 0) return nullptr;
    if (bytes <= memoryLeft) {
        memoryLeft -= bytes;
        where += (where.empty() ? "" : ", ") + splitName + " cache in memory (" +
                 std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB)";
        return DecodedCache::inMemory(count, shape.numel());
    }
    std::string base = fileName(folder);
    for (char& c : base)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
    const std::string prefix = base + "-" + splitName + "-";
    const uint64_t key = imageListLayoutKey(list.paths, shape, resizePolicyFor(s));
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(key));
    const fs::path dir = resolveDatasetPath(projectPath, ".strata-cache");
    const fs::path file = dir / (prefix + hex + ".u8");
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.starts_with(prefix) && name.ends_with(".u8") && it->path() != file) fs::remove(it->path(), ec);
    }
    if (fs::is_directory(dir, ec)) removeOrphanedTemporaryFiles(dir.string());
    auto cache = DecodedCache::inFile(file.string(), key, list.paths, stamps, shape.numel());
    where += (where.empty() ? "" : ", ") + splitName + " cache in " + file.string() +
             (cache->reused() ? " (reused: " + std::to_string(cache->readyCount()) + " images decoded before)" : "");
    if (!cache->report().empty()) notes += "\n" + splitName + " image cache " + file.string() + ": " + cache->report();
    return cache;
}

ImageStream::Options streamOptions(const Shape& shape, const DatasetSettings& s, const Normalization& norm,
                                   uint64_t fp) {
    ImageStream::Options o;
    o.shape = shape;
    o.policy = resizePolicyFor(s);
    o.strict = s.strictImages;
    o.threads = s.decodeThreads;
    o.queuedBatches = s.loaderBatches;
    o.normalization = norm;
    o.filesFingerprint = fp;
    return o;
}

// A split's stream; with paired target images (list.targets), a second stream over them, its own cache beside.
DataSplit streamSplit(const ImageList& list, const Shape& shape, const DatasetSettings& s, const Normalization& norm,
                      uint64_t fp, std::unique_ptr<DecodedCache> cache, uint64_t targetFp = 0,
                      std::unique_ptr<DecodedCache> targetCache = nullptr) {
    DataSplit split;
    split.sampleShape = shape;
    split.count = static_cast<int64_t>(list.paths.size());
    split.labels = list.labels;
    auto stream = std::make_shared<ImageStream>(list.paths, streamOptions(shape, s, norm, fp), std::move(cache));
    if (!list.targets.empty()) {
        stream->setTargets(std::make_unique<ImageStream>(list.targets, streamOptions(shape, s, norm, targetFp),
                                                         std::move(targetCache)));
        split.targetShape = shape;  // the loader reads each sample's target beside it
    }
    split.source = std::move(stream);
    return split;
}

bool folderTargets(const DatasetSettings& s) {
    return s.task == TaskKind::ImageToImage && s.imageTarget == ImageTarget::Folder;
}

DataError noImageDecoded(const std::string& trainPath, const std::vector<SkippedFile>& skipped) {
    return DataError::inFile(trainPath, "no training image decoded; first problem: " +
                                            (skipped.empty() ? std::string("none listed")
                                                             : skipped.front().path + ": " + skipped.front().reason));
}

// The normalization of image samples (0..255): standardize on RGB is per channel, anything else as for
// every image set; the class names with it.
void normalizeImages(const DatasetSettings& s, RawSplit& train, RawSplit& validation, const ImageList& list,
                     DatasetBundle& b) {
    if (s.normalization == NormalizationMode::Standardize && train.shape.dims()[0] == 3) {
        standardizePerChannel(train, validation, b.normalization);
    } else {
        normalize(train, validation, s.normalization, true, b.normalization);
    }
    b.classNames = list.classNames;
    b.numClasses = static_cast<int>(b.classNames.size());
}

std::string imageFolderDescription(const DatasetSettings& s, const std::string& trainPath, const Shape& shape,
                                   int64_t train, int64_t validation, const DatasetBundle& b) {
    return "Image folder " + fileName(trainPath) + " (" + shape.toString() + ", " + settingName(s.imageResize) +
           "): " + splitCounts(train, validation, b.numClasses) +
           (b.skipped.empty() ? "" : ", " + std::to_string(b.skipped.size()) + " skipped");
}

// image_loading stream or cache: labels now, images while training. The normalization statistics (and the
// size histogram) come from a seeded sample of the training images, rounded to bytes as the stream
// delivers them.
DatasetBundle streamImageFolder(const DatasetSettings& s, const std::string& projectPath, const std::string& trainPath,
                                const Shape& shape, const ImageList& trainList, const ImageList& valList,
                                DatasetBundle b) {
    ImageList sampleList =
        pickImages(trainList, randomSubset(static_cast<int64_t>(trainList.paths.size()), kStreamStatsImages, 3));
    sampleList.targets.clear();  // the statistics are the inputs' (as in memory); targets decode while training
    RawSplit sample = decodeSplit(sampleList, shape, s, "training", b.skipped, b.imageSizes);
    if (sample.count() == 0) throw noImageDecoded(trainPath, b.skipped);
    for (float& v : sample.values) v = std::clamp(std::round(v), 0.0f, 255.0f);
    RawSplit none;
    none.shape = shape;
    normalizeImages(s, sample, none, trainList, b);
    int64_t memoryLeft = s.cacheMemoryMb << 20;
    std::string where;
    // One stat() of every file: the stamps go into the stream's fingerprint and into the cache's slots.
    const std::vector<SourceStamp> trainStamps = stampFiles(trainList.paths);
    const std::vector<SourceStamp> valStamps = stampFiles(valList.paths);
    const uint64_t trainFp = imageListFingerprint(trainList.paths, trainStamps, shape, resizePolicyFor(s));
    const uint64_t valFp = imageListFingerprint(valList.paths, valStamps, shape, resizePolicyFor(s));
    std::string notes;
    auto trainCache =
        makeImageCache(s, projectPath, trainPath, "train", trainList, shape, trainStamps, memoryLeft, where, notes);
    auto valCache =
        makeImageCache(s, projectPath, trainPath, "validation", valList, shape, valStamps, memoryLeft, where, notes);
    // Paired target images: their own stamps, fingerprints and caches ("train_targets", "validation_targets": no
    // split's cache name is a prefix of theirs, so making one never removes the other's file).
    auto targetsOf = [&](const ImageList& list, const char* name, uint64_t& fp) -> std::unique_ptr<DecodedCache> {
        if (list.targets.empty()) return nullptr;
        ImageList targets;
        targets.paths = list.targets;
        const std::vector<SourceStamp> stamps = stampFiles(targets.paths);
        fp = imageListFingerprint(targets.paths, stamps, shape, resizePolicyFor(s));
        return makeImageCache(s, projectPath, trainPath, name, targets, shape, stamps, memoryLeft, where, notes);
    };
    uint64_t trainTargetFp = 0, valTargetFp = 0;
    auto trainTargetCache = targetsOf(trainList, "train_targets", trainTargetFp);
    auto valTargetCache = targetsOf(valList, "validation_targets", valTargetFp);
    b.train = streamSplit(trainList, shape, s, b.normalization, trainFp, std::move(trainCache), trainTargetFp,
                          std::move(trainTargetCache));
    b.validation = streamSplit(valList, shape, s, b.normalization, valFp, std::move(valCache), valTargetFp,
                               std::move(valTargetCache));
    // An empty validation split has targets too (the data check reads the shape).
    if (folderTargets(s)) b.train.targetShape = b.validation.targetShape = shape;
    b.description = imageFolderDescription(s, trainPath, shape, b.train.count, b.validation.count, b) + "; streamed (" +
                    settingName(s.imageLoading) + ": " + (where.empty() ? std::string("decoded every epoch") : where) +
                    "), " + std::to_string(s.loaderBatches) + " batches held ready, statistics from " +
                    std::to_string(sample.count()) + " sampled images" + notes;
    return b;
}

}  // namespace

DatasetBundle loadImageFolderDataset(const DatasetSettings& s, const std::string& projectPath, Streaming streaming) {
    if (s.trainPath.empty())
        throw DataError("dataset.train_path is empty (image_folder datasets need a folder of class folders or a CSV)");
    if (s.imageShape.size() != 3 || (s.imageShape[0] != 1 && s.imageShape[0] != 3))
        throw DataError(
            "dataset.image_shape: image_folder datasets need [C, H, W] with C = 1 (gray) or 3 (RGB), "
            "e.g. 1,28,28: the Input node's shape");
    const Shape shape(s.imageShape);
    const std::string trainPath = resolveDatasetPath(projectPath, s.trainPath);
    DatasetBundle b;
    const bool pairedTargets = folderTargets(s);
    ImageList trainList = listImages(trainPath, s.classNames, s.strictImages);
    if (pairedTargets)
        trainList.targets = pairTargetImages(trainList, trainPath, resolveDatasetPath(projectPath, s.targetPath));
    addSkipped(b.skipped, trainList.skipped, "training");
    ImageList valList;
    const bool haveValidation = !s.validationPath.empty();
    if (haveValidation) {
        const std::string valPath = resolveDatasetPath(projectPath, s.validationPath);
        valList = listImages(valPath, trainList.classNames, s.strictImages);
        if (pairedTargets) {
            if (s.validationTargetPath.empty())
                throw DataError(
                    "dataset.validation_target_path is empty: name the target images of "
                    "validation_path (or clear validation_path to hold out validation_split)");
            valList.targets =
                pairTargetImages(valList, valPath, resolveDatasetPath(projectPath, s.validationTargetPath));
        }
        addSkipped(b.skipped, valList.skipped, "validation");
    } else if (s.validationSplit > 0.0) {
        auto [trainRows, valRows] = stratifiedHoldOut(trainList, s.validationSplit);
        valList = pickImages(trainList, valRows);
        trainList = pickImages(trainList, trainRows);
    } else {
        checkSplitFraction(s.validationSplit);
    }
    // Limits before decoding, so a quick run on a big folder decodes only what it uses.
    trainList = pickImages(trainList, randomSubset(static_cast<int64_t>(trainList.paths.size()), s.trainLimit, 1));
    valList = pickImages(valList, randomSubset(static_cast<int64_t>(valList.paths.size()), s.validationLimit, 2));
    valList.classNames = trainList.classNames;
    if (streaming == Streaming::Allowed && s.imageLoading != ImageLoading::Memory)
        return streamImageFolder(s, projectPath, trainPath, shape, trainList, valList, std::move(b));

    RawSplit train = decodeSplit(trainList, shape, s, "training", b.skipped, b.imageSizes);
    RawSplit validation = decodeSplit(valList, shape, s, "validation", b.skipped, b.imageSizes);
    if (train.count() == 0) throw noImageDecoded(trainPath, b.skipped);
    if (pairedTargets) validation.targetSize = train.targetSize;  // an empty validation split has targets too
    normalizeImages(s, train, validation, trainList, b);
    // Target images are pixels like the inputs: the same normalization, so that the loss and PSNR compare alike.
    for (RawSplit* r : {&train, &validation})
        if (r->targetSize > 0) applyNormalization(b.normalization, r->targets.data(), r->count(), r->targetSize);
    b.description = imageFolderDescription(s, trainPath, shape, train.count(), validation.count(), b);
    b.train = toSplit(std::move(train));
    b.validation = toSplit(std::move(validation));
    for (DataSplit* split : {&b.train, &b.validation})
        if (split->hasTargets()) split->targetShape = shape;
    return b;
}

}  // namespace strata::data
