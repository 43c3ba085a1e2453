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
#include "core/io/InputLimits.h"

namespace strata {

std::vector<uint8_t> readWholeFile(const std::string& path) {
    requireRegularFile(path);
    std::ifstream in(path, std::ios::binary);
    if (!in) throw FormatError(path, "cannot open file for reading");
    in.seekg(0, std::ios::end);
    const std::streamoff size = in.tellg();
    if (size < 0) throw FormatError(path, "cannot determine the file size");
    in.seekg(0, std::ios::beg);
    std::vector<uint8_t> bytes(static_cast<size_t>(size));
    if (size > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), size)) throw FormatError(path, "read failed");
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
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        std::remove(tmp.c_str());
        throw std::runtime_error("cannot rename " + tmp + " to " + path + ": " + ec.message());
    }
}

}  // namespace strata
