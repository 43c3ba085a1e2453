// ImageFolder: image datasets on disk, the layout torchvision's ImageFolder and Keras'
// image_dataset_from_directory read: a root folder with one subfolder per class (class names are the
// folder names, sorted by their bytes), or a CSV of path,label rows. Listing finds the files; decoding
// turns them into [C, H, W] samples on several threads through ImageFile's one decode-and-fit path (the
// one `predict` and the Predict dock use). A bad entry (an unreadable, empty, truncated or non-image
// file, an empty or oddly named class folder) is skipped with its reason, or, in strict mode, stops
// everything with a DataError naming the path. Labels are fixed by the class list before any file is
// decoded, so a skipped file never shifts another's label.
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "core/data/Dataset.h"
#include "core/data/ImageFile.h"
#include "core/tensor/Shape.h"

namespace strata::data {

struct ImageList {
    std::vector<std::string> paths;
    std::vector<int32_t> labels;          // index into classNames, one per path
    std::vector<std::string> classNames;  // the label order
    std::vector<SkippedFile> skipped;
    // image_to_image with image_target folder: each path's target image (pairTargetImages); empty otherwise.
    std::vector<std::string> targets;
};

// Lists `source`: a folder of class folders, or a .csv file of path,label rows (paths relative to the
// CSV's folder; an optional "path,label" header row). `classNames` non-empty fixes the classes and their
// order (a folder or label outside it is skipped); empty: the class folders found (or the CSV's labels),
// sorted. Throws DataError when `source` does not exist or holds no image at all, and in strict mode at
// the first bad entry.
ImageList listImages(const std::string& source, const std::vector<std::string>& classNames, bool strict);

// image_to_image with image_target folder: the target of each listed image, the file with the same path under
// `targetRoot` as it has under `source` (the folder listImages was given, or the folder of the CSV it was given).
// Throws DataError naming the first image without a target (and how many more lack one), an image outside that
// folder, and, for a folder (not a CSV's choice of files), the first image under `targetRoot` that matches no
// listed or skipped entry.
std::vector<std::string> pairTargetImages(const ImageList& list, const std::string& source,
                                          const std::string& targetRoot);

struct DecodedImages {
    std::vector<float> values;  // kept.size() * shape.numel(), 0..255, in list order
    std::vector<int64_t> kept;  // indices of `paths` that decoded
    std::vector<SkippedFile> skipped;
    std::vector<std::pair<int64_t, int64_t>> sizes;  // each kept image's file size (width, height)
};

// One file decoded and fitted to `shape` ([C, H, W]) into `out` (shape.numel() values, 0..255); returns the
// file's own (width, height). Throws FormatError (a bad file) or std::invalid_argument (channels that
// cannot be fitted); decodeProblem turns either into a skip reason.
std::pair<int64_t, int64_t> decodeFitted(const std::string& path, const Shape& shape, ResizePolicy policy, float* out);
std::string decodeProblem(const std::exception& e);

// Decodes and fits every path to `shape` ([C, H, W], C = 1 or 3) with `threads` workers (0: one per core).
// The result does not depend on the thread count. Strict: throws DataError for the first bad file in
// list order.
DecodedImages decodeImages(const std::vector<std::string>& paths, const Shape& shape, ResizePolicy policy, int threads,
                           bool strict);

}  // namespace strata::data
