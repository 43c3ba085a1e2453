// TextEncoder: a text as a text model's input, exactly as training made it: the project's tokenizer
// (characters, words, or SentencePiece pieces) and the model's vocabulary (id 0 padding, 1 unknown), cut to
// max_tokens and padded with 0; tokens past max_tokens are never made. Training (TextDataset.cpp), `predict`, and the
// Predict dock all go through it.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/data/SubwordTokenizer.h"
#include "core/graph/Settings.h"

namespace strata {

class TextEncoder {
public:
    // sentencepiece: `subwordModel` is the serialized SentencePiece model (the vocabulary is its pieces);
    // char and word: the vocabulary maps tokens to ids. Throws std::runtime_error for a sentencepiece encoder
    // without a model, or a char/word one without a vocabulary.
    TextEncoder(Tokenizer tokenizer, int maxTokens, const std::vector<std::string>& vocabulary,
                const std::string& subwordModel);
    explicit TextEncoder(const SubwordTokenizer& subword, int maxTokens);

    // The text's tokens (characters, words or pieces), all of them, and their ids (1 where unknown).
    std::vector<std::string> tokens(const std::string& text) const;
    std::vector<int32_t> ids(const std::string& text) const;
    // The model input: maxTokens ids as floats, cut or padded with 0. Only the first maxTokens tokens are made,
    // so a text of any length costs memory in proportion to maxTokens, not to its length.
    std::vector<float> encode(const std::string& text) const;
    // How many tokens the whole text has (before the cut to maxTokens), without holding them.
    int64_t countTokens(const std::string& text) const;
    int maxTokens() const { return m_maxTokens; }

private:
    Tokenizer m_tokenizer;
    int m_maxTokens;
    std::unordered_map<std::string, int32_t> m_ids;
    SubwordTokenizer m_subword;
};

}  // namespace strata
