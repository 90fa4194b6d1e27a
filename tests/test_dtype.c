// f16 and bf16 conversions: exact round trips, and round to nearest even
// checked against the neighbouring representable values.
#include "harness.h"
#include "../src/core/convert.h"

// The kernels' bulk conversions (src/core/tensor.c; per ISA level, F16C for
// f16 where the level has it): contiguous runs of a tensor to and from f32.
void gk_load_f32(const gk_tensor *t, int64_t start, int64_t n, float *out);
void gk_store_f32(const gk_tensor *t, int64_t start, int64_t n, const float *in);

static bool same_value(float a, float b) { return (isnan(a) && isnan(b)) || memcmp(&a, &b, 4) == 0; }

// f[N .. 4N) for N = 65536, the f32 values the rounding checks use: the
// midpoint (a tie) between each 16-bit value and the next, the f32 just above
// it, and random bits.
static void rounding_inputs(float (*to_f32)(uint16_t), float *f) {
  enum { N = 65536 };
  for (uint32_t i = 0; i < N; i++) {
    float a = to_f32((uint16_t)i), b = to_f32((uint16_t)(i + 1 < N ? i + 1 : i)), mid = a / 2 + b / 2;
    f[N + i] = mid;
    f[2 * N + i] = nextafterf(mid, INFINITY);
    uint32_t u = (uint32_t)rng_next();
    memcpy(&f[3 * N + i], &u, 4);
  }
}

// Every f16/bf16 value through gk_load_f32, and f32 values (every f16/bf16
// value, the midpoints between neighbours and their f32 neighbours, random
// bits) through gk_store_f32, against the scalar conversions.
static void check_bulk(gk_dtype dt, float (*to_f32)(uint16_t), uint16_t (*from_f32)(float)) {
  enum { N = 65536 };
  static uint16_t h[N], back[4 * N];
  static float f[4 * N];
  int64_t shape[1] = {N};
  gk_tensor t;
  for (uint32_t i = 0; i < N; i++) h[i] = (uint16_t)i;
  gk_tensor_init(&t, h, dt, 1, shape);
  gk_load_f32(&t, 0, N, f);
  int bad = 0;
  for (uint32_t i = 0; i < N; i++) bad += !same_value(f[i], to_f32((uint16_t)i));
  check(bad == 0, "%s bulk load: %d of %d values differ from the scalar conversion", gk_dtype_name(dt), bad, N);
  rounding_inputs(to_f32, f);
  shape[0] = 4 * N;
  gk_tensor_init(&t, back, dt, 1, shape);
  gk_store_f32(&t, 0, 4 * N, f);
  bad = 0;
  for (uint32_t i = 0; i < 4 * N; i++) {
    float got = to_f32(back[i]), want = to_f32(from_f32(f[i]));
    bad += !same_value(got, want);
  }
  check(bad == 0, "%s bulk store: %d of %d values differ from the scalar conversion", gk_dtype_name(dt), bad, 4 * N);
}

// The 16-lane bf16 converters of convert.h (the kernels widen and round 16
// elements in registers with them) against the scalar conversions: every
// bf16 value widened, and the rounding_inputs values rounded.
static void check_bf16_vectors(void) {
  enum { N = 65536 };
  static uint16_t h[N], back[4 * N];
  static float f[4 * N];
  for (uint32_t i = 0; i < N; i++) h[i] = (uint16_t)i;
  for (int i = 0; i < N; i += 16) gk_bf16x16_to_f32(h + i, f + i);
  int bad = 0;
  for (uint32_t i = 0; i < N; i++) bad += !same_value(f[i], gk_bf16_to_f32((uint16_t)i));
  check(bad == 0, "bf16 16-lane widening: %d of %d values differ from the scalar conversion", bad, N);
  rounding_inputs(gk_bf16_to_f32, f);
  for (int i = 0; i < 4 * N; i += 16) gk_f32x16_to_bf16(f + i, back + i);
  bad = 0;
  for (uint32_t i = 0; i < 4 * N; i++) bad += back[i] != gk_f32_to_bf16(f[i]);
  check(bad == 0, "bf16 16-lane rounding: %d of %d values differ from the scalar conversion", bad, 4 * N);
}

static float f16_val(uint16_t h) { return gk_f16_to_f32(h); }
static float bf16_val(uint16_t h) { return gk_bf16_to_f32(h); }

