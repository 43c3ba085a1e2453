#include "tests/support/TestFiles.h"

#include <QString>
#include <QtTest>
#include <fstream>
#include <iterator>

namespace strata::test {

std::vector<uint8_t> readBytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void writeBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

FormatError expectFormatError(const std::function<void()>& read, const std::string& file, const std::string& needle) {
    auto fail = [](const std::string& what) {
        QTest::qFail(qPrintable(QString::fromStdString(what)), __FILE__, __LINE__);
    };
    try {
        read();
    } catch (const FormatError& e) {
        const std::string msg = e.what();
        if (msg.find(needle) == std::string::npos || msg.find(file) == std::string::npos)
            fail("FormatError '" + msg + "' lacks '" + needle + "' or the file name");
        return e;
    } catch (const std::exception& e) {
        fail("not a FormatError: " + std::string(e.what()));
        return FormatError(file, "");
    }
    fail("no FormatError for " + file + " (expected '" + needle + "')");
    return FormatError(file, "");
}

}  // namespace strata::test
