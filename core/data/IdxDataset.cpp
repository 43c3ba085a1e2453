// IdxDataset: the idx loader. MNIST-format image and label files (gzipped or raw): the training pair and an
// optional validation pair, read on two threads; labels are bytes, at most 256 classes.
#include <future>

#include "core/data/DatasetLoader.h"
#include "core/data/IdxReader.h"

namespace strata::data {

namespace {

const std::vector<std::string> kFashionClasses = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                  "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

RawSplit loadIdxPair(const std::string& imagesPath, const std::string& labelsPath, int numClasses) {
    IdxArray images = readIdxU8(imagesPath, 3);
    IdxArray labels = readIdxU8(labelsPath, 1);
    if (images.dims[0] != labels.dims[0])
        throw DataError::atByte(labelsPath, 4,
                                "count mismatch: " + std::to_string(labels.dims[0]) + " labels, but " +
                                    fileName(imagesPath) + " holds " + std::to_string(images.dims[0]) + " images");
    RawSplit raw;
    raw.shape = Shape{1, images.dims[1], images.dims[2]};
    const int64_t count = images.dims[0];
    raw.labels.resize(static_cast<size_t>(count));
    const uint8_t* l = labels.data();
    for (int64_t i = 0; i < count; ++i) {
        if (l[i] >= numClasses)
            throw DataError::atByte(
                labelsPath, labels.dataOffset + i,
                "label " + std::to_string(l[i]) + " out of range (0.." + std::to_string(numClasses - 1) + ")");
        raw.labels[static_cast<size_t>(i)] = l[i];
    }
    const int64_t total = count * raw.shape.numel();
    raw.values.resize(static_cast<size_t>(total));
    const uint8_t* p = images.data();
    for (int64_t i = 0; i < total; ++i) raw.values[static_cast<size_t>(i)] = float(p[i]);
    return raw;
}

}  // namespace

DatasetBundle loadIdxDataset(const DatasetSettings& s, const std::string& projectPath, Streaming /*streaming*/) {
    if (s.trainImages.empty()) throw DataError("dataset.train_images is empty (idx datasets need an image file)");
    if (s.trainLabels.empty()) throw DataError("dataset.train_labels is empty (idx datasets need a label file)");
    if (s.validationImages.empty() != s.validationLabels.empty())
        throw DataError(s.validationImages.empty() ? "dataset.validation_images is empty but validation_labels is set"
                                                   : "dataset.validation_labels is empty but validation_images is set");
    const std::string trainImages = resolveDatasetPath(projectPath, s.trainImages);
    const std::string lowerPath = lower(trainImages);
    const bool fashion = lowerPath.find("fashion") != std::string::npos;
    DatasetBundle b;
    if (!s.classNames.empty()) {
        b.classNames = s.classNames;
    } else if (fashion) {
        b.classNames = kFashionClasses;
    } else {
        for (int i = 0; i < 10; ++i) b.classNames.push_back(std::to_string(i));
    }
    b.numClasses = static_cast<int>(b.classNames.size());
    if (b.numClasses > 256) throw DataError("dataset.class_names: idx labels are bytes; at most 256 classes");

    // Decompression dominates: the validation files load on a second thread meanwhile.
    const bool haveValidation = !s.validationImages.empty();
    const std::string valImages = resolveDatasetPath(projectPath, s.validationImages);
    const std::string valLabels = resolveDatasetPath(projectPath, s.validationLabels);
    std::future<RawSplit> pending;
    if (haveValidation)
        pending = std::async(std::launch::async, [&] { return loadIdxPair(valImages, valLabels, b.numClasses); });
    RawSplit train = loadIdxPair(trainImages, resolveDatasetPath(projectPath, s.trainLabels), b.numClasses);
    RawSplit validation;
    if (haveValidation) {
        validation = pending.get();
        if (validation.shape != train.shape)
            throw DataError::atByte(valImages, 8,
                                    "image size " + validation.shape.toString() + " differs from the training images " +
                                        train.shape.toString());
    }
    splitAndLimit(train, validation, haveValidation, s);
    normalize(train, validation, s.normalization, true, b.normalization);
    const std::string name = fashion ? "Fashion-MNIST" : lowerPath.find("mnist") != std::string::npos ? "MNIST" : "IDX";
    b.description = name + " (idx): " + splitCounts(train.count(), validation.count(), b.numClasses);
    b.train = toSplit(std::move(train));
    b.validation = toSplit(std::move(validation));
    return b;
}

}  // namespace strata::data
