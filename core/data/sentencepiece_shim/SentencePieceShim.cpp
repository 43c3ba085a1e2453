// libstrata_sentencepiece.so: Debian's libsentencepiece behind a C interface (SentencePieceShim.h says why).
#include "core/data/sentencepiece_shim/SentencePieceShim.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

namespace {

thread_local std::string g_error;

int fail(const std::string& what) {
    g_error = what;
    return 1;
}

class Texts : public sentencepiece::SentenceIterator {
public:
    Texts(const char* const* texts, const size_t* lengths, size_t count)
        : m_texts(texts), m_lengths(lengths), m_count(count) {
        load();
    }
    bool done() const override { return m_next >= m_count; }
    void Next() override {
        ++m_next;
        load();
    }
    const std::string& value() const override { return m_value; }
    sentencepiece::util::Status status() const override { return sentencepiece::util::Status(); }

private:
    void load() {
        if (m_next < m_count) m_value.assign(m_texts[m_next], m_lengths[m_next]);
    }
    const char* const* m_texts;
    const size_t* m_lengths;
    size_t m_count;
    size_t m_next = 0;
    std::string m_value;
};

}  // namespace

struct strata_spm {
    sentencepiece::SentencePieceProcessor sp;
};

extern "C" {

int strata_spm_train(const char* const* texts, const size_t* lengths, size_t count, const char* options, char** model,
                     size_t* modelSize) {
    try {
        std::unordered_map<std::string, std::string> args;
        std::istringstream lines(options ? options : "");
        std::string line;
        while (std::getline(lines, line)) {
            const size_t eq = line.find('=');
            if (eq != std::string::npos) args[line.substr(0, eq)] = line.substr(eq + 1);
        }
        Texts it(texts, lengths, count);
        std::string bytes;
        const sentencepiece::util::Status st = sentencepiece::SentencePieceTrainer::Train(args, &it, &bytes);
        if (!st.ok()) return fail(st.ToString());
        *model = static_cast<char*>(std::malloc(bytes.size()));
        if (!*model) return fail("out of memory");
        std::memcpy(*model, bytes.data(), bytes.size());
        *modelSize = bytes.size();
        return 0;
    } catch (const std::exception& e) {
        return fail(e.what());
    }
}

void strata_spm_free_bytes(char* bytes) { std::free(bytes); }

strata_spm* strata_spm_load(const char* model, size_t size) {
    try {
        // Owned until returned: the loader can throw as well as fail (darts' "failed to insert key: zero-length
        // key" for a model with an empty piece), and the processor must not leak either way (the fuzz target's
        // finding).
        auto s = std::make_unique<strata_spm>();
        const sentencepiece::util::Status st = s->sp.LoadFromSerializedProto(std::string(model, size));
        if (!st.ok()) {
            fail(st.ToString());
            return nullptr;
        }
        return s.release();
    } catch (const std::exception& e) {
        fail(e.what());
        return nullptr;
    }
}

void strata_spm_destroy(strata_spm* spm) { delete spm; }

int strata_spm_piece_count(const strata_spm* spm) { return spm->sp.GetPieceSize(); }

int strata_spm_special_id(const strata_spm* spm, char which) {
    switch (which) {
        case 'p': return spm->sp.pad_id();
        case 'u': return spm->sp.unk_id();
        case 'b': return spm->sp.bos_id();
        case 'e': return spm->sp.eos_id();
        default: return -1;
    }
}

const char* strata_spm_piece(const strata_spm* spm, int id) { return spm->sp.IdToPiece(id).c_str(); }

float strata_spm_score(const strata_spm* spm, int id) { return spm->sp.GetScore(id); }

int strata_spm_encode(const strata_spm* spm, const char* text, size_t length, int32_t* ids, int capacity) {
    try {
        std::vector<int> out;
        const sentencepiece::util::Status st = spm->sp.Encode(std::string(text, length), &out);
        if (!st.ok()) {
            fail(st.ToString());
            return -1;
        }
        for (size_t i = 0; i < out.size() && static_cast<int>(i) < capacity; ++i) ids[i] = out[i];
        return static_cast<int>(out.size());
    } catch (const std::exception& e) {
        fail(e.what());
        return -1;
    }
}

const char* strata_spm_error(void) { return g_error.c_str(); }

}  // extern "C"
