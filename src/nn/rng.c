// xoshiro256** seeded by splitmix64 (see rng.h).
#include "rng.h"

#include <math.h>

// splitmix64: advance *x by the golden-ratio increment and scramble it.
static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void gk_rng_seed(gk_rng *rng, uint64_t seed) {
  for (int k = 0; k < 4; k++) rng->s[k] = splitmix64(&seed);
}

void gk_rng_seed_stream(gk_rng *rng, uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t x = seed;
  uint64_t h = splitmix64(&x);
  x = h ^ stream;
  h = splitmix64(&x);
  x = h ^ index;
  gk_rng_seed(rng, splitmix64(&x));
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t gk_rng_next(gk_rng *rng) {
  uint64_t *s = rng->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

uint64_t gk_rng_below(gk_rng *rng, uint64_t n) {
  if (n <= 1) return 0;
  // Values below 2^64 mod n would make the low residues more likely: skip them.
  uint64_t threshold = (0 - n) % n;
  for (;;) {
    uint64_t r = gk_rng_next(rng);
    if (r >= threshold) return r % n;
  }
}

double gk_rng_uniform(gk_rng *rng) { return (double)(gk_rng_next(rng) >> 11) * (1.0 / 9007199254740992.0); }

double gk_rng_normal(gk_rng *rng) {
  // u1 in (0, 1] so the log is finite.
  double u1 = 1.0 - gk_rng_uniform(rng), u2 = gk_rng_uniform(rng);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
