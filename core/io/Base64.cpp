// Base64 encoding and checked decoding.
#include "core/io/Base64.h"

#include <array>
#include <stdexcept>

namespace strata {

namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace

std::string base64Encode(const std::string& bytes) {
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    size_t i = 0;
    for (; i + 2 < bytes.size(); i += 3) {
        const unsigned v = (static_cast<unsigned char>(bytes[i]) << 16) |
                           (static_cast<unsigned char>(bytes[i + 1]) << 8) | static_cast<unsigned char>(bytes[i + 2]);
        for (int k = 18; k >= 0; k -= 6) out += kAlphabet[(v >> k) & 63];
    }
    if (const size_t rest = bytes.size() - i; rest > 0) {
        unsigned v = static_cast<unsigned char>(bytes[i]) << 16;
        if (rest == 2) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
        out += kAlphabet[(v >> 18) & 63];
        out += kAlphabet[(v >> 12) & 63];
        out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

std::string base64Decode(const std::string& text) {
    std::array<int, 256> value{};
    value.fill(-1);
    for (int k = 0; k < 64; ++k) value[static_cast<unsigned char>(kAlphabet[k])] = k;
    if (text.size() % 4 != 0)
        throw std::invalid_argument("base64: length " + std::to_string(text.size()) + " is not a multiple of 4");
    std::string out;
    out.reserve(text.size() / 4 * 3);
    for (size_t i = 0; i < text.size(); i += 4) {
        unsigned v = 0;
        int pad = 0;
        for (size_t k = 0; k < 4; ++k) {
            const char c = text[i + k];
            const bool last = i + 4 == text.size();
            if (c == '=' && last && k >= 2 && (k == 3 || text[i + 3] == '=')) {
                ++pad;
                v <<= 6;
                continue;
            }
            const int d = value[static_cast<unsigned char>(c)];
            if (d < 0 || pad > 0)
                throw std::invalid_argument("base64: character " + std::to_string(i + k) + " is not base64");
            v = (v << 6) | static_cast<unsigned>(d);
        }
        out += static_cast<char>((v >> 16) & 255);
        if (pad < 2) out += static_cast<char>((v >> 8) & 255);
        if (pad < 1) out += static_cast<char>(v & 255);
    }
    return out;
}

}  // namespace strata