// h must be the nearest of h-1, h, h+1 (in magnitude order) to x, ties to even.
static bool nearest_even(float x, uint16_t h, float (*val)(uint16_t), uint16_t max_finite) {
  double v = val(h), best = fabs((double)x - v);
  uint16_t mag = h & 0x7fff;
  for (int step = -1; step <= 1; step += 2) {
    int m = (int)mag + step;
    if (m < 0 || m > max_finite) continue;
    double d = fabs((double)x - val((uint16_t)((h & 0x8000) | m)));
    if (d < best) return false;
    if (d == best && (mag & 1)) return false;
  }
  return true;
}

int main(void) {
  int round_trips = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    bool f16_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
    if (!f16_nan) round_trips += gk_f32_to_f16(gk_f16_to_f32((uint16_t)h)) == h;
    else round_trips += isnan(gk_f16_to_f32((uint16_t)h)) && isnan(gk_f16_to_f32(gk_f32_to_f16(gk_f16_to_f32((uint16_t)h))));
    bool bf_nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
    if (!bf_nan) round_trips += gk_f32_to_bf16(gk_bf16_to_f32((uint16_t)h)) == h;
    else round_trips += isnan(gk_bf16_to_f32(gk_f32_to_bf16(gk_bf16_to_f32((uint16_t)h))));
  }
  check(round_trips == 2 * 65536, "round trips: %d of %d", round_trips, 2 * 65536);

  int bad_f16 = 0, bad_bf16 = 0, n = 2000000;
  for (int i = 0; i < n; i++) {
    uint32_t u = (uint32_t)rng_next();
    float x;
    memcpy(&x, &u, 4);
    if (!isfinite(x)) continue;
    if (fabsf(x) < 65504.0f) bad_f16 += !nearest_even(x, gk_f32_to_f16(x), f16_val, 0x7bff);
    if (fabsf(x) < 3.38e38f) bad_bf16 += !nearest_even(x, gk_f32_to_bf16(x), bf16_val, 0x7f7f);
    // Values in f16's range, where the random bits above rarely land.
    float y = (float)rng_uniform(-70000, 70000) * (float)pow(2, -(double)(rng_next() % 30));
    if (fabsf(y) < 65504.0f) bad_f16 += !nearest_even(y, gk_f32_to_f16(y), f16_val, 0x7bff);
  }
  check(bad_f16 == 0, "f16 rounding: %d values not rounded to nearest even", bad_f16);
  check(bad_bf16 == 0, "bf16 rounding: %d values not rounded to nearest even", bad_bf16);

  // Fixed cases: ties, overflow, subnormals, NaN.
  check(gk_f32_to_f16(65504.0f) == 0x7bff, "f16 max");
  check(gk_f32_to_f16(65519.99f) == 0x7bff, "f16 just below the overflow tie");
  check(gk_f32_to_f16(65520.0f) == 0x7c00, "f16 overflow tie rounds to inf");
  check(gk_f32_to_f16(1e10f) == 0x7c00 && gk_f32_to_f16(-1e10f) == 0xfc00, "f16 overflow to inf");
  check(gk_f32_to_f16(5.9604645e-8f) == 0x0001, "f16 smallest subnormal");
  check(gk_f32_to_f16(2.9802322e-8f) == 0x0000, "f16 half the smallest subnormal ties to even 0");
  check(gk_f32_to_f16(1.0f + 1.0f / 2048) == 0x3c00, "f16 tie to even (down)");
  check(gk_f32_to_f16(1.0f + 3.0f / 2048) == 0x3c02, "f16 tie to even (up)");
  check(isnan(gk_f16_to_f32(gk_f32_to_f16(NAN))), "f16 NaN");
  check(gk_f32_to_bf16(1.0f + 1.0f / 256) == 0x3f80, "bf16 tie to even (down)");
  check(gk_f32_to_bf16(1.0f + 3.0f / 256) == 0x3f82, "bf16 tie to even (up)");
  check(isnan(gk_bf16_to_f32(gk_f32_to_bf16(NAN))), "bf16 NaN stays NaN");
  check(gk_f32_to_bf16(3.4028235e38f) == 0x7f80, "bf16 f32 max rounds to inf");
  check(gk_f32_to_bf16(-0.0f) == 0x8000 && gk_f32_to_f16(-0.0f) == 0x8000, "negative zero");
  check_bulk(GK_F16, gk_f16_to_f32, gk_f32_to_f16);
  check_bulk(GK_BF16, gk_bf16_to_f32, gk_f32_to_bf16);
  check_bf16_vectors();
  return finish("test_dtype");
}
