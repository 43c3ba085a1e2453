#include "core/data/Dataset.h"

#include "core/data/DatasetLoader.h"

namespace strata {

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
    if (const data::DatasetLoader* loader = data::findDatasetLoader(settings.kind))
        return loader->load(settings, projectPath, streaming);
    throw DataError("dataset.kind: unknown kind " + std::to_string(static_cast<int>(settings.kind)) + " (" +
                    datasetSetting("kind").rangeText() + ")");
}

}  // namespace strata
