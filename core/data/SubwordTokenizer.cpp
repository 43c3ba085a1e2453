// SubwordTokenizer through libstrata_sentencepiece.so, opened with dlopen(RTLD_LOCAL | RTLD_DEEPBIND): the
// shim's libsentencepiece then binds to its own embedded protobuf, and none of its symbols enter the global
// scope where ONNX's protobuf lives (SentencePieceShim.h). Under AddressSanitizer, which refuses RTLD_DEEPBIND,
// it opens without it, and only in a process that holds no other protobuf (the SentencePiece fuzz target).
#include "core/data/SubwordTokenizer.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <stdexcept>

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include "core/data/sentencepiece_shim/SentencePieceShim.h"
#include "core/io/InputFile.h"
#include "core/io/InputLimits.h"

// AddressSanitizer refuses dlopen's RTLD_DEEPBIND (it would bind the library's malloc past the sanitizer's).
#if defined(__SANITIZE_ADDRESS__)
#define STRATA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STRATA_ASAN 1
#endif
#endif

namespace strata {

namespace {

#ifdef STRATA_ASAN
// The first loaded object whose name holds "libprotobuf" (empty: none).
std::string loadedProtobuf() {
    std::string found;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* out) {
            auto& name = *static_cast<std::string*>(out);
            if (info->dlpi_name && std::string(info->dlpi_name).find("libprotobuf") != std::string::npos)
                name = info->dlpi_name;
            return name.empty() ? 0 : 1;
        },
        &found);
    return found;
}
#endif

struct Shim {
    decltype(&strata_spm_train) train = nullptr;
    decltype(&strata_spm_free_bytes) freeBytes = nullptr;
    decltype(&strata_spm_load) load = nullptr;
    decltype(&strata_spm_destroy) destroy = nullptr;
    decltype(&strata_spm_piece_count) pieceCount = nullptr;
    decltype(&strata_spm_special_id) specialId = nullptr;
    decltype(&strata_spm_piece) piece = nullptr;
    decltype(&strata_spm_score) score = nullptr;
    decltype(&strata_spm_encode) encode = nullptr;
    decltype(&strata_spm_error) error = nullptr;
    std::string problem;  // non-empty: not loaded, and why
};

std::string executableDir() {
    char buf[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n <= 0) return {};
    return std::filesystem::path(std::string(buf, static_cast<size_t>(n))).parent_path().string();
}

const Shim& shim() {
    static Shim s;
    static std::once_flag once;
    std::call_once(once, [] {
        constexpr const char* kName = "libstrata_sentencepiece.so";
        std::vector<std::string> candidates;
        if (const char* env = std::getenv("STRATA_SENTENCEPIECE_SHIM"); env && *env) candidates.emplace_back(env);
        const std::string dir = executableDir();
        if (!dir.empty()) {
            candidates.push_back(dir + "/" + kName);
            candidates.push_back(dir + "/../lib/" + kName);
            candidates.push_back(dir + "/../lib/strata/" + kName);  // installed (the .deb: /usr/lib/strata)
        }
#ifdef STRATA_SENTENCEPIECE_SHIM
        candidates.emplace_back(STRATA_SENTENCEPIECE_SHIM);  // where the build put it
#endif
#ifdef STRATA_ASAN
        // Without RTLD_DEEPBIND, libsentencepiece's embedded protobuf must be the only one in the process (the
        // SentencePiece fuzz target, which links no ONNX): with the system one also loaded, protobuf's version
        // check would end the process.
        constexpr int kFlags = RTLD_NOW | RTLD_LOCAL;
        if (const std::string other = loadedProtobuf(); !other.empty()) {
            s.problem =
                "SentencePiece cannot be used in this sanitizer build: AddressSanitizer refuses "
                "RTLD_DEEPBIND, and without it libsentencepiece's own protobuf would meet " +
                other + " in one process";
            return;
        }
#else
        constexpr int kFlags = RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
#endif
        void* handle = nullptr;
        std::string tried;
        for (const std::string& c : candidates) {
            if (!std::filesystem::exists(c)) {
                tried += (tried.empty() ? "" : ", ") + c;
                continue;
            }
            handle = dlopen(c.c_str(), kFlags);
            if (handle) break;
            tried += (tried.empty() ? "" : ", ") + c + " (" + dlerror() + ")";
        }
        if (!handle) {
            s.problem = "SentencePiece support (" + std::string(kName) + ") was not found; tried " + tried;
            return;
        }
        auto sym = [&](auto& fn, const char* name) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
            if (!fn && s.problem.empty()) s.problem = std::string(kName) + " lacks " + name;
        };
        sym(s.train, "strata_spm_train");
        sym(s.freeBytes, "strata_spm_free_bytes");
        sym(s.load, "strata_spm_load");
        sym(s.destroy, "strata_spm_destroy");
        sym(s.pieceCount, "strata_spm_piece_count");
        sym(s.specialId, "strata_spm_special_id");
        sym(s.piece, "strata_spm_piece");
        sym(s.score, "strata_spm_score");
        sym(s.encode, "strata_spm_encode");
        sym(s.error, "strata_spm_error");
    });
    if (!s.problem.empty()) throw std::runtime_error(s.problem);
    return s;
}

}  // namespace

