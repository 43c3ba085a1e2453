// TextEncoder: one way from text to ids for training, predict and the workbench.
#include "core/data/TextEncoder.h"

#include <stdexcept>

#include "core/data/Dataset.h"

namespace strata {

TextEncoder::TextEncoder(Tokenizer tokenizer, int maxTokens, const std::vector<std::string>& vocabulary,
                         const std::string& subwordModel)
    : m_tokenizer(tokenizer), m_maxTokens(maxTokens) {
    if (tokenizer == Tokenizer::SentencePiece) {
        if (subwordModel.empty())
            throw std::runtime_error("a sentencepiece text model without its SentencePiece model");
        m_subword = SubwordTokenizer::fromSerialized(subwordModel, "the model's SentencePiece model");
        return;
    }
    if (vocabulary.empty()) throw std::runtime_error("a text model without its vocabulary");
    for (size_t i = 0; i < vocabulary.size(); ++i) m_ids.emplace(vocabulary[i], static_cast<int32_t>(i));
}

TextEncoder::TextEncoder(const SubwordTokenizer& subword, int maxTokens)
    : m_tokenizer(Tokenizer::SentencePiece), m_maxTokens(maxTokens), m_subword(subword) {}

std::vector<std::string> TextEncoder::tokens(const std::string& text) const {
    if (m_tokenizer == Tokenizer::SentencePiece) return m_subword.pieces(text);
    return tokenizeText(text, m_tokenizer);
}

std::vector<int32_t> TextEncoder::ids(const std::string& text) const {
    if (m_tokenizer == Tokenizer::SentencePiece) return m_subword.encode(text);
    std::vector<int32_t> out;
    for (const std::string& t : tokenizeText(text, m_tokenizer)) {
        auto it = m_ids.find(t);
        out.push_back(it == m_ids.end() ? 1 : it->second);
    }
    return out;
}

std::vector<float> TextEncoder::encode(const std::string& text) const {
    std::vector<float> sample(static_cast<size_t>(m_maxTokens), 0.0f);
    if (m_maxTokens < 1) return sample;
    if (m_tokenizer == Tokenizer::SentencePiece) {
        const std::vector<int32_t> first = m_subword.encodeFirst(text, sample.size());
        for (size_t k = 0; k < first.size(); ++k) sample[k] = static_cast<float>(first[k]);
        return sample;
    }
    size_t k = 0;
    forEachToken(text, m_tokenizer, [&](const std::string& t) {
        auto it = m_ids.find(t);
        sample[k++] = static_cast<float>(it == m_ids.end() ? 1 : it->second);
        return k < sample.size();
    });
    return sample;
}

int64_t TextEncoder::countTokens(const std::string& text) const {
    if (m_tokenizer == Tokenizer::SentencePiece) return m_subword.countPieces(text);
    return static_cast<int64_t>(forEachToken(text, m_tokenizer, [](const std::string&) { return true; }));
}

}  // namespace strata
