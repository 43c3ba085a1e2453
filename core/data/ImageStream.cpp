#include "core/data/ImageStream.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <thread>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/data/ImageFolder.h"
#include "core/io/Checksum.h"

namespace strata::data {

namespace {

constexpr char kMagic[8] = {'S', 'T', 'R', 'A', 'T', 'A', 'I', 'C'};
// 2: per-slot checksums and source stamps, the header's checksum, files named by the layout key.
constexpr uint32_t kVersion = 2;
constexpr size_t kPage = 4096;
// Images named in a report line; the rest are counted.
constexpr size_t kNamedInReport = 5;

// The file's header; the states follow it (one byte a sample), then the slot records (8-byte aligned), then the
// samples from a page boundary.
struct CacheHeader {
    char magic[8];
    uint32_t version;
    uint32_t reserved;
    uint64_t layoutKey;
    int64_t count;
    int64_t sampleBytes;
    uint64_t checksum;  // XXH3 of the fields above
};

size_t roundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }
size_t statesOffset() { return roundUp(sizeof(CacheHeader), 64); }
size_t recordsOffset(int64_t count) { return roundUp(statesOffset() + static_cast<size_t>(count), 8); }

uint64_t mix(uint64_t h, const void* data, size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

uint64_t headerChecksum(const CacheHeader& h) { return tensorChecksum(&h, offsetof(CacheHeader, checksum)); }

std::string systemError(const std::string& what) { return what + ": " + std::strerror(errno); }

// Maps `bytes` of an open file read-write and shared; throws DataError naming `path`.
void* mapFile(int fd, size_t bytes, const std::string& path) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) throw DataError::inFile(path, systemError("cannot map the decoded-image cache"));
    return p;
}

std::string describeChange(const SourceStamp& was, const SourceStamp& now) {
    if (now.size < 0) return "is gone or cannot be read";
    if (was.size != now.size)
        return "changed (size " + std::to_string(was.size) + " -> " + std::to_string(now.size) + " bytes)";
    return "changed (modified since it was decoded)";
}

}  // namespace

// A slot's record in a file: its source's stamp when it was filled and the checksum of the slot.
struct DecodedCache::SlotRecord {
    int64_t size;
    int64_t mtimeNs;
    uint64_t checksum;
};

namespace {

size_t dataOffset(int64_t count) {
    return roundUp(recordsOffset(count) + static_cast<size_t>(count) * 24, kPage);  // 24: sizeof(SlotRecord)
}

}  // namespace