SubwordTokenizer::SubwordTokenizer() = default;
SubwordTokenizer::~SubwordTokenizer() = default;
SubwordTokenizer::SubwordTokenizer(const SubwordTokenizer&) = default;
SubwordTokenizer& SubwordTokenizer::operator=(const SubwordTokenizer&) = default;

SubwordTokenizer SubwordTokenizer::train(const std::vector<std::string>& texts, int vocabSize) {
    const Shim& sh = shim();
    if (texts.empty()) throw std::runtime_error("SentencePiece: no training texts to learn pieces from");
    const std::string options = "model_type=unigram\nvocab_size=" + std::to_string(vocabSize) +
                                "\npad_id=0\nunk_id=1\nbos_id=-1\neos_id=-1\npad_piece=<pad>\nunk_piece=<unk>\n"
                                "character_coverage=0.9995\n"
                                "hard_vocab_limit=false\n"  // max_vocab is "at most": a small corpus gets fewer pieces
                                "num_threads=1\n"           // the same pieces on every run and every data-parallel rank
                                "input_sentence_size=1000000\nshuffle_input_sentence=false\n"
                                "max_sentence_length=1048576\nminloglevel=2\n";
    std::vector<const char*> ptrs;
    std::vector<size_t> lengths;
    for (const std::string& t : texts) {
        ptrs.push_back(t.data());
        lengths.push_back(t.size());
    }
    char* model = nullptr;
    size_t size = 0;
    if (sh.train(ptrs.data(), lengths.data(), ptrs.size(), options.c_str(), &model, &size) != 0)
        throw std::runtime_error("SentencePiece could not train " + std::to_string(vocabSize) +
                                 " pieces: " + sh.error());
    const std::string bytes(model, size);
    sh.freeBytes(model);
    return fromSerialized(bytes, "the trained SentencePiece model");
}

SubwordTokenizer SubwordTokenizer::fromSerialized(const std::string& bytes, const std::string& origin) {
    const Shim& sh = shim();
    strata_spm* raw = sh.load(bytes.data(), bytes.size());
    if (!raw) throw std::runtime_error(origin + ": not a SentencePiece model (" + sh.error() + ")");
    std::shared_ptr<const strata_spm> sp(
        raw, [destroy = sh.destroy](const strata_spm* p) { destroy(const_cast<strata_spm*>(p)); });
    const int pad = sh.specialId(raw, 'p'), unk = sh.specialId(raw, 'u'), bos = sh.specialId(raw, 'b'),
              eos = sh.specialId(raw, 'e');
    if (sh.pieceCount(raw) < 3 || pad != 0 || unk != 1 || bos >= 0 || eos >= 0)
        throw std::runtime_error(origin + ": a SentencePiece model for Strata has padding id 0 and unknown id 1 and " +
                                 "no begin/end pieces (spm_train --pad_id=0 --unk_id=1 --bos_id=-1 --eos_id=-1); " +
                                 "this one has pad " + std::to_string(pad) + ", unk " + std::to_string(unk) + ", bos " +
                                 std::to_string(bos) + ", eos " + std::to_string(eos));
    SubwordTokenizer t;
    t.m_sp = std::move(sp);
    t.m_bytes = bytes;
    return t;
}

