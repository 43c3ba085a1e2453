#include "core/data/Dataset.h"

#include <algorithm>
#include <cstring>

#include "core/data/DatasetLoader.h"
#include "core/graph/Task.h"

namespace strata {

bool SampleSource::readTarget(int64_t i, float*, std::string&) const {
    throw std::logic_error("SampleSource::readTarget: " + sampleName(i) + " has no target image (hasTargets is false)");
}

void DataSplit::copyTargets(int64_t i, float* dst) const {
    const int64_t n = targetSize();
    if (targetsAreInputs)
        std::memcpy(dst, inputs.data() + i * n, static_cast<size_t>(n) * sizeof(float));
    else
        std::memcpy(dst, targets.data() + i * n, static_cast<size_t>(n) * sizeof(float));
}

DataError DataError::inFile(const std::string& path, const std::string& what) {
    return DataError(path, -1, -1, data::fileName(path) + ": " + what);
}

DataError DataError::atByte(const std::string& path, int64_t byteOffset, const std::string& what) {
    return DataError(path, byteOffset, -1, data::fileName(path) + ": byte " + std::to_string(byteOffset) + ": " + what);
}

DataError DataError::atLine(const std::string& path, int64_t line, const std::string& what) {
    return DataError(path, -1, line, data::fileName(path) + ": line " + std::to_string(line) + ": " + what);
}

std::vector<std::string> skippedFileLines(const std::vector<SkippedFile>& files, const std::string& split) {
    std::vector<std::string> lines;
    for (size_t i = 0; i < files.size() && i < kListedSkippedFiles; ++i)
        lines.push_back((files[i].split.empty() ? split : files[i].split) + ": skipped " + files[i].path + ": " +
                        files[i].reason);
    if (files.size() > kListedSkippedFiles)
        lines.push_back(split + ": and " + std::to_string(files.size() - kListedSkippedFiles) + " more files skipped");
    return lines;
}

namespace data {

// The one place a dataset kind is tied to its loader (one file each, DatasetLoader.h).
const std::vector<DatasetLoader>& datasetLoaders() {
    static const std::vector<DatasetLoader> loaders = {
        {DatasetKind::Idx, loadIdxDataset},
        {DatasetKind::Csv, loadCsvDataset},
        {DatasetKind::Text, loadTextDataset},
        {DatasetKind::Synthetic, loadSyntheticDataset},
        {DatasetKind::ImageFolder, loadImageFolderDataset},
    };
    return loaders;
}

const DatasetLoader* findDatasetLoader(DatasetKind kind) {
    for (const DatasetLoader& l : datasetLoaders())
        if (l.kind == kind) return &l;
    return nullptr;
}

}  // namespace data

DatasetBundle loadDataset(const DatasetSettings& settings, const std::string& projectPath, Streaming streaming) {
    if (settings.trainLimit < 0 || settings.validationLimit < 0)
        throw DataError("dataset.train_limit and validation_limit must not be negative");
    if (settings.task != TaskKind::Classification) {
        // The data's side of the task's settings (the loss is the Trainer's to check).
        TrainingSettings training;
        training.loss = taskLosses(settings.task)[0];
        const std::string problem = taskSettingsProblem(settings, training);
        if (!problem.empty()) throw DataError(problem);
    }
    if (const data::DatasetLoader* loader = data::findDatasetLoader(settings.kind)) {
        DatasetBundle b = loader->load(settings, projectPath, streaming);
        b.task = settings.task;
        if (settings.task == TaskKind::ImageToImage && settings.imageTarget != ImageTarget::Folder) {
            // The target is the clean input: nothing to hold twice. A streamed split reads its inputs batch by
            // batch; the loader copies them before any noise (DataLoader).
            for (DataSplit* s : {&b.train, &b.validation}) {
                s->targetShape = s->sampleShape;
                s->targetsAreInputs = true;
            }
            b.numClasses = 0;
            b.classNames.clear();
            b.description += std::string(", target: ") +
                             (settings.imageTarget == ImageTarget::Input ? "the input" : "the clean input (denoising)");
        } else if (settings.task == TaskKind::ImageToImage) {
            // The loader paired every image with its target (ImageFolderDataset); the class folders are only a
            // layout.
            b.numClasses = 0;
            b.classNames.clear();
            b.description += ", target: the images of " + data::fileName(settings.targetPath) + " of the same names";
        }
        return b;
    }
    throw DataError("dataset.kind: unknown kind " + std::to_string(static_cast<int>(settings.kind)) + " (" +
                    datasetSetting("kind").rangeText() + ")");
}

}  // namespace strata
