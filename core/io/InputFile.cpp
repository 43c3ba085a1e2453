#include "core/io/InputFile.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/io/FormatError.h"
#include "core/io/InputLimits.h"

namespace strata {

namespace {

std::string sizeText(int64_t bytes) {
    std::string s = std::to_string(bytes) + " bytes";
    if (bytes >= kGiB && bytes % kGiB == 0) return s + " (" + std::to_string(bytes / kGiB) + " GiB)";
    if (bytes >= kMiB && bytes % kMiB == 0) return s + " (" + std::to_string(bytes / kMiB) + " MiB)";
    return s;
}

// What a file that is not regular is, for the message.
std::string notRegularText(mode_t mode) {
    if (S_ISDIR(mode)) return "is a directory, not a file";
    const char* what = S_ISFIFO(mode)   ? "a FIFO (named pipe)"
                       : S_ISCHR(mode)  ? "a character device"
                       : S_ISBLK(mode)  ? "a block device"
                       : S_ISSOCK(mode) ? "a socket"
                                        : "not a regular file";
    return std::string("is ") + what + ", not a regular file; only regular files are read";
}

}  // namespace

InputFile::InputFile(const std::string& path, int64_t maxBytes, const std::string& kind)
    : m_path(path), m_kind(kind), m_maxBytes(maxBytes) {
    // O_NONBLOCK: the open of a FIFO returns at once instead of waiting for a writer; fstat then refuses it.
    // O_NOCTTY: a terminal named as a file never becomes the controlling terminal.
    m_fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (m_fd < 0) {
        const int err = errno;
        throw FormatError(path, err == ENOENT ? std::string("cannot open: no such file")
                                              : std::string("cannot open: ") + std::strerror(err));
    }
    struct stat st {};
    if (::fstat(m_fd, &st) != 0) {
        const int err = errno;
        ::close(m_fd);
        m_fd = -1;
        throw FormatError(path, std::string("cannot read the file's status: ") + std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(m_fd);
        m_fd = -1;
        throw FormatError(path, notRegularText(st.st_mode));
    }
    m_size = static_cast<int64_t>(st.st_size);
    if (m_size > maxBytes) {
        ::close(m_fd);
        m_fd = -1;
        throw FormatError(path, "is " + sizeText(m_size) + "; " + kind + " is at most " + sizeText(maxBytes));
    }
    // Reads of a regular file never block; the flag is cleared so the descriptor behaves as a plain one.
    const int flags = ::fcntl(m_fd, F_GETFL);
    if (flags >= 0) ::fcntl(m_fd, F_SETFL, flags & ~O_NONBLOCK);
}

InputFile::~InputFile() {
    if (m_fd >= 0) ::close(m_fd);
}

InputFile::InputFile(InputFile&& o) noexcept
    : m_path(std::move(o.m_path)),
      m_kind(std::move(o.m_kind)),
      m_fd(o.m_fd),
      m_size(o.m_size),
      m_maxBytes(o.m_maxBytes) {
    o.m_fd = -1;
}

InputFile& InputFile::operator=(InputFile&& o) noexcept {
    if (this != &o) {
        if (m_fd >= 0) ::close(m_fd);
        m_path = std::move(o.m_path);
        m_kind = std::move(o.m_kind);
        m_fd = o.m_fd;
        m_size = o.m_size;
        m_maxBytes = o.m_maxBytes;
        o.m_fd = -1;
    }
    return *this;
}

size_t InputFile::read(void* out, size_t n) {
    if (m_fd < 0) throw FormatError(m_path, "read after the file was handed over");
    size_t got = 0;
    while (got < n) {
        const ssize_t r = ::read(m_fd, static_cast<char*>(out) + got, n - got);
        if (r < 0) {
            if (errno == EINTR) continue;
            throw FormatError(m_path, std::string("read error: ") + std::strerror(errno));
        }
        if (r == 0) break;
        got += static_cast<size_t>(r);
    }
    return got;
}

std::string InputFile::readAll() {
    std::string out;
    out.resize(static_cast<size_t>(m_size));
    out.resize(read(out.data(), out.size()));
    // A file that grew since the open: read on, but never past the limit.
    char chunk[65536];
    for (size_t n; (n = read(chunk, sizeof chunk)) > 0;) {
        if (static_cast<int64_t>(out.size() + n) > m_maxBytes)
            throw FormatError(
                m_path, "grew past " + sizeText(m_maxBytes) + " while it was read; " + m_kind + " is at most that");
        out.append(chunk, n);
    }
    return out;
}

int InputFile::release() {
    const int fd = m_fd;
    m_fd = -1;
    return fd;
}

std::string readFileText(const std::string& path, int64_t maxBytes, const std::string& kind) {
    InputFile f(path, maxBytes, kind);
    return f.readAll();
}

std::vector<uint8_t> readFileBytes(const std::string& path, int64_t maxBytes, const std::string& kind) {
    const std::string text = readFileText(path, maxBytes, kind);
    return std::vector<uint8_t>(text.begin(), text.end());
}

// ---- InputStream ---------------------------------------------------------------------------------------

class InputStream::Buffer : public std::streambuf {
public:
    explicit Buffer(InputFile file) : m_file(std::move(file)) {}
    const InputFile& file() const { return m_file; }

protected:
    int_type underflow() override {
        if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
        const int64_t left = m_file.maxBytes() - m_read;
        if (left <= 0) return traits_type::eof();
        const size_t want = static_cast<size_t>(std::min<int64_t>(left, static_cast<int64_t>(sizeof m_chunk)));
        // A read error throws: the stream catches it and sets badbit, so the reader sees an error, not an end.
        const size_t n = m_file.read(m_chunk, want);
        if (n == 0) return traits_type::eof();
        m_read += static_cast<int64_t>(n);
        setg(m_chunk, m_chunk, m_chunk + n);
        return traits_type::to_int_type(*gptr());
    }

private:
    InputFile m_file;
    int64_t m_read = 0;
    char m_chunk[65536] = {};
};

InputStream::InputStream(const std::string& path, int64_t maxBytes, const std::string& kind)
    : std::istream(nullptr), m_buffer(std::make_unique<Buffer>(InputFile(path, maxBytes, kind))) {
    rdbuf(m_buffer.get());
}

InputStream::~InputStream() = default;

const InputFile& InputStream::file() const { return m_buffer->file(); }

}  // namespace strata