std::vector<SourceStamp> stampFiles(const std::vector<std::string>& paths) {
    std::vector<SourceStamp> stamps(paths.size());
    for (size_t i = 0; i < paths.size(); ++i) {
        struct stat st {};
        if (::stat(paths[i].c_str(), &st) == 0)
            stamps[i] = {static_cast<int64_t>(st.st_size),
                         static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
    }
    return stamps;
}

std::unique_ptr<DecodedCache> DecodedCache::inMemory(int64_t count, int64_t sampleBytes) {
    std::unique_ptr<DecodedCache> c(new DecodedCache);
    c->m_count = count;
    c->m_sampleBytes = sampleBytes;
    const size_t data = roundUp(static_cast<size_t>(std::max<int64_t>(count, 1)), kPage);
    c->m_mapBytes = data + static_cast<size_t>(count * sampleBytes) + kPage;
    void* p =
        ::mmap(nullptr, c->m_mapBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw DataError(systemError("the decoded-image cache in memory"));
    c->m_map = p;
    c->m_states = static_cast<uint8_t*>(p);
    c->m_data = c->m_states + data;
    return c;
}

std::unique_ptr<DecodedCache> DecodedCache::inFile(const std::string& path, uint64_t layoutKey,
                                                   const std::vector<std::string>& sources,
                                                   std::vector<SourceStamp> stamps, int64_t sampleBytes) {
    static_assert(sizeof(SlotRecord) == 24);
    namespace fs = std::filesystem;
    const auto count = static_cast<int64_t>(sources.size());
    if (stamps.size() != sources.size())
        throw std::invalid_argument("DecodedCache::inFile: one stamp per source expected");
    std::unique_ptr<DecodedCache> c(new DecodedCache);
    c->m_count = count;
    c->m_sampleBytes = sampleBytes;
    c->m_path = path;
    c->m_stamps = std::move(stamps);
    const size_t total = dataOffset(count) + static_cast<size_t>(count * sampleBytes);
    c->m_mapBytes = total;
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);

    // An earlier run's file, when its header is intact and describes the same samples.
    int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
        CacheHeader h{};
        struct stat st {};
        std::string why;
        if (::pread(fd, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h) ||
            std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) {
            why = "not a decoded-image cache (its header is missing or damaged)";
        } else if (h.version != kVersion) {
            why = "written by another version of Strata (format " + std::to_string(h.version) + ", this one reads " +
                  std::to_string(kVersion) + ")";
        } else if (h.checksum != headerChecksum(h)) {
            why = "its header failed its checksum (the file is damaged)";
        } else if (h.layoutKey != layoutKey || h.count != count || h.sampleBytes != sampleBytes) {
            why = "made for other files, another shape or another resize";
        } else if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != total) {
            why = "its size is " + std::to_string(st.st_size) + " bytes, " + std::to_string(total) +
                  " expected (truncated?)";
        }
        if (why.empty()) {
            c->m_reused = true;
        } else {
            c->m_report = "rebuilt: " + why;
            ::close(fd);
            fd = -1;
        }
    }
    if (fd < 0) {
        // A new file, whole before it takes the name: a run killed here leaves a temporary (FileIo's naming, so
        // removeOrphanedTemporaryFiles finds it), never a file with a valid header and the wrong contents.
        const std::string temp = path + ".tmp-" + std::to_string(::getpid());
        fd = ::open(temp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) throw DataError::inFile(path, systemError("cannot create the decoded-image cache"));
        CacheHeader h{};
        std::memcpy(h.magic, kMagic, sizeof kMagic);
        h.version = kVersion;
        h.layoutKey = layoutKey;
        h.count = count;
        h.sampleBytes = sampleBytes;
        h.checksum = headerChecksum(h);
        const bool ok = ::ftruncate(fd, static_cast<off_t>(total)) == 0 &&
                        ::pwrite(fd, &h, sizeof h, 0) == static_cast<ssize_t>(sizeof h) &&
                        std::rename(temp.c_str(), path.c_str()) == 0;
        if (!ok) {
            const std::string why =
                systemError("cannot write the decoded-image cache (" + std::to_string(total >> 20) + " MiB)");
            ::close(fd);
            ::unlink(temp.c_str());
            throw DataError::inFile(path, why);
        }
    }
    try {
        c->m_map = mapFile(fd, total, path);
    } catch (...) {
        ::close(fd);
        throw;
    }
    ::close(fd);  // the mapping keeps the file
    c->m_states = static_cast<uint8_t*>(c->m_map) + statesOffset();
    c->m_records = reinterpret_cast<SlotRecord*>(static_cast<uint8_t*>(c->m_map) + recordsOffset(count));
    c->m_data = static_cast<uint8_t*>(c->m_map) + dataOffset(count);
    if (c->m_reused) c->checkSlots(sources);
    return c;
}

uint64_t DecodedCache::slotChecksum(int64_t i, State s, const SourceStamp& stamp) const {
    // The bytes' own checksum (a Bad slot has none), bound to the slot's index, state and source stamp, so that a
    // damaged state byte or record fails as surely as a damaged pixel.
    const uint64_t words[5] = {s == Ready ? tensorChecksum(sample(i), static_cast<size_t>(m_sampleBytes)) : 0,
                               static_cast<uint64_t>(i), static_cast<uint64_t>(s), static_cast<uint64_t>(stamp.size),
                               static_cast<uint64_t>(stamp.mtimeNs)};
    return tensorChecksum(words, sizeof words);
}

