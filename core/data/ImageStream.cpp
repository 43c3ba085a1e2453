#include "core/data/ImageStream.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <thread>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/data/ImageFolder.h"

namespace strata::data {

namespace {

constexpr char kMagic[8] = {'S', 'T', 'R', 'A', 'T', 'A', 'I', 'C'};
constexpr uint32_t kVersion = 1;
constexpr size_t kPage = 4096;

// The file's header; the states follow it (one byte a sample), then the samples from a page boundary.
struct CacheHeader {
    char magic[8];
    uint32_t version;
    uint32_t reserved;
    uint64_t fingerprint;
    int64_t count;
    int64_t sampleBytes;
};

size_t roundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }
size_t statesOffset() { return roundUp(sizeof(CacheHeader), 64); }
size_t dataOffset(int64_t count) { return roundUp(statesOffset() + static_cast<size_t>(count), kPage); }

uint64_t mix(uint64_t h, const void* data, size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

std::string systemError(const std::string& what) { return what + ": " + std::strerror(errno); }

// Maps `bytes` of an open file read-write and shared; throws DataError naming `path`.
void* mapFile(int fd, size_t bytes, const std::string& path) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) throw DataError::inFile(path, systemError("cannot map the decoded-image cache"));
    return p;
}

}  // namespace

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

std::unique_ptr<DecodedCache> DecodedCache::inFile(const std::string& path, uint64_t fingerprint, int64_t count,
                                                   int64_t sampleBytes) {
    namespace fs = std::filesystem;
    std::unique_ptr<DecodedCache> c(new DecodedCache);
    c->m_count = count;
    c->m_sampleBytes = sampleBytes;
    c->m_path = path;
    const size_t total = dataOffset(count) + static_cast<size_t>(count * sampleBytes);
    c->m_mapBytes = total;
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);

    // An earlier run's file, when it describes the same samples.
    int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
        CacheHeader h{};
        struct stat st {};
        const bool same = ::pread(fd, &h, sizeof h, 0) == static_cast<ssize_t>(sizeof h) &&
                          std::memcmp(h.magic, kMagic, sizeof kMagic) == 0 && h.version == kVersion &&
                          h.fingerprint == fingerprint && h.count == count && h.sampleBytes == sampleBytes &&
                          ::fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) == total;
        if (same) {
            c->m_reused = true;
        } else {
            ::close(fd);
            fd = -1;
        }
    }
    if (fd < 0) {
        // A new file, whole before it takes the name: a run killed here leaves a temporary, never a file
        // with a valid header and the wrong contents.
        const std::string temp = path + ".tmp." + std::to_string(::getpid());
        fd = ::open(temp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) throw DataError::inFile(path, systemError("cannot create the decoded-image cache"));
        CacheHeader h{};
        std::memcpy(h.magic, kMagic, sizeof kMagic);
        h.version = kVersion;
        h.fingerprint = fingerprint;
        h.count = count;
        h.sampleBytes = sampleBytes;
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
    c->m_data = static_cast<uint8_t*>(c->m_map) + dataOffset(count);
    return c;
}

DecodedCache::~DecodedCache() {
    if (m_map) ::munmap(m_map, m_mapBytes);
}

DecodedCache::State DecodedCache::state(int64_t i) const {
    return static_cast<State>(std::atomic_ref<uint8_t>(m_states[i]).load(std::memory_order_acquire));
}

void DecodedCache::publish(int64_t i, State s) {
    std::atomic_ref<uint8_t>(m_states[i]).store(static_cast<uint8_t>(s), std::memory_order_release);
}

int64_t DecodedCache::readyCount() const {
    int64_t n = 0;
    for (int64_t i = 0; i < m_count; ++i) n += state(i) == Ready ? 1 : 0;
    return n;
}

uint64_t imageListFingerprint(const std::vector<std::string>& paths, const Shape& shape, ResizePolicy policy) {
    uint64_t h = 0xcbf29ce484222325ull;
    h = mix(h, &kVersion, sizeof kVersion);
    for (int64_t d : shape.dims()) h = mix(h, &d, sizeof d);
    const int p = static_cast<int>(policy);
    h = mix(h, &p, sizeof p);
    for (const std::string& path : paths) {
        h = mix(h, path.data(), path.size() + 1);
        struct stat st {};
        if (::stat(path.c_str(), &st) == 0) {
            const int64_t facts[3] = {static_cast<int64_t>(st.st_size), static_cast<int64_t>(st.st_mtim.tv_sec),
                                      static_cast<int64_t>(st.st_mtim.tv_nsec)};
            h = mix(h, facts, sizeof facts);
        }
    }
    return h;
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
