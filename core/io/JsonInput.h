// Reading JSON that comes from outside (files, metadata inside model files, the run history, the clipboard)
// within kMaxJsonDepth levels and kMaxJsonBytes (InputLimits.h). nlohmann's parser is iterative, but copying
// a parsed value recurses once per level: 100,000 nested arrays (a 200 KB file) overflow the stack in the
// first copy. The limits are checked on the text, before nlohmann builds anything, so no recursive walk ever
// sees a value deeper than the limit. Every JSON parse in Strata goes through parseJson or tryParseJson.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/io/FormatError.h"
#include "core/io/InputLimits.h"

namespace strata {

struct JsonLimits {
    int maxDepth = kMaxJsonDepth;
    int64_t maxBytes = kMaxJsonBytes;
    // Where the text starts in its file (a safetensors header: 8), for the byte in messages; kNoOffset for text
    // that is not a file's own bytes (metadata strings, the run history), whose messages give no byte.
    int64_t baseOffset = FormatError::kNoOffset;
};

// Text over a limit: names the source (FormatError::file()), the byte, the line and column, the JSON pointer
// of the value that is too deep (its first levels), and the limit.
class JsonLimitError : public FormatError {
public:
    JsonLimitError(const std::string& source, int64_t byte, size_t line, size_t column, std::string pointer,
                   const std::string& problem);
    size_t line() const { return m_line; }      // 1-based
    size_t column() const { return m_column; }  // 1-based
    // JSON pointer (RFC 6901) of the value that is too deep, e.g. "/graph/nodes/0/params/units/0/0/0/...";
    // empty for a text that is too long.
    const std::string& pointer() const { return m_pointer; }
    // The problem without the position: "nested deeper than 256 levels (the limit for JSON)".
    const std::string& reason() const { return m_reason; }

private:
    size_t m_line, m_column;
    std::string m_pointer;
    std::string m_reason;
};

// Throws JsonLimitError when `text` is longer than limits.maxBytes or nests arrays and objects deeper than
// limits.maxDepth. One pass over the text, no allocation beyond the nesting stack (at most maxDepth frames).
// Says nothing about whether the text is valid JSON.
void checkJsonLimits(std::string_view text, const std::string& source, const JsonLimits& limits = {});

// checkJsonLimits, then nlohmann's parse: its parse_error and other exceptions pass through unchanged.
// J is nlohmann::json or nlohmann::ordered_json.
template <class J>
J parseJson(std::string_view text, const std::string& source, const JsonLimits& limits = {}) {
    checkJsonLimits(text, source, limits);
    return J::parse(text);
}

// The same without exceptions: a discarded value (is_discarded()) for text over a limit or invalid JSON.
template <class J>
J tryParseJson(std::string_view text, const JsonLimits& limits = {}) {
    try {
        checkJsonLimits(text, {}, limits);
    } catch (const JsonLimitError&) {
        return J(J::value_t::discarded);
    }
    return J::parse(text, nullptr, false);
}

}  // namespace strata
