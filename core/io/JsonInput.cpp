#include "core/io/JsonInput.h"

#include <vector>

namespace strata {

namespace {

// One open array or object while scanning: where its current member's key is (objects) or which element
// comes next (arrays), for the pointer of a value that is too deep.
struct Frame {
    bool object = false;
    bool expectKey = false;
    size_t index = 0;
    size_t keyStart = 0, keyLength = 0;
};

// Shown levels of a pointer; the rest is counted, so a 100,000-level path gives a short message.
constexpr size_t kPointerLevelsShown = 12;
constexpr size_t kKeyCharsShown = 40;

std::string pointerOf(std::string_view text, const std::vector<Frame>& stack) {
    std::string out;
    const size_t shown = std::min(stack.size(), kPointerLevelsShown);
    for (size_t i = 0; i < shown; ++i) {
        const Frame& f = stack[i];
        out += '/';
        if (!f.object) {
            out += std::to_string(f.index);
            continue;
        }
        // The key as written (escapes and all), RFC 6901-escaped, cut.
        const std::string_view key = text.substr(f.keyStart, std::min(f.keyLength, kKeyCharsShown));
        for (char c : key) out += c == '~' ? std::string("~0") : c == '/' ? std::string("~1") : std::string(1, c);
        if (f.keyLength > kKeyCharsShown) out += "...";
    }
    if (stack.size() > shown) out += "/... (" + std::to_string(stack.size() - shown) + " more levels)";
    return out;
}

std::string sizeText(int64_t bytes) {
    std::string s = std::to_string(bytes) + " bytes";
    if (bytes >= kMiB && bytes % kMiB == 0) s += " (" + std::to_string(bytes / kMiB) + " MiB)";
    return s;
}

}  // namespace

JsonLimitError::JsonLimitError(const std::string& source, int64_t byte, size_t line, size_t column, std::string pointer,
                               const std::string& problem)
    : FormatError(
          source, byte,
          (line ? "line " + std::to_string(line) + ", column " + std::to_string(column) + ", " : std::string()) +
              (pointer.empty() ? std::string() : "at " + pointer + ": ") + problem),
      m_line(line),
      m_column(column),
      m_pointer(std::move(pointer)),
      m_reason(problem) {}

void checkJsonLimits(std::string_view text, const std::string& source, const JsonLimits& limits) {
    if (static_cast<int64_t>(text.size()) > limits.maxBytes)
        throw JsonLimitError(source, FormatError::kNoOffset, 0, 0, {},
                             "the JSON text is " + sizeText(static_cast<int64_t>(text.size())) + "; the limit is " +
                                 sizeText(limits.maxBytes));
    std::vector<Frame> stack;
    stack.reserve(static_cast<size_t>(std::max(limits.maxDepth, 0)) + 1);
    bool inString = false, inKey = false;
    const size_t n = text.size();
    for (size_t i = 0; i < n; ++i) {
        const char c = text[i];
        if (inString) {
            if (c == '\\') {
                ++i;  // the escaped character, whatever it is, cannot end the string
            } else if (c == '"') {
                inString = false;
                if (inKey) stack.back().keyLength = i - stack.back().keyStart;
                inKey = false;
            }
            continue;
        }
        switch (c) {
            case '"':
                inString = true;
                if (!stack.empty() && stack.back().object && stack.back().expectKey) {
                    inKey = true;
                    stack.back().keyStart = i + 1;
                }
                break;
            case ':':
                if (!stack.empty() && stack.back().object) stack.back().expectKey = false;
                break;
            case ',':
                if (!stack.empty()) {
                    if (stack.back().object)
                        stack.back().expectKey = true;
                    else
                        ++stack.back().index;
                }
                break;
            case '[':
            case '{':
                if (static_cast<int64_t>(stack.size()) >= limits.maxDepth) {
                    size_t line = 1, lineStart = 0;
                    for (size_t k = 0; k < i; ++k)
                        if (text[k] == '\n') {
                            ++line;
                            lineStart = k + 1;
                        }
                    const int64_t byte = limits.baseOffset == FormatError::kNoOffset ? FormatError::kNoOffset
                                                                                     : limits.baseOffset + int64_t(i);
                    throw JsonLimitError(source, byte, line, i - lineStart + 1, pointerOf(text, stack),
                                         "nested deeper than " + std::to_string(limits.maxDepth) +
                                             " levels, the limit for JSON (Strata's files nest under 10)");
                }
                stack.push_back({c == '{', c == '{', 0, 0, 0});
                break;
            case ']':
            case '}':
                if (!stack.empty()) stack.pop_back();
                break;
            default: break;
        }
    }
}

}  // namespace strata
