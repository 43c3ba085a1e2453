/* The C interface of libstrata_sentencepiece.so, the one object that links Debian's libsentencepiece.
 *
 * Why a separate object: libsentencepiece carries its own copy of protobuf 3.14 and exports it, while the
 * ONNX export needs the system protobuf 3.21; in one symbol scope the two collide (protobuf's version check
 * aborts the process). SubwordTokenizer.cpp loads this object with dlopen(RTLD_LOCAL | RTLD_DEEPBIND), so
 * libsentencepiece binds to its own protobuf and nothing of it reaches the global scope. Only C types cross.
 * Every function returns 0 on success, else an error whose text strata_spm_error() gives (thread-local). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct strata_spm strata_spm;

/* Trains a unigram model on `count` texts (texts[i] of lengths[i] bytes) with the key=value options of
 * `options` ("vocab_size=8000\npad_id=0\n..."), and returns its serialized proto (free with strata_spm_free_bytes). */
int strata_spm_train(const char* const* texts, const size_t* lengths, size_t count, const char* options, char** model,
                     size_t* modelSize);
void strata_spm_free_bytes(char* bytes);
/* A processor from a serialized model; NULL on error. */
strata_spm* strata_spm_load(const char* model, size_t size);
void strata_spm_destroy(strata_spm* spm);
/* Pieces; ids 0 padding etc. as the model says (-1 where there is none). */
int strata_spm_piece_count(const strata_spm* spm);
int strata_spm_special_id(const strata_spm* spm, char which); /* 'p' pad, 'u' unk, 'b' bos, 'e' eos */
const char* strata_spm_piece(const strata_spm* spm, int id);
float strata_spm_score(const strata_spm* spm, int id);
/* Encodes a text: at most `capacity` ids are written, the total count is returned (-1 on error). */
int strata_spm_encode(const strata_spm* spm, const char* text, size_t length, int32_t* ids, int capacity);
const char* strata_spm_error(void);

#ifdef __cplusplus
}
#endif
