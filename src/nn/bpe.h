// A byte-level BPE tokenizer: GPT-2's scheme, as used by GPT-2, GPT-NeoX and
// the Mamba checkpoints.
//
// Encoding a text:
//   1. Added tokens (Hugging Face tokenizer.json only): the text is split at
//      every occurrence of an added token's content (leftmost first, the
//      longest at a position), and each occurrence becomes that token's id.
//   2. Pre-tokenizing: each piece between added tokens is cut into words by
//      GPT-2's pattern, tried in this order at each position:
//        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//      \p{L} and \p{N} are Unicode's letter and number categories
//      (unicode_tables.h, generated from the Unicode data);
//      \s is JavaScript's white space (U+0009-000D, U+0020, U+00A0, U+1680,
//      U+2000-200A, U+2028, U+2029, U+202F, U+205F, U+3000, U+FEFF), as the
//      `gpt-3-encoder` package has it. A byte that is not part of valid
//      UTF-8 counts as one character of the third class ([^\s\p{L}\p{N}]),
//      so any bytes at all are encoded, and decoded back unchanged.
//   3. Each word's bytes start as one token per byte (GPT-2's byte-to-unicode
//      map names the 256 byte tokens: printable Latin-1 bytes stand for
//      themselves, the other 68 for U+0100..U+0143); then the adjacent pair
//      with the lowest merge rank is merged, repeatedly, leftmost first among
//      equal ranks, until no adjacent pair has a merge. A cache remembers the
//      tokens of words seen before.
// Decoding concatenates each token's bytes (an added token's content as it is).
//
// Files:
//   GPT-2:  encoder.json  {"token": id, ...} with tokens in the byte-to-unicode
//                         alphabet; vocab.bpe  one merge "a b" per line, in rank
//                         order, after a first line "#version: ...".
//   Hugging Face tokenizer.json with "model": {"type": "BPE", "vocab": {...},
//           "merges": ["a b", ...] or [["a", "b"], ...]}, a ByteLevel
//           pre-tokenizer (add_prefix_space false), normalizer null or NFC,
//           decoder null or ByteLevel, post_processor null or ByteLevel, and
//           "added_tokens". What gradkern does not implement is refused with a
//           message naming the field: another model type, normalizer or
//           pre-tokenizer, add_prefix_space true, BPE dropout, byte fallback, ignore_merges, subword
//           prefixes or suffixes, added tokens with lstrip, rstrip or
//           single_word. With an NFC normalizer the text is put in
//           Unicode's normalization form C before it is encoded (text that
//           Unicode's quick check finds certainly in NFC as it is; any other
//           through decomposition, canonical ordering and composition).
//
// A tokenizer is not safe to use from several threads at once (the cache).
#ifndef GK_NN_BPE_H
#define GK_NN_BPE_H

#include "fileio.h"
#include "nn.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct gk_bpe gk_bpe;

// `path` a directory: its encoder.json and vocab.bpe (GPT-2's files);
// otherwise a Hugging Face tokenizer.json.
gk_status gk_bpe_load(const char *path, gk_bpe **out);
gk_status gk_bpe_load_gpt2(const char *encoder_json, const char *vocab_bpe, gk_bpe **out);
gk_status gk_bpe_load_hf(const char *tokenizer_json, gk_bpe **out);
// tokenizer.json's contents from memory; `what` names them in messages.
gk_status gk_bpe_parse_hf(const void *json, size_t size, const char *what, gk_bpe **out);
void gk_bpe_free(gk_bpe *t);

// One more than the largest token id.
int32_t gk_bpe_vocab_size(const gk_bpe *t);
// A CRC-32 of everything that decides the encoding (every token's bytes, the
// merges by rank, the added tokens, the normalizer): tokenizers with equal
// fingerprints encode alike, wherever their files are.
uint32_t gk_bpe_fingerprint(const gk_bpe *t);
// "GPT-2 files, 50257 tokens, 50000 merges" or "tokenizer.json, ..., 2 added tokens".
const char *gk_bpe_describe(const gk_bpe *t);

// A growable array of token ids (zero-initialise; gk_bpe_ids_free frees it).
typedef struct gk_bpe_ids {
  int32_t *data;
  size_t len, cap;
} gk_bpe_ids;
void gk_bpe_ids_free(gk_bpe_ids *ids);

// Encode text[0, n), appending the ids to `out`. With final == 0 more text
// follows: encoding stops before a word (or added token) that the following
// text could still change, and *consumed says how many bytes were encoded
// (the caller keeps the rest and passes it again with more text after it).
// With final == 1 everything is encoded (*consumed = n). Errors: a byte with
// no token in the vocabulary.
gk_status gk_bpe_encode(gk_bpe *t, const void *text, size_t n, int final, size_t *consumed, gk_bpe_ids *out);

// Encode everything `in` holds, reading it in pieces (never the whole file at
// once), and hand the ids to `emit` as they come; `what` names the input in
// messages. emit's non-success status stops the encoding and is returned.
// *nbytes (when not NULL): the bytes read.
typedef gk_status (*gk_bpe_emit_fn)(void *ctx, const int32_t *ids, size_t n);
gk_status gk_bpe_encode_stream(gk_bpe *t, FILE *in, const char *what, gk_bpe_emit_fn emit, void *ctx,
                               uint64_t *nbytes);

// The bytes of token `id` (*len of them), or NULL for an id that is no token.
const unsigned char *gk_bpe_token_bytes(const gk_bpe *t, int32_t id, size_t *len);
// Append the bytes of ids[0, n) to `out`; an id that is no token is an error
// naming its position and value (nothing is appended then).
gk_status gk_bpe_decode(const gk_bpe *t, const int32_t *ids, size_t n, gk_nn_buf *out);

#endif
