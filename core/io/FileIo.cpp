#include "core/io/FileIo.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "core/io/FormatError.h"
#include "core/io/InputFile.h"

namespace strata {

std::vector<uint8_t> readWholeFile(const std::string& path, int64_t maxBytes, const std::string& kind) {
    InputFile in(path, maxBytes, kind);
    std::vector<uint8_t> bytes(static_cast<size_t>(in.size()));
    bytes.resize(in.read(bytes.data(), bytes.size()));
    return bytes;
}

void writeFileAtomically(const std::string& path, const std::function<void(std::ostream&)>& write) {
    const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw std::runtime_error("cannot open " + tmp + " for writing");
        write(out);
        out.flush();
        if (!out) {
            out.close();
            std::remove(tmp.c_str());
            throw std::runtime_error("write failed: " + tmp);
        }
    }
    // The data reaches the disk before the rename makes it visible, and the rename itself before we return:
    // a crash or power loss leaves either the old file or the whole new one, never a torn file under `path`.
    if (!syncPath(tmp, false)) {
        std::remove(tmp.c_str());
        throw std::runtime_error("cannot flush " + tmp + " to disk");
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        std::remove(tmp.c_str());
        throw std::runtime_error("cannot rename " + tmp + " to " + path + ": " + ec.message());
    }
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    syncPath(parent.empty() ? std::string(".") : parent.string(), true);
}

bool syncPath(const std::string& path, bool directory) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
    if (fd < 0) return false;
    const bool ok = ::fsync(fd) == 0;
    ::close(fd);
    return ok;
}

bool isTemporaryFileName(const std::string& name) {
    const size_t at = name.rfind(".tmp-");
    if (at == std::string::npos || at == 0 || at + 5 == name.size()) return false;
    for (size_t i = at + 5; i < name.size(); ++i)
        if (name[i] < '0' || name[i] > '9') return false;
    return true;
}

int removeOrphanedTemporaryFiles(const std::string& folder) {
    std::error_code ec;
    int removed = 0;
    for (const auto& e : std::filesystem::directory_iterator(folder, ec)) {
        const std::string name = e.path().filename().string();
        if (!isTemporaryFileName(name) || !e.is_regular_file(ec)) continue;
        const long pid = std::strtol(name.c_str() + name.rfind(".tmp-") + 5, nullptr, 10);
        // A writer still alive (another run on the same folder) keeps its file.
        if (pid > 0 && pid != ::getpid() && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM)) continue;
        if (std::filesystem::remove(e.path(), ec)) ++removed;
    }
    return removed;
}

}  // namespace strata
