// ImageStream: an image folder read while training instead of decoded whole at the start
// (dataset.image_loading stream or cache). The DataLoader's decode threads call read() for the samples
// of each batch; only the batches the loader holds are in memory, so a folder larger than memory trains.
// With a DecodedCache, each image is decoded once, stored as bytes (0..255 after the fit to the input
// shape) and read from there afterwards: in memory, or in a memory-mapped file that a later run with the
// same files, shape and resize finds and reuses, image by image: an image whose checksum fails or whose file
// changed size or time is decoded again. A file that fails to decode is left out of its batch
// (counted and reported by the loader with the reason) or, strict, stops the run with its path; labels
// belong to sample indices, so leaving a file out never shifts another's label. Image to image with a folder of
// targets: a second ImageStream over the target files (setTargets), read with each sample; a pair whose input or
// target fails is left out together.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/data/Dataset.h"
#include "core/data/ImageFile.h"
#include "core/tensor/Shape.h"

namespace strata::data {

// A source file's size and modification time (nanoseconds): a slot decoded from it is reused only while the
// file still has them.
struct SourceStamp {
    int64_t size = -1;  // -1: the file could not be stat'ed
    int64_t mtimeNs = 0;
    bool operator==(const SourceStamp&) const = default;
};
std::vector<SourceStamp> stampFiles(const std::vector<std::string>& paths);

// Fixed-size byte slots, one per sample, each with a state. Several threads may fill different slots at
// once; a slot's bytes are written before its state says Ready (release/acquire).
class DecodedCache {
public:
    enum State : uint8_t { Empty = 0, Ready = 1, Bad = 2 };

    // Anonymous memory: pages are taken as slots fill.
    static std::unique_ptr<DecodedCache> inMemory(int64_t count, int64_t sampleBytes);
    // A memory-mapped file for `sources` (stamped as they are now), identified by `layoutKey`
    // (imageListLayoutKey: the paths, the shape and the resize). Each filled slot carries an XXH3 checksum of its
    // bytes, its state and its source's stamp. An earlier run's file is reused slot by slot: every filled slot is
    // checked when the file is opened, and one whose checksum fails or whose source changed size or time since is
    // emptied (decoded again); a file whose header fails its checksum, made for another layout, or of another
    // version, is rebuilt whole. report() says which. A new file is created whole under a temporary name and
    // renamed into place. Throws DataError naming the file when it cannot be created or mapped.
    static std::unique_ptr<DecodedCache> inFile(const std::string& path, uint64_t layoutKey,
                                                const std::vector<std::string>& sources,
                                                std::vector<SourceStamp> stamps, int64_t sampleBytes);
    ~DecodedCache();
    DecodedCache(const DecodedCache&) = delete;
    DecodedCache& operator=(const DecodedCache&) = delete;

    State state(int64_t i) const;
    const uint8_t* sample(int64_t i) const { return m_data + i * m_sampleBytes; }
    uint8_t* slot(int64_t i) { return m_data + i * m_sampleBytes; }
    // Sets slot i's state; in a file, Ready and Bad first store the slot's checksum and its source's stamp.
    void publish(int64_t i, State s);
    int64_t count() const { return m_count; }
    int64_t readyCount() const;                         // slots in state Ready (a scan)
    const std::string& path() const { return m_path; }  // empty in memory
    bool reused() const { return m_reused; }            // a file from an earlier run was taken (maybe in part)
    // What opening the file did when it was not a plain reuse or a first creation: "rebuilt: ..." or "N stored
    // images decoded again: ..." naming the files. Empty otherwise.
    const std::string& report() const { return m_report; }

private:
    struct SlotRecord;
    DecodedCache() = default;
    uint64_t slotChecksum(int64_t i, State s, const SourceStamp& stamp) const;
    void checkSlots(const std::vector<std::string>& sources);
    void* m_map = nullptr;
    size_t m_mapBytes = 0;
    uint8_t* m_states = nullptr;
    SlotRecord* m_records = nullptr;  // in a file: one per slot
    uint8_t* m_data = nullptr;
    int64_t m_count = 0, m_sampleBytes = 0;
    std::vector<SourceStamp> m_stamps;  // in a file: the sources' stamps when it was opened
    std::string m_path, m_report;
    bool m_reused = false;
};

// A hash of what a cache holds: every path with its size and modification time, the shape and the resize.
uint64_t imageListFingerprint(const std::vector<std::string>& paths, const Shape& shape, ResizePolicy policy);
uint64_t imageListFingerprint(const std::vector<std::string>& paths, const std::vector<SourceStamp>& stamps,
                              const Shape& shape, ResizePolicy policy);
// The same without the sizes and times: which cache file a list uses (its slots then check their own sources).
uint64_t imageListLayoutKey(const std::vector<std::string>& paths, const Shape& shape, ResizePolicy policy);

class ImageStream final : public SampleSource {
public:
    struct Options {
        Shape shape;  // [C, H, W]
        ResizePolicy policy = ResizePolicy::Stretch;
        bool strict = false;
        int threads = 0;        // 0: one per core
        int queuedBatches = 4;  // the loader's budget
        Normalization normalization;
        uint64_t filesFingerprint = 0;  // imageListFingerprint of the paths when the caller has it; 0: computed
    };
    // `cache` may be null (decode every time it is read). Its count must be paths.size().
    ImageStream(std::vector<std::string> paths, Options options, std::unique_ptr<DecodedCache> cache);

    bool read(int64_t i, float* out, std::string& why) const override;
    std::string sampleName(int64_t i) const override { return m_paths[static_cast<size_t>(i)]; }
    // Image to image with a folder of targets: `targets` reads sample i's target image (its own files and cache,
    // the same shape, resize and normalization); its fingerprint joins this one's.
    void setTargets(std::unique_ptr<ImageStream> targets);
    bool hasTargets() const override { return m_targets != nullptr; }
    bool readTarget(int64_t i, float* out, std::string& why) const override;
    const ImageStream* targets() const { return m_targets.get(); }
    uint64_t fingerprint() const override { return m_fingerprint; }
    int threads() const override { return m_threads; }
    int queuedBatches() const override { return m_options.queuedBatches; }

    // Sample i as bytes (0..255, the fitted image rounded), from the cache or decoded. False with `why`
    // for a bad file; strict: throws DataError naming it.
    bool readBytes(int64_t i, uint8_t* out, std::string& why) const;
    const DecodedCache* cache() const { return m_cache.get(); }
    int64_t decodedCount() const { return m_decoded.load(); }  // files decoded so far (cache misses)

private:
    std::vector<std::string> m_paths;
    Options m_options;
    std::unique_ptr<DecodedCache> m_cache;
    std::unique_ptr<ImageStream> m_targets;
    uint64_t m_fingerprint = 0;
    int m_threads = 1;
    mutable std::atomic<int64_t> m_decoded{0};
    mutable std::mutex m_reasonsMutex;  // reasons of the files found bad in this process
    mutable std::unordered_map<int64_t, std::string> m_reasons;
};

}  // namespace strata::data
