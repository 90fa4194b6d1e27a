// libFuzzer target for the BPE tokenizer (src/nn/bpe.h): the input is a
// tokenizer.json, a NUL byte, then a text. The file is parsed with
// gk_bpe_parse_hf (what gk_bpe_load does after reading it); a tokenizer it
// accepts encodes the text at once and again in pieces (the stream's way),
// which must give the same ids, and those ids must decode.
#include "nn/bpe.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *nul = memchr(data, 0, size);
  size_t json_len = nul ? (size_t)(nul - data) : size;
  const uint8_t *text = nul ? nul + 1 : data + size;
  size_t text_len = nul ? size - json_len - 1 : 0;
  gk_bpe *t;
  if (gk_bpe_parse_hf(data, json_len, "fuzz input", &t) != GK_SUCCESS) return 0;
  gk_bpe_ids whole = {0}, parts = {0};
  size_t used;
  gk_status st = gk_bpe_encode(t, text, text_len, 1, &used, &whole);
  if (st == GK_SUCCESS) {
    // Pieces of 1, 2, 3, ... bytes, keeping what each call leaves.
    size_t pos = 0, have = 0, step = 1;
    for (;;) {
      size_t add = step++ % 7 + 1;
      int final = pos + have + add >= text_len;
      have = final ? text_len - pos : have + add;
      if (gk_bpe_encode(t, text + pos, have, final, &used, &parts) != GK_SUCCESS) abort();
      pos += used;
      have -= used;
      if (final) break;
    }
    if (pos != text_len || parts.len != whole.len || memcmp(parts.data, whole.data, whole.len * sizeof(int32_t)))
      abort();
    gk_nn_buf out = {0};
    if (gk_bpe_decode(t, whole.data, whole.len, &out) != GK_SUCCESS) abort();
    gk_nn_buf_free(&out);
  }
  gk_bpe_ids_free(&whole);
  gk_bpe_ids_free(&parts);
  gk_bpe_free(t);
  return 0;
}