void DecodedCache::checkSlots(const std::vector<std::string>& sources) {
    std::vector<std::string> damaged, changed;
    int64_t damagedCount = 0, changedCount = 0;
    for (int64_t i = 0; i < m_count; ++i) {
        const auto s = static_cast<State>(m_states[i]);
        if (s == Empty) continue;
        const SlotRecord& r = m_records[i];
        const SourceStamp was{r.size, r.mtimeNs}, now = m_stamps[static_cast<size_t>(i)];
        const std::string& name = sources[static_cast<size_t>(i)];
        if ((s != Ready && s != Bad) || r.checksum != slotChecksum(i, s, was)) {
            if (damaged.size() < kNamedInReport) damaged.push_back(name);
            ++damagedCount;
        } else if (was != now) {
            if (changed.size() < kNamedInReport) changed.push_back(name + " " + describeChange(was, now));
            ++changedCount;
        } else {
            continue;
        }
        publish(i, Empty);
    }
    if (damagedCount + changedCount == 0) return;
    auto list = [](const std::vector<std::string>& names, int64_t total) {
        std::string out;
        for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
        if (total > static_cast<int64_t>(names.size()))
            out += " and " + std::to_string(total - static_cast<int64_t>(names.size())) + " more";
        return out;
    };
    m_report = std::to_string(damagedCount + changedCount) + " of the stored images decoded again";
    if (changedCount > 0) m_report += "; their files changed: " + list(changed, changedCount);
    if (damagedCount > 0)
        m_report +=
            "; stored bytes that failed their checksum (the cache file is damaged): " + list(damaged, damagedCount);
}

DecodedCache::~DecodedCache() {
    if (m_map) ::munmap(m_map, m_mapBytes);
}

DecodedCache::State DecodedCache::state(int64_t i) const {
    return static_cast<State>(std::atomic_ref<uint8_t>(m_states[i]).load(std::memory_order_acquire));
}

void DecodedCache::publish(int64_t i, State s) {
    if (m_records && s != Empty) {
        const SourceStamp& stamp = m_stamps[static_cast<size_t>(i)];
        m_records[i] = {stamp.size, stamp.mtimeNs, slotChecksum(i, s, stamp)};
    }
    std::atomic_ref<uint8_t>(m_states[i]).store(static_cast<uint8_t>(s), std::memory_order_release);
}

int64_t DecodedCache::readyCount() const {
    int64_t n = 0;
    for (int64_t i = 0; i < m_count; ++i) n += state(i) == Ready ? 1 : 0;
    return n;
}

namespace {

uint64_t layoutHash(const std::vector<std::string>& paths, const Shape& shape, ResizePolicy policy,
                    const std::vector<SourceStamp>* stamps) {
    uint64_t h = 0xcbf29ce484222325ull;
    h = mix(h, &kVersion, sizeof kVersion);
    for (int64_t d : shape.dims()) h = mix(h, &d, sizeof d);
    const int p = static_cast<int>(policy);
    h = mix(h, &p, sizeof p);
    for (size_t i = 0; i < paths.size(); ++i) {
        h = mix(h, paths[i].data(), paths[i].size() + 1);
        if (stamps && (*stamps)[i].size >= 0) {
            const int64_t facts[2] = {(*stamps)[i].size, (*stamps)[i].mtimeNs};
            h = mix(h, facts, sizeof facts);
        }
    }
    return h;
}

}  // namespace

uint64_t imageListFingerprint(const std::vector<std::string>& paths, const Shape& shape, ResizePolicy policy) {
    return imageListFingerprint(paths, stampFiles(paths), shape, policy);
}

uint64_t imageListFingerprint(const std::vector<std::string>& paths, const std::vector<SourceStamp>& stamps,
                              const Shape& shape, ResizePolicy policy) {
    return layoutHash(paths, shape, policy, &stamps);
}

uint64_t imageListLayoutKey(const std::vector<std::string>& paths, const Shape& shape, ResizePolicy policy) {
    return layoutHash(paths, shape, policy, nullptr);
}

