// Tokenizers for text datasets: UTF-8 code points ("char") or runs of letters
// and digits ("word"), lowercased. Lowercasing covers ASCII, Latin-1,
// Latin Extended-A, basic Greek and Cyrillic: enough for the European word
// lists the examples use, without pulling in an ICU dependency.
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/data/Dataset.h"

namespace strata {

namespace {

// Decodes one code point at s[i] and advances i. Malformed input yields U+FFFD and advances one byte.
uint32_t decodeUtf8(const std::string& s, size_t& i) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
        ++i;
        return b0;
    }
    int len = 0;
    uint32_t cp = 0;
    if ((b0 & 0xE0) == 0xC0) {
        len = 2;
        cp = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
        len = 3;
        cp = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
        len = 4;
        cp = b0 & 0x07;
    } else {
        ++i;
        return 0xFFFD;
    }
    if (i + size_t(len) > s.size()) {
        ++i;
        return 0xFFFD;
    }
    for (int k = 1; k < len; ++k) {
        const auto b = static_cast<unsigned char>(s[i + size_t(k)]);
        if ((b & 0xC0) != 0x80) {
            ++i;
            return 0xFFFD;
        }
        cp = (cp << 6) | (b & 0x3F);
    }
    static const uint32_t minForLen[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < minForLen[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        ++i;
        return 0xFFFD;
    }
    i += size_t(len);
    return cp;
}

void appendUtf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

uint32_t toLower(uint32_t c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c < 0xC0) return c;
    if (c <= 0xDE) return c == 0xD7 ? c : c + 32;
    if (c < 0x100) return c;
    if (c <= 0x17F) {
        // Latin Extended-A pairs upper/lower case in runs whose parity changes.
        if (c == 0x130) return 'i';
        if (c == 0x178) return 0xFF;
        if ((c <= 0x12F) || (c >= 0x132 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) return (c % 2 == 0) ? c + 1 : c;
        if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 1) ? c + 1 : c;
        return c;
    }
    if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;  // Greek
    if (c >= 0x410 && c <= 0x42F) return c + 32;                // Cyrillic
    if (c >= 0x400 && c <= 0x40F) return c + 80;
    return c;
}

// Letters and digits: exact for ASCII and Latin-1; above U+00FF everything but
// punctuation and symbol blocks counts as a letter.
bool isWordChar(uint32_t c) {
    if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (c < 0x100) return c == 0xAA || c == 0xB5 || c == 0xBA || (c >= 0xC0 && c != 0xD7 && c != 0xF7);
    if (c >= 0x2000 && c <= 0x2BFF) return false;  // punctuation, symbols, arrows, box drawing
    if (c >= 0x3000 && c <= 0x303F) return false;  // CJK punctuation
    if (c >= 0xFE00 && c <= 0xFE0F) return false;  // variation selectors
    if (c == 0xFEFF || c == 0xFFFD) return false;
    if (c >= 0x1F000) return false;  // emoji and pictographs
    return true;
}

}  // namespace

size_t forEachToken(const std::string& text, Tokenizer tokenizer, const std::function<bool(const std::string&)>& fn) {
    if (tokenizer == Tokenizer::SentencePiece)
        throw std::invalid_argument("forEachToken: SentencePiece tokenizes through its model (TextEncoder)");
    // One buffer for every token: a long text costs its tokens one at a time, not a string each.
    const bool words = tokenizer == Tokenizer::Word;
    std::string token;
    size_t count = 0, i = 0;
    while (i < text.size()) {
        const uint32_t cp = toLower(decodeUtf8(text, i));
        if (!words) {
            token.clear();
            appendUtf8(token, cp);
            ++count;
            if (!fn(token)) return count;
        } else if (isWordChar(cp)) {
            appendUtf8(token, cp);
        } else if (!token.empty()) {
            ++count;
            if (!fn(token)) return count;
            token.clear();
        }
    }
    if (words && !token.empty()) {
        ++count;
        fn(token);
    }
    return count;
}

std::vector<std::string> tokenizeText(const std::string& text, Tokenizer tokenizer) {
    std::vector<std::string> tokens;
    forEachToken(text, tokenizer, [&](const std::string& t) {
        tokens.push_back(t);
        return true;
    });
    return tokens;
}

}  // namespace strata
