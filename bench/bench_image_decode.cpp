// Image-folder pipeline throughput: lists a class-folder dataset and decodes, converts and resizes every
// image to [C, H, W] floats, as an image_folder dataset load does (core/data/ImageFolder), on N threads.
// --stream: one epoch of the streaming loader instead (image_loading stream: the DataLoader's N decode
// threads decode, resize, scale and flip each shuffled batch of 64 from the files; the dataset's listing and
// statistics sample are done before the clock starts).
// Prints one JSON line: {"images": ..., "seconds": ..., "images_per_s": ..., "skipped": ...}.
// Usage: bench_image_decode FOLDER C H W THREADS [stretch|center_crop] [--stream]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "core/data/DataLoader.h"
#include "core/data/Dataset.h"
#include "core/data/ImageFolder.h"

using namespace strata;

int main(int argc, char** argv) {
    if (argc < 6) {
        std::fprintf(stderr, "usage: bench_image_decode FOLDER C H W THREADS [stretch|center_crop]\n");
        return 2;
    }
    try {
        const Shape shape{std::atoll(argv[2]), std::atoll(argv[3]), std::atoll(argv[4])};
        const int threads = std::atoi(argv[5]);
        const data::ResizePolicy policy = argc > 6 && std::string(argv[6]) == "center_crop"
                                              ? data::ResizePolicy::CenterCrop
                                              : data::ResizePolicy::Stretch;
        bool stream = false;
        for (int i = 6; i < argc; ++i) stream = stream || std::string(argv[i]) == "--stream";
        if (stream) {
            DatasetSettings s;
            s.kind = DatasetKind::ImageFolder;
            s.trainPath = argv[1];
            s.imageShape = shape.dims();
            s.imageResize = policy == data::ResizePolicy::CenterCrop ? ImageResize::CenterCrop : ImageResize::Stretch;
            s.imageLoading = ImageLoading::Stream;
            s.decodeThreads = threads;
            const DatasetBundle b = loadDataset(s, "", Streaming::Allowed);
            Augmentation flip;
            flip.horizontalFlip = true;
            DataLoader loader(b.train, 64, true, 1, flip);
            const auto t0 = std::chrono::steady_clock::now();
            loader.startEpoch(1);
            Batch batch;
            int64_t images = 0;
            while (loader.next(batch)) images += batch.size;
            const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            std::printf("{\"images\": %lld, \"seconds\": %.4f, \"images_per_s\": %.1f, \"skipped\": %zu}\n",
                        static_cast<long long>(images), sec, double(images) / sec, loader.takeSkipped().size());
            return 0;
        }
        const auto t0 = std::chrono::steady_clock::now();
        const data::ImageList list = data::listImages(argv[1], {}, false);
        const data::DecodedImages d = data::decodeImages(list.paths, shape, policy, threads, false);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("{\"images\": %zu, \"seconds\": %.4f, \"images_per_s\": %.1f, \"skipped\": %zu}\n", d.kept.size(),
                    s, double(d.kept.size()) / s, d.skipped.size() + list.skipped.size());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    return 0;
}
