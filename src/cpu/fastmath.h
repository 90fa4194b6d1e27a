// Branch-free f32 exp for the CPU kernels' inner loops (softmax,
// cross-entropy, attention): loops calling it vectorize, unlike libm's expf.
// exp(x) = 2^n exp(r), n = round(x / ln 2), r = x - n ln 2 in two parts,
// exp(r) by Cephes' degree-6 polynomial: within 2 ulp of expf over the f32
// range [-87.33, 88.37]; 0 below it (no subnormal results), +inf above it
// (so +inf already from 88.37, where expf still gives up to 3.4e38); NaN stays
// NaN. The kernels call it on x - max <= 0.
#ifndef GK_FASTMATH_H
#define GK_FASTMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float gk_exp_f32(float x) {
  float xc = x < -87.33f ? -87.33f : x > 88.37f ? 88.37f : x;
  float t = xc * 1.44269504088896341f + 12582912.0f;  // round to nearest: n in t's low bits
  float n = t - 12582912.0f;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  uint32_t tb, sb;
  memcpy(&tb, &t, 4);
  sb = (tb - 0x4b400000u + 127u) << 23;  // 2^n
  float scale;
  memcpy(&scale, &sb, 4);
  float y = p * scale;
  y = x < -87.33f ? 0.0f : y;
  return x > 88.37f ? (float)INFINITY : y;
}

#endif
