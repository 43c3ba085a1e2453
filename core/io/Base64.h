// Base64 (RFC 4648, with padding): binary blobs (a SentencePiece model) inside text metadata -- checkpoint
// JSON, safetensors and ONNX metadata, GGUF strings.
#pragma once

#include <string>

namespace strata {

std::string base64Encode(const std::string& bytes);
// Throws std::invalid_argument naming the first character that is not base64, or a bad length.
std::string base64Decode(const std::string& text);

}  // namespace strata
