// Task: see Task.h.
#include "core/graph/Task.h"

#include <algorithm>
#include <stdexcept>

namespace strata {

const std::vector<LossKind>& taskLosses(TaskKind task) {
    static const std::vector<LossKind> classification{LossKind::CrossEntropy, LossKind::Mse, LossKind::BceLogits};
    static const std::vector<LossKind> regression{LossKind::Mse, LossKind::Mae, LossKind::Huber};
    static const std::vector<LossKind> multiLabel{LossKind::BceLogits};
    static const std::vector<LossKind> imageToImage{LossKind::Mse, LossKind::Mae};
    switch (task) {
        case TaskKind::Classification: return classification;
        case TaskKind::Regression: return regression;
        case TaskKind::MultiLabel: return multiLabel;
        case TaskKind::ImageToImage: return imageToImage;
    }
    return classification;
}

bool taskAllows(TaskKind task, LossKind loss) {
    const std::vector<LossKind>& l = taskLosses(task);
    return std::find(l.begin(), l.end(), loss) != l.end();
}

std::string taskScoreName(TaskKind task) {
    switch (task) {
        case TaskKind::Classification: return "accuracy";
        case TaskKind::Regression: return "R2";
        case TaskKind::MultiLabel: return "micro F1";
        case TaskKind::ImageToImage: return "PSNR";
    }
    return "accuracy";
}

std::string taskSettingsProblem(const DatasetSettings& d, const TrainingSettings& t) {
    std::vector<std::string> problems;
    const std::string task = settingName(d.task);
    if (!taskAllows(d.task, t.loss)) {
        std::string names;
        for (LossKind l : taskLosses(d.task)) names += (names.empty() ? "" : ", ") + settingName(l);
        problems.push_back("training.loss " + settingName(t.loss) + " does not train a " + task +
                           " task; use one of: " + names);
    }
    if (d.task == TaskKind::Regression && d.kind != DatasetKind::Csv)
        problems.push_back(
            "dataset.task regression reads its targets from CSV columns; dataset.kind must be csv (it "
            "is " +
            settingName(d.kind) + ")");
    if (d.task == TaskKind::Regression && d.targetColumns.empty())
        problems.push_back("dataset.target_columns is empty: name the CSV column(s) a regression predicts");
    if (d.task == TaskKind::MultiLabel && d.kind != DatasetKind::Csv && d.kind != DatasetKind::Text)
        problems.push_back(
            "dataset.task multi_label reads its labels from a CSV or text file; dataset.kind must be csv "
            "or text (it is " +
            settingName(d.kind) + ")");
    if (d.task == TaskKind::MultiLabel && d.kind == DatasetKind::Text && !d.targetColumns.empty())
        problems.push_back(
            "dataset.target_columns: a text dataset's labels are in its label column (separated by "
            "label_separator); clear target_columns");
    if (d.task == TaskKind::ImageToImage) {
        if (d.kind != DatasetKind::Idx && d.kind != DatasetKind::ImageFolder)
            problems.push_back("dataset.task image_to_image needs images: dataset.kind idx or image_folder (it is " +
                               settingName(d.kind) + ")");
        // A target must match its input pixel for pixel; a random crop, flip or warp of the input alone breaks that.
        if (d.cropPadding > 0 || d.horizontalFlip || d.resizedCropMinArea > 0 || d.rotationDegrees > 0 ||
            d.brightness > 0 || d.contrast > 0)
            problems.push_back(
                "dataset: image_to_image trains against images that match the input pixel for pixel; "
                "set crop_padding, horizontal_flip, resized_crop_min_area, rotation_degrees, "
                "brightness and contrast to 0");
        if (d.imageTarget != ImageTarget::Denoise && d.noiseStd > 0)
            problems.push_back("dataset.noise_std: with image_target " + settingName(d.imageTarget) +
                               " the noise would only blur the target; use image_target denoise, or noise_std 0");
        if (d.imageTarget == ImageTarget::Denoise && d.noiseStd <= 0 && d.maskingFraction <= 0)
            problems.push_back("dataset.image_target denoise needs noise: set noise_std or masking_fraction above 0");
        if (d.imageTarget == ImageTarget::Folder && d.kind != DatasetKind::ImageFolder)
            problems.push_back(
                "dataset.image_target folder pairs image files by name: dataset.kind must be "
                "image_folder");
        if (d.imageTarget == ImageTarget::Folder && d.targetPath.empty())
            problems.push_back("dataset.target_path is empty: name the folder of target images");
        if (d.imageTarget == ImageTarget::Folder && !d.validationPath.empty() && d.validationTargetPath.empty())
            problems.push_back(
                "dataset.validation_target_path is empty: name the target images of validation_path (or clear "
                "validation_path to hold out validation_split)");
        if (d.imageTarget == ImageTarget::Denoise && d.kind == DatasetKind::ImageFolder &&
            d.imageLoading != ImageLoading::Memory)
            problems.push_back("dataset.image_loading: denoising adds its noise to images in memory; use memory");
    }
    std::string text;
    for (const std::string& p : problems) text += (text.empty() ? "" : "\n") + p;
    return text;
}

void checkTaskSettings(const DatasetSettings& dataset, const TrainingSettings& training) {
    const std::string problem = taskSettingsProblem(dataset, training);
    if (!problem.empty()) throw std::invalid_argument(problem);
}

}  // namespace strata
