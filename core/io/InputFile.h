// InputFile: a file a user named, open for reading, known to be a regular file of bounded size. It is opened
// with O_NONBLOCK (opening a FIFO blocks until a writer comes; /dev/zero never ends) and checked with fstat on
// that descriptor, so a check by path followed by an open cannot be raced, and every read goes through the
// descriptor that was checked. InputStream reads one line by line.
#pragma once

#include <cstdint>
#include <istream>
#include <memory>
#include <streambuf>
#include <string>
#include <vector>

namespace strata {

class InputFile {
public:
    // Opens `path`. FormatError naming the file when it is missing or unreadable (with the system's reason), a
    // folder, a FIFO, socket or device, or larger than `maxBytes` ("is 5000000000 bytes; <kind> is at most
    // ..."). `kind` names the kind of file in that message ("a project file").
    InputFile(const std::string& path, int64_t maxBytes, const std::string& kind);
    ~InputFile();
    InputFile(InputFile&& o) noexcept;
    InputFile& operator=(InputFile&& o) noexcept;
    InputFile(const InputFile&) = delete;
    InputFile& operator=(const InputFile&) = delete;

    const std::string& path() const { return m_path; }
    int fd() const { return m_fd; }
    int64_t size() const { return m_size; }  // at the open
    int64_t maxBytes() const { return m_maxBytes; }

    // Up to `n` bytes from the current position (fewer at the end of the file). FormatError on a read error.
    size_t read(void* out, size_t n);
    // The rest of the file. A file that grew past the limit since the open is refused, like one that was over it.
    std::string readAll();
    // Gives up the descriptor (for a library that takes one, e.g. gzdopen); the caller closes it.
    int release();

private:
    std::string m_path;
    std::string m_kind;
    int m_fd = -1;
    int64_t m_size = 0;
    int64_t m_maxBytes = 0;
};

// The whole file as text / bytes (InputFile's checks, then readAll).
std::string readFileText(const std::string& path, int64_t maxBytes, const std::string& kind);
std::vector<uint8_t> readFileBytes(const std::string& path, int64_t maxBytes, const std::string& kind);

// A std::istream over an InputFile, for readers that take a file line by line. It stops at the file's limit: a
// file that grew past it since the open reads as if it ended there.
class InputStream : public std::istream {
public:
    InputStream(const std::string& path, int64_t maxBytes, const std::string& kind);
    ~InputStream() override;
    const InputFile& file() const;

private:
    class Buffer;
    std::unique_ptr<Buffer> m_buffer;
};

}  // namespace strata