SubwordTokenizer SubwordTokenizer::fromFile(const std::string& path) {
    return fromSerialized(readFileText(path, kMaxTokenizerModelBytes, "a SentencePiece model"), path);
}

std::vector<int32_t> SubwordTokenizer::encode(const std::string& text) const {
    if (!m_sp) return {};
    const Shim& sh = shim();
    std::vector<int32_t> ids(text.size() + 16);  // at most one piece per byte, in practice far fewer
    const int n = sh.encode(m_sp.get(), text.data(), text.size(), ids.data(), static_cast<int>(ids.size()));
    if (n < 0) throw std::runtime_error(std::string("SentencePiece could not encode a text: ") + sh.error());
    if (static_cast<size_t>(n) > ids.size()) {
        ids.resize(static_cast<size_t>(n));
        sh.encode(m_sp.get(), text.data(), text.size(), ids.data(), n);
    }
    ids.resize(static_cast<size_t>(n));
    return ids;
}

namespace {

bool isAsciiSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Where to end a chunk of text that starts at `from` and may be `limit` bytes long: before the last ASCII whitespace
// in its second half, else (a "word" that long) at a UTF-8 character boundary; the end of the text when it is nearer.
size_t chunkEnd(const std::string& text, size_t from, size_t limit) {
    if (text.size() - from <= limit) return text.size();
    const size_t end = from + limit;
    for (size_t p = end; p > from + limit / 2; --p)
        if (isAsciiSpace(text[p])) return p;
    size_t p = end;
    while (p > from + 1 && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) --p;
    return p;
}

}  // namespace

std::vector<int32_t> SubwordTokenizer::encodeFirst(const std::string& text, size_t count) const {
    if (!m_sp || count == 0) return {};
    const Shim& sh = shim();
    std::vector<int32_t> ids(count);
    const size_t want = count + kFirstPiecesMargin;
    // A piece covers at most a few characters: start with 64 bytes an id, and grow when whitespace runs or
    // characters SentencePiece drops made the prefix give too few.
    for (size_t limit = std::max<size_t>(4096, want * 64);; limit *= 4) {
        const size_t end = chunkEnd(text, 0, limit);
        const int n = sh.encode(m_sp.get(), text.data(), end, ids.data(), static_cast<int>(count));
        if (n < 0) throw std::runtime_error(std::string("SentencePiece could not encode a text: ") + sh.error());
        if (end == text.size() || static_cast<size_t>(n) >= want) {
            ids.resize(std::min(count, static_cast<size_t>(n)));
            return ids;
        }
    }
}

int64_t SubwordTokenizer::countPieces(const std::string& text) const {
    if (!m_sp) return 0;
    const Shim& sh = shim();
    int64_t total = 0;
    int32_t unused = 0;
    for (size_t from = 0; from < text.size();) {
        const size_t end = chunkEnd(text, from, kCountChunkBytes);
        const int n = sh.encode(m_sp.get(), text.data() + from, end - from, &unused, 0);
        if (n < 0) throw std::runtime_error(std::string("SentencePiece could not encode a text: ") + sh.error());
        total += n;
        from = end;
    }
    return total;
}

std::vector<std::string> SubwordTokenizer::pieces(const std::string& text) const {
    std::vector<std::string> out;
    if (!m_sp) return out;
    const Shim& sh = shim();
    for (int32_t id : encode(text)) out.emplace_back(sh.piece(m_sp.get(), id));
    return out;
}

std::vector<std::string> SubwordTokenizer::vocabulary() const {
    std::vector<std::string> v;
    if (!m_sp) return v;
    const Shim& sh = shim();
    for (int i = 0; i < sh.pieceCount(m_sp.get()); ++i) v.emplace_back(sh.piece(m_sp.get(), i));
    return v;
}

std::vector<float> SubwordTokenizer::scores() const {
    std::vector<float> v;
    if (!m_sp) return v;
    const Shim& sh = shim();
    for (int i = 0; i < sh.pieceCount(m_sp.get()); ++i) v.push_back(sh.score(m_sp.get(), i));
    return v;
}

}  // namespace strata
