// A helper for tests/python/test_safetensors.py:
//   nn_helper safetensors OUT   write a file with a tensor of every dtype whose
//                               values follow formulas the Python test repeats
//   nn_helper dump FILE         read FILE and print one JSON object per line:
//                               {"name", "dtype", "shape", "hex"} per tensor in
//                               data order, then {"meta", "value"} per entry;
//                               on a bad file the message on stderr, exit 1
//   nn_helper plot OUT [log]    write a training-curve SVG
#define _POSIX_C_SOURCE 200809L
#include "nn/plot.h"
#include "nn/safetensors.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int fail(void) {
  fprintf(stderr, "%s\n", gk_last_error());
  return 1;
}

static int write_safetensors(const char *path) {
  static float f32[6], scalar = 3.5f, big[64 * 33];
  static double f64[4];
  static uint16_t f16[6], bf16[5];
  static int32_t i32[4];
  static int64_t i64[3];
  static uint8_t u8[7];
  for (int i = 0; i < 6; i++) f32[i] = (float)i * 0.25f - 1;
  for (int i = 0; i < 4; i++) f64[i] = 1.0 / (i + 3);
  for (int i = 0; i < 6; i++) f16[i] = gk_f32_to_f16((float)i / 3.0f - 0.5f);
  for (int i = 0; i < 5; i++) bf16[i] = gk_f32_to_bf16((float)i * 1.1f - 2.0f);
  for (int i = 0; i < 4; i++) i32[i] = (i - 2) * 100000;
  for (int i = 0; i < 3; i++) i64[i] = (int64_t)1 << (33 + i);
  for (int i = 0; i < 7; i++) u8[i] = (uint8_t)((250 + i) & 255);
  for (int i = 0; i < 64 * 33; i++) big[i] = (float)(i % 97) * 0.125f - 3.0f;
  gk_st_tensor t[] = {
      {"u8", GK_ST_U8, 1, {7}, u8, 0},
      {"f32", GK_ST_F32, 2, {2, 3}, f32, 0},
      {"f16", GK_ST_F16, 3, {3, 1, 2}, f16, 0},
      {"f64", GK_ST_F64, 1, {4}, f64, 0},
      {"bf16", GK_ST_BF16, 1, {5}, bf16, 0},
      {"i32", GK_ST_I32, 2, {2, 2}, i32, 0},
      {"i64", GK_ST_I64, 1, {3}, i64, 0},
      {"scalar", GK_ST_F32, 0, {0}, &scalar, 0},
      {"empty", GK_ST_F32, 2, {0, 3}, NULL, 0},
      {"layers.0.big", GK_ST_F32, 2, {64, 33}, big, 0},
      {"name \"quoted\" \\ \xc3\xa9 \xe2\x9c\x93", GK_ST_U8, 1, {1}, u8, 0},
  };
  gk_st_meta meta[] = {{"format", "pt"},
                       {"config", "{\"model\": \"mamba\", \"layers\": 2}"},
                       {"unicode", "\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80"},
                       {"quote", "a \"b\" \\ c\nd\te\x01"}};
  if (gk_st_save(path, t, sizeof t / sizeof *t, meta, sizeof meta / sizeof *meta)) return fail();
  return 0;
}

static void print_json_string(const char *s) {
  putchar('"');
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"' || *c == '\\') printf("\\%c", *c);
    else if (*c < 0x20) printf("\\u%04x", *c);
    else putchar(*c);
  }
  putchar('"');
}

static int dump(const char *path) {
  gk_st_file *f;
  if (gk_st_load(path, &f)) return fail();
  for (size_t i = 0; i < gk_st_num_tensors(f); i++) {
    const gk_st_tensor *t = gk_st_tensor_at(f, i);
    printf("{\"name\": ");
    print_json_string(t->name);
    printf(", \"dtype\": \"%s\", \"shape\": [", gk_st_dtype_name(t->dtype));
    for (int d = 0; d < t->rank; d++) printf(d ? ", %lld" : "%lld", (long long)t->shape[d]);
    printf("], \"hex\": \"");
    for (size_t k = 0; k < t->nbytes; k++) printf("%02x", ((const unsigned char *)t->data)[k]);
    printf("\"}\n");
  }
  for (size_t i = 0; i < gk_st_num_metadata(f); i++) {
    printf("{\"meta\": ");
    print_json_string(gk_st_metadata_at(f, i)->key);
    printf(", \"value\": ");
    print_json_string(gk_st_metadata_at(f, i)->value);
    printf("}\n");
  }
  gk_st_close(f);
  return 0;
}

static int plot(const char *path, int log_y) {
  enum { N = 500, NE = 10 };
  static double sx[N], sy[N], ex[NE], ey[NE];
  for (int i = 0; i < N; i++) sx[i] = i + 1, sy[i] = 2.8 * exp(-i / 80.0) + 0.02 + 0.05 * sin(i * 0.7) * exp(-i / 80.0);
  for (int i = 0; i < NE; i++) ex[i] = (i + 1) * 50, ey[i] = 2.8 * exp(-(i + 1) * 50 / 80.0) + 0.03;
  gk_plot_series s[2] = {{"train loss", sx, sy, N, 0}, {"eval loss", ex, ey, NE, 1}};
  gk_plot p = {"mamba, selective copying", "step", "loss (nats per token)", log_y, 0, 0};
  if (gk_plot_write(path, &p, s, 2)) return fail();
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 3 && !strcmp(argv[1], "safetensors")) return write_safetensors(argv[2]);
  if (argc >= 3 && !strcmp(argv[1], "dump")) return dump(argv[2]);
  if (argc >= 3 && !strcmp(argv[1], "plot")) return plot(argv[2], argc >= 4 && !strcmp(argv[3], "log"));
  fprintf(stderr, "usage: nn_helper safetensors OUT | dump FILE | plot OUT.svg [log]\n");
  return 2;
}
