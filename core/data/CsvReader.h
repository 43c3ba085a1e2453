// CsvReader: RFC 4180 comma-separated values. Fields may be quoted; inside
// quotes a doubled quote is a quote, and commas and line breaks are text.
// Lines end with LF or CRLF. Blank lines are skipped; a UTF-8 byte-order mark
// at the start is dropped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::data {

struct CsvRecord {
    int64_t line = 0;  // 1-based line where the record starts
    std::vector<std::string> fields;
};

// `path` only names the file in errors. Throws DataError (unterminated quote,
// text after a closing quote).
std::vector<CsvRecord> parseCsv(const std::string& text, const std::string& path);

// Reads and parses a file. Throws DataError (cannot open, empty file, parse errors).
std::vector<CsvRecord> readCsvFile(const std::string& path);

}  // namespace strata::data
