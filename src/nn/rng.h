// A small deterministic random number generator: xoshiro256** (Blackman and
// Vigna), its 256-bit state filled from a 64-bit seed by splitmix64. The same
// seed gives the same numbers on every machine and compiler.
#ifndef GK_NN_RNG_H
#define GK_NN_RNG_H

#include <stdint.h>

typedef struct gk_rng {
  uint64_t s[4];
} gk_rng;

// Seed from one number (any value, 0 included).
void gk_rng_seed(gk_rng *rng, uint64_t seed);
// Seed an independent stream for (seed, stream, index): e.g. the training
// batch of one step. Each part goes through splitmix64 before the next is
// mixed in, so neighbouring indices give unrelated streams.
void gk_rng_seed_stream(gk_rng *rng, uint64_t seed, uint64_t stream, uint64_t index);
// The next 64 random bits.
uint64_t gk_rng_next(gk_rng *rng);
// Uniform in [0, n) without modulo bias (rejection); n >= 1 (n == 0 gives 0).
uint64_t gk_rng_below(gk_rng *rng, uint64_t n);
// Uniform in [0, 1), with 53 random bits.
double gk_rng_uniform(gk_rng *rng);
// Standard normal (Box-Muller; uses two uniforms per call, keeps no spare).
double gk_rng_normal(gk_rng *rng);

#endif
