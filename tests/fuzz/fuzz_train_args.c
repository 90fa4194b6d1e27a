// libFuzzer target for the command lines of `gradkern train` and `gradkern
// sample` (tools/train_args.h): the input, split at NUL bytes and newlines
// into arguments, goes to both parsers; a command line a parser accepts is
// then asked which options it set, and its values are shown as the --help
// defaults (written to /dev/null, so the fuzzer prints nothing per input).
#include "train_args.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_ARGS = 64 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *devnull;
  if (!devnull && !(devnull = fopen("/dev/null", "w"))) abort();
  // A copy with a NUL after each argument (and one at the end).
  char *text = malloc(size + 1), *argv[MAX_ARGS];
  if (!text) abort();
  memcpy(text, data, size);
  text[size] = 0;
  int argc = 0;
  for (size_t i = 0, start = 0; i <= size && argc < MAX_ARGS; i++)
    if (i == size || text[i] == 0 || text[i] == '\n') {
      text[i] = 0;
      argv[argc++] = text + start;
      start = i + 1;
    }

  gk_train_args train = gk_train_defaults;
  int help;
  if (gk_train_args_parse(argc, argv, &train, &help) == GK_SUCCESS) {
    for (int i = 0; i < argc; i++) gk_train_args_given(&train, argv[i]);
    gk_train_usage(devnull, &train);
  }
  gk_sample_args sample = gk_sample_defaults;
  if (gk_sample_args_parse(argc, argv, &sample, &help) == GK_SUCCESS) {
    for (int i = 0; i < argc; i++) gk_sample_args_given(&sample, argv[i]);
    gk_sample_usage(devnull, &sample);
  }
  free(text);
  return 0;
}
