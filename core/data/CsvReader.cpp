#include "core/data/CsvReader.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/data/Dataset.h"
#include "core/data/IdxReader.h"

namespace strata::data {

std::vector<CsvRecord> parseCsv(const std::string& text, const std::string& path) {
    std::vector<CsvRecord> records;
    size_t i = 0;
    const size_t n = text.size();
    if (n >= 3 && static_cast<unsigned char>(text[0]) == 0xEF && static_cast<unsigned char>(text[1]) == 0xBB &&
        static_cast<unsigned char>(text[2]) == 0xBF)
        i = 3;
    int64_t line = 1;
    while (i < n) {
        CsvRecord rec;
        rec.line = line;
        std::string field;
        bool endOfRecord = false;
        while (!endOfRecord) {
            field.clear();
            if (i < n && text[i] == '"') {
                const int64_t quoteLine = line;
                ++i;
                for (;;) {
                    if (i >= n)
                        throw DataError::atLine(
                            path, quoteLine,
                            "unterminated quoted field (field " + std::to_string(rec.fields.size() + 1) + ")");
                    char c = text[i++];
                    if (c == '"') {
                        if (i < n && text[i] == '"') {
                            field += '"';
                            ++i;
                        } else {
                            break;
                        }
                    } else {
                        if (c == '\n') ++line;
                        field += c;
                    }
                }
                if (i < n && text[i] != ',' && text[i] != '\n' &&
                    !(text[i] == '\r' && i + 1 < n && text[i + 1] == '\n') && text[i] != '\r')
                    throw DataError::atLine(
                        path, line, "text after the closing quote of field " + std::to_string(rec.fields.size() + 1));
            } else {
                size_t start = i;
                while (i < n && text[i] != ',' && text[i] != '\n' && text[i] != '\r') ++i;
                field.assign(text, start, i - start);
            }
            rec.fields.push_back(std::move(field));  // a long field is not copied
            if (i >= n) {
                endOfRecord = true;
            } else if (text[i] == ',') {
                ++i;
            } else {
                // LF, CRLF or a lone CR ends the record.
                if (text[i] == '\r') ++i;
                if (i < n && text[i] == '\n') ++i;
                ++line;
                endOfRecord = true;
            }
        }
        bool blank = rec.fields.size() == 1 && rec.fields[0].empty();
        if (!blank) records.push_back(std::move(rec));
    }
    return records;
}

std::vector<CsvRecord> readCsvFile(const std::string& path) {
    const std::string text = readDataFile(path, kMaxDataFileBytes, "a CSV file");
    if (text.empty()) throw DataError::atLine(path, 1, "empty file");
    std::vector<CsvRecord> records = parseCsv(text, path);
    if (records.empty()) throw DataError::atLine(path, 1, "empty file (only blank lines)");
    return records;
}

}  // namespace strata::data
