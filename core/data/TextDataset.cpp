// TextDataset: the text loader. "label,text" rows (an optional header row is skipped), tokenized by char or
// word (the vocabulary from the training split only) or by SentencePiece (a model trained on the training split,
// or read from tokenizer_model), padded or cut to max_tokens: the inputs are token ids.
#include <algorithm>
#include <memory>
#include <optional>
#include <unordered_map>

#include "core/data/CsvReader.h"
#include "core/data/DatasetLoader.h"
#include "core/data/SubwordTokenizer.h"
#include "core/data/TextEncoder.h"

namespace strata::data {

namespace {

struct TextRows {
    std::vector<std::string> texts;
    std::vector<LabelText> labels;
    std::string warning;  // invalid UTF-8: how many lines, the first one
    std::string column;   // the text column as errors name it: "column 'text'", or "column 2" without a header
};

// Strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool validUtf8(const std::string& text) {
    size_t i = 0;
    while (i < text.size()) {
        const auto b = static_cast<unsigned char>(text[i]);
        int len = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
        if (len == 0 || i + static_cast<size_t>(len) > text.size()) return false;
        uint32_t cp = len == 1 ? b : b & (0x7F >> len);
        for (int k = 1; k < len; ++k) {
            const auto c = static_cast<unsigned char>(text[i + static_cast<size_t>(k)]);
            if ((c & 0xC0) != 0x80) return false;
            cp = cp << 6 | (c & 0x3F);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += static_cast<size_t>(len);
    }
    return true;
}

TextRows readTextRows(const std::string& path, const std::string& labelColumn) {
    std::vector<CsvRecord> records = readCsvFile(path);
    TextRows rows;
    int64_t invalid = 0;
    size_t first = 0;
    const auto& head = records[0].fields;
    if (head.size() == 2 && (lower(trim(head[0])) == "label" || trim(head[0]) == labelColumn) &&
        lower(trim(head[1])) == "text")
        first = 1;
    rows.column = first == 1 ? "column '" + trim(head[1]) + "'" : std::string("column 2 (the text)");
    for (size_t r = first; r < records.size(); ++r) {
        CsvRecord& rec = records[r];
        if (rec.fields.size() != 2)
            throw DataError::atLine(
                path, rec.line,
                fieldCount(rec.fields.size()) + ", expected 2 (label,text; quote text that contains commas)");
        rows.labels.push_back({path, rec.line, trim(rec.fields[0])});
        rows.texts.push_back(std::move(rec.fields[1]));  // moved: a long text is held once, not twice
        if (!validUtf8(rows.texts.back())) {
            if (rows.warning.empty()) rows.warning = "line " + std::to_string(rec.line);
            ++invalid;
        }
    }
    if (invalid > 0)
        rows.warning = "warning: " + fileName(path) + ": " + std::to_string(invalid) +
                       " line(s) hold invalid UTF-8, read as U+FFFD (first: " + rows.warning + ")";
    if (rows.texts.empty()) throw DataError::atLine(path, records[0].line + 1, "no data rows after the header");
    return rows;
}

TextRows gatherText(const TextRows& src, const std::vector<int64_t>& rows) {
    TextRows out;
    out.column = src.column;
    for (int64_t r : rows) {
        out.texts.push_back(src.texts[static_cast<size_t>(r)]);
        out.labels.push_back(src.labels[static_cast<size_t>(r)]);
    }
    return out;
}

// True for a text SentencePiece's normalization (nmt_nfkc) leaves empty: nothing but whitespace (ASCII, no-break and
// the Unicode spaces), control characters, zero-width characters, its own space mark U+2581, and bytes that are not
// UTF-8 (read as U+FFFD, which it turns into a space). Erring towards "blank" is safe, as only a split whose every
// text is blank is refused; the other way is not: libsentencepiece 0.1.97 ends the process (a failed CHECK,
// "required_chars_.empty()") when its normalization leaves no character at all.
bool blankText(const std::string& text) {
    size_t i = 0;
    while (i < text.size()) {
        const auto b = static_cast<unsigned char>(text[i]);
        if (b <= 0x20 || b == 0x7f) {
            ++i;
            continue;
        }
        if (b < 0x80) return false;
        const int len = (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
        bool valid = len > 0 && i + static_cast<size_t>(len) <= text.size();
        uint32_t cp = b & (0x7F >> len);
        for (int k = 1; valid && k < len; ++k) {
            const auto c = static_cast<unsigned char>(text[i + static_cast<size_t>(k)]);
            valid = (c & 0xC0) == 0x80;
            cp = cp << 6 | (c & 0x3F);
        }
        if (!valid) {  // U+FFFD to SentencePiece
            ++i;
            continue;
        }
        const bool blank = (cp >= 0x80 && cp <= 0xA0) || cp == 0xAD || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) ||
                           (cp >= 0x2028 && cp <= 0x202F) || (cp >= 0x205F && cp <= 0x206F) || cp == 0x2581 ||
                           cp == 0x3000 || cp == 0xFEFF || cp == 0xFFFD;
        if (!blank) return false;
        i += static_cast<size_t>(len);
    }
    return true;
}

// A training split whose every text is empty leaves nothing to learn a vocabulary (or pieces) from, and a model
// that would see padding only: said before SentencePiece is asked (whose own words are "Internal:
// trainer_interface.cc(428)").
[[noreturn]] void noTextToLearn(const std::string& trainPath, const TextRows& train, const std::string& what) {
    throw DataError::inFile(trainPath, train.column + ": every one of the " + std::to_string(train.texts.size()) +
                                           " training texts " + what +
                                           ": there is nothing to learn a vocabulary from (is the text in the second "
                                           "column, label,text?)");
}

}  // namespace

DatasetBundle loadTextDataset(const DatasetSettings& s, const std::string& projectPath, Streaming /*streaming*/) {
    if (s.trainPath.empty()) throw DataError("dataset.train_path is empty (text datasets need a training file)");
    if (s.maxTokens < 1)
        throw DataError("dataset.max_tokens: " + std::to_string(s.maxTokens) + " (must be at least 1)");
    if (s.maxVocab < 3)
        throw DataError("dataset.max_vocab: " + std::to_string(s.maxVocab) +
                        " (must be at least 3: padding, unknown and one token)");
    if (s.normalization == NormalizationMode::Standardize)
        throw DataError("dataset.normalization: text inputs are token ids; use none (standardize does not apply)");

    const std::string trainPath = resolveDatasetPath(projectPath, s.trainPath);
    TextRows train = readTextRows(trainPath, s.labelColumn);
    std::string warnings = train.warning.empty() ? "" : "\n" + train.warning;
    const bool multiLabel = s.task == TaskKind::MultiLabel;
    // Multi-label rows list their labels in the label column; the classes are then never mapped.
    std::optional<LabelMapper> mapper;
    if (!multiLabel) mapper.emplace(train.labels, s.classNames);
    TextRows validation;
    const bool haveValidation = !s.validationPath.empty();
    if (haveValidation) {
        validation = readTextRows(resolveDatasetPath(projectPath, s.validationPath), s.labelColumn);
        if (!validation.warning.empty()) warnings += "\n" + validation.warning;
    } else if (s.validationSplit > 0.0) {
        auto [trainRows, valRows] = holdOut(static_cast<int64_t>(train.texts.size()), s.validationSplit);
        validation = gatherText(train, valRows);
        train = gatherText(train, trainRows);
    }
    checkSplitFraction(s.validationSplit);
    if (s.trainLimit > 0 && s.trainLimit < static_cast<int64_t>(train.texts.size()))
        train = gatherText(train, firstRows(static_cast<int64_t>(train.texts.size()), s.trainLimit));
    if (s.validationLimit > 0 && s.validationLimit < static_cast<int64_t>(validation.texts.size()))
        validation =
            gatherText(validation, firstRows(static_cast<int64_t>(validation.texts.size()), s.validationLimit));

    // Vocabulary from the training split only, so validation measures unseen text honestly. No text is held as a
    // list of tokens: the vocabulary counts them one at a time, and encoding makes only the first max_tokens.
    DatasetBundle b;
    std::unique_ptr<TextEncoder> encoder;
    if (s.tokenizer == Tokenizer::SentencePiece) {
        if (s.tokenizerModel.empty() && std::all_of(train.texts.begin(), train.texts.end(), blankText))
            noTextToLearn(trainPath, train, "is empty or only whitespace and control characters");
        SubwordTokenizer subword;
        try {
            subword = s.tokenizerModel.empty()
                          ? SubwordTokenizer::train(train.texts, s.maxVocab)
                          : SubwordTokenizer::fromFile(resolveDatasetPath(projectPath, s.tokenizerModel));
        } catch (const std::runtime_error& e) {
            throw DataError((s.tokenizerModel.empty() ? "dataset.max_vocab: " : "dataset.tokenizer_model: ") +
                            std::string(e.what()) +
                            (s.tokenizerModel.empty() ? " (fewer pieces, or more training text, may do)" : ""));
        }
        b.vocabulary = subword.vocabulary();
        b.tokenizerModel = subword.serialized();
        encoder = std::make_unique<TextEncoder>(subword, s.maxTokens);
        b.textLengths.reserve(train.texts.size());
        for (const std::string& t : train.texts) b.textLengths.push_back(encoder->countTokens(t));
    } else {
        std::unordered_map<std::string, int64_t> counts;
        b.textLengths.reserve(train.texts.size());
        for (const std::string& t : train.texts)
            b.textLengths.push_back(static_cast<int64_t>(forEachToken(t, s.tokenizer, [&](const std::string& tok) {
                ++counts[tok];
                return true;
            })));
        if (counts.empty())
            noTextToLearn(trainPath, train,
                          s.tokenizer == Tokenizer::Word ? "holds no word (letters or digits)" : "is empty");
        std::vector<std::pair<std::string, int64_t>> byCount(counts.begin(), counts.end());
        std::sort(byCount.begin(), byCount.end(), [](const auto& a, const auto& c) {
            return a.second != c.second ? a.second > c.second : a.first < c.first;
        });
        b.vocabulary = {"<pad>", "<unk>"};
        for (const auto& [tok, n] : byCount) {
            if (static_cast<int>(b.vocabulary.size()) >= s.maxVocab) break;
            b.vocabulary.push_back(tok);
        }
        encoder = std::make_unique<TextEncoder>(s.tokenizer, s.maxTokens, b.vocabulary, std::string());
    }

    MultiLabelTargets multi;
    if (multiLabel) multi = multiLabelTargets(train.labels, validation.labels, s.labelSeparator, s.classNames);
    auto encode = [&](const TextRows& rows, std::vector<float>* targets) {
        DataSplit split;
        split.sampleShape = Shape{s.maxTokens};
        split.count = static_cast<int64_t>(rows.texts.size());
        split.inputs.reserve(static_cast<size_t>(split.count) * static_cast<size_t>(s.maxTokens));
        split.labels.reserve(rows.texts.size());
        for (size_t r = 0; r < rows.texts.size(); ++r) {
            split.labels.push_back(mapper ? mapper->map(rows.labels[r]) : 0);
            const std::vector<float> ids = encoder->encode(rows.texts[r]);
            split.inputs.insert(split.inputs.end(), ids.begin(), ids.end());
        }
        if (targets) {
            split.targetShape = Shape{static_cast<int64_t>(multi.names.size())};
            split.targets = std::move(*targets);
        }
        return split;
    };
    b.train = encode(train, multiLabel ? &multi.train : nullptr);
    b.validation = encode(validation, multiLabel ? &multi.validation : nullptr);
    int64_t cut = 0, longest = 0;
    for (const int64_t length : b.textLengths) {
        cut += length > s.maxTokens ? 1 : 0;
        longest = std::max(longest, length);
    }
    const auto texts = static_cast<int64_t>(b.textLengths.size());
    if (texts > 0 && cut * 10 > texts)
        warnings += "\nwarning: " + std::to_string(cut) + " of " + std::to_string(texts) + " training texts (" +
                    std::to_string(cut * 100 / texts) + "%) have more than max_tokens " + std::to_string(s.maxTokens) +
                    " tokens and are cut (the longest has " + std::to_string(longest) +
                    "); a larger max_tokens keeps more of them";
    b.classNames = mapper ? mapper->names() : multi.names;
    b.numClasses = static_cast<int>(b.classNames.size());
    b.normalization.mode = "none";  // token ids go to an Embedding untouched
    b.description = "Text " + fileName(trainPath) + " (" + settingName(s.tokenizer) + ", " +
                    std::to_string(s.maxTokens) +
                    " tokens): " + splitCounts(b.train.count, b.validation.count, b.numClasses) + ", vocabulary " +
                    std::to_string(b.vocabulary.size()) + warnings;
    return b;
}

}  // namespace strata::data