ImageStream::ImageStream(std::vector<std::string> paths, Options options, std::unique_ptr<DecodedCache> cache)
    : m_paths(std::move(paths)), m_options(std::move(options)), m_cache(std::move(cache)) {
    if (m_cache && m_cache->count() != static_cast<int64_t>(m_paths.size()))
        throw std::invalid_argument("ImageStream: the cache holds " + std::to_string(m_cache->count()) +
                                    " samples for " + std::to_string(m_paths.size()) + " files");
    m_threads =
        m_options.threads > 0 ? m_options.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    uint64_t h = m_options.filesFingerprint != 0 ? m_options.filesFingerprint
                                                 : imageListFingerprint(m_paths, m_options.shape, m_options.policy);
    const Normalization& n = m_options.normalization;
    h = mix(h, n.mode.data(), n.mode.size());
    const float scalars[3] = {n.scale, n.mean, n.std};
    h = mix(h, scalars, sizeof scalars);
    h = mix(h, n.featureMean.data(), n.featureMean.size() * sizeof(float));
    h = mix(h, n.featureStd.data(), n.featureStd.size() * sizeof(float));
    m_fingerprint = h;
}

void ImageStream::setTargets(std::unique_ptr<ImageStream> targets) {
    if (targets && targets->m_paths.size() != m_paths.size())
        throw std::invalid_argument("ImageStream: " + std::to_string(targets->m_paths.size()) + " target images for " +
                                    std::to_string(m_paths.size()) + " images");
    m_targets = std::move(targets);
    if (m_targets) m_fingerprint = mix(m_fingerprint, &m_targets->m_fingerprint, sizeof m_targets->m_fingerprint);
}

bool ImageStream::readTarget(int64_t i, float* out, std::string& why) const {
    if (!m_targets) return SampleSource::readTarget(i, out, why);
    if (m_targets->read(i, out, why)) return true;
    why = "target image " + m_targets->sampleName(i) + ": " + why;
    return false;
}

bool ImageStream::readBytes(int64_t i, uint8_t* out, std::string& why) const {
    const int64_t n = m_options.shape.numel();
    if (m_cache) {
        const DecodedCache::State s = m_cache->state(i);
        if (s == DecodedCache::Ready) {
            std::memcpy(out, m_cache->sample(i), static_cast<size_t>(n));
            return true;
        }
        if (s == DecodedCache::Bad) {
            std::lock_guard<std::mutex> lock(m_reasonsMutex);
            auto it = m_reasons.find(i);
            why =
                it != m_reasons.end() ? it->second : "could not be decoded in an earlier run (" + m_cache->path() + ")";
            if (m_options.strict) throw DataError::inFile(m_paths[static_cast<size_t>(i)], why);
            return false;
        }
    }
    thread_local std::vector<float> values;
    values.resize(static_cast<size_t>(n));
    const std::string& path = m_paths[static_cast<size_t>(i)];
    try {
        decodeFitted(path, m_options.shape, m_options.policy, values.data());
    } catch (const std::exception& e) {
        why = decodeProblem(e);
        {
            std::lock_guard<std::mutex> lock(m_reasonsMutex);
            m_reasons[i] = why;
        }
        if (m_cache) m_cache->publish(i, DecodedCache::Bad);
        if (m_options.strict)
            throw DataError::inFile(path, why + " (strict_images is on; turn it off to skip such files)");
        return false;
    }
    ++m_decoded;
    for (int64_t j = 0; j < n; ++j)
        out[j] = static_cast<uint8_t>(std::clamp(std::lround(values[static_cast<size_t>(j)]), 0L, 255L));
    if (m_cache) {
        std::memcpy(m_cache->slot(i), out, static_cast<size_t>(n));
        m_cache->publish(i, DecodedCache::Ready);
    }
    return true;
}

bool ImageStream::read(int64_t i, float* out, std::string& why) const {
    const int64_t n = m_options.shape.numel();
    thread_local std::vector<uint8_t> bytes;
    bytes.resize(static_cast<size_t>(n));
    if (!readBytes(i, bytes.data(), why)) return false;
    for (int64_t j = 0; j < n; ++j) out[j] = bytes[static_cast<size_t>(j)];
    applyNormalization(m_options.normalization, out, 1, n);
    return true;
}

}  // namespace strata::data
