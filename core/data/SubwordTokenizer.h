// SubwordTokenizer: SentencePiece (the unigram language model of Kudo 2018, Debian's libsentencepiece) behind a
// small interface. libsentencepiece is reached only through libstrata_sentencepiece.so
// (sentencepiece_shim/SentencePieceShim.h: it carries a protobuf that collides with the one ONNX needs), loaded
// on first use from beside the executable (or $STRATA_SENTENCEPIECE_SHIM). Ids follow Strata's text convention:
// 0 is padding ("<pad>"), 1 unknown ("<unk>"), no begin/end-of-sentence pieces; a model trained elsewhere
// must use the same ids (spm_train --pad_id=0 --unk_id=1 --bos_id=-1 --eos_id=-1).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct strata_spm;

namespace strata {

class SubwordTokenizer {
public:
    // Trains a unigram model of `vocabSize` pieces (padding and unknown included) on `texts`, deterministically
    // (one thread). Throws std::runtime_error with SentencePiece's reason (too many pieces for the texts, ...).
    static SubwordTokenizer train(const std::vector<std::string>& texts, int vocabSize);
    // A model from its serialized proto (a .model file's bytes); `origin` names it in errors.
    static SubwordTokenizer fromSerialized(const std::string& bytes, const std::string& origin);
    static SubwordTokenizer fromFile(const std::string& path);

    SubwordTokenizer();
    ~SubwordTokenizer();
    SubwordTokenizer(const SubwordTokenizer&);
    SubwordTokenizer& operator=(const SubwordTokenizer&);

    bool loaded() const { return m_sp != nullptr; }
    // The ids of a text, all of them (the caller cuts to max_tokens); unknown characters give 1.
    std::vector<int32_t> encode(const std::string& text) const;
    // The first `count` ids of a text (fewer when it has fewer), found by encoding a prefix cut at whitespace that
    // holds them and kFirstPiecesMargin more: SentencePiece's pieces do not span whitespace, so they are the first
    // ids of the whole text, while memory follows the prefix (SentencePiece's lattice takes ~200 bytes a byte of
    // text: a 10 MB text encoded whole needs over 2 GB).
    std::vector<int32_t> encodeFirst(const std::string& text, size_t count) const;
    // How many ids encode() would give, counted over chunks of kCountChunkBytes cut at whitespace, so memory stays
    // bounded whatever the text's length.
    int64_t countPieces(const std::string& text) const;
    static constexpr size_t kFirstPiecesMargin = 16;
    static constexpr size_t kCountChunkBytes = size_t{1} << 16;
    // The pieces of a text, as encode splits it ("▁word" marks a piece that starts a word).
    std::vector<std::string> pieces(const std::string& text) const;
    // Every piece by id, and its score (the unigram log probability; 0 for padding and unknown).
    std::vector<std::string> vocabulary() const;
    std::vector<float> scores() const;
    // The model's serialized proto (what checkpoints and exports keep).
    const std::string& serialized() const { return m_bytes; }

private:
    std::shared_ptr<const strata_spm> m_sp;
    std::string m_bytes;
};

}  // namespace strata
