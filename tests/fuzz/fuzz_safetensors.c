// libFuzzer target for the safetensors reader (src/nn/safetensors.h): the
// input is a file's bytes, parsed with gk_st_parse (what gk_st_load does
// after reading the file). A file the reader accepts is then read through
// every accessor: each tensor copied out with gk_st_read and looked up by
// name, each metadata entry looked up by key.
#include "nn/safetensors.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  gk_st_file *f;
  if (gk_st_parse(data, size, "fuzz input", &f) != GK_SUCCESS) return 0;
  for (size_t i = 0; i < gk_st_num_tensors(f); i++) {
    const gk_st_tensor *t = gk_st_tensor_at(f, i);
    // The data lies inside the file, so nbytes <= size.
    if (t->nbytes > size || gk_st_lookup(f, t->name) != t) abort();
    void *copy = malloc(t->nbytes + 1);
    if (!copy) abort();
    if (gk_st_read(f, t->name, t->dtype, t->rank, t->shape, copy) != GK_SUCCESS ||
        memcmp(copy, t->data, t->nbytes))
      abort();
    free(copy);
  }
  for (size_t i = 0; i < gk_st_num_metadata(f); i++) {
    const gk_st_meta *m = gk_st_metadata_at(f, i);
    const char *value;
    if (gk_st_get_metadata(f, m->key, &value) != GK_SUCCESS || strcmp(value, m->value)) abort();
  }
  gk_st_close(f);
  return 0;
}
