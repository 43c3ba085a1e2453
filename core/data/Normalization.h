// Normalization: how raw data-file values (pixels 0..255, CSV numbers) become model inputs. loadDataset measures
// it on the training split; checkpoints, export files and the project fingerprint store it; predict, the export
// checks and the thumbnails apply or undo it. One struct for all of them: each file format keeps its own spelling
// of it (Checkpoint.cpp, ExportModel.cpp), the values are the same.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata {

// x' = (x*scale - mean)/std. For CSV "standardize" the statistics are per feature (featureMean/featureStd, one
// entry per input value, in sample order) and mean = 0, std = 1; RGB images standardized per channel store each
// channel's statistics at all its pixels the same way.
struct Normalization {
    // The NormalizationMode's spelling (settingName): checkpoints and exports hold it as text.
    std::string mode = "none";
    float scale = 1.f, mean = 0.f, std = 1.f;
    std::vector<float> featureMean, featureStd;  // empty unless per-feature
    bool operator==(const Normalization&) const = default;
};

// x' = (x*scale - mean)/std, or per feature (x - featureMean)/featureStd, on `samples` samples of `n` values
// (per-feature statistics hold n entries). The float expression every path uses, so that loadDataset, a streamed
// image and predict give identical inputs.
void applyNormalization(const Normalization& norm, float* values, int64_t samples, int64_t n);

// Raw data-file values -> model inputs, as above for whole samples of the per-feature count. Mode "none" changes
// nothing. Throws std::invalid_argument when per-feature statistics do not divide the values into whole samples.
void applyNormalization(std::vector<float>& values, const Normalization& n);
// The inverse: model inputs -> raw data-file values (e.g. 0..255 pixels for thumbnails).
void undoNormalization(std::vector<float>& values, const Normalization& n);

// Normalization values no input could be normalized with: a std of 0, NaN or inf (in any mode but "none"), a
// non-finite scale or mean, per-feature arrays of different lengths or with such a std. Throws
// std::invalid_argument naming the field ("normalization std 0 is not positive"). Checkpoints and every export
// loader check what they read with it.
void checkNormalizationValues(const Normalization& normalization);

}  // namespace strata
