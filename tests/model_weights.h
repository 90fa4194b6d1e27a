// Random weights of typical size for the model tests (test_generate,
// test_chunked), so every part of a block shows in the logits: matrices
// uniform with unit-variance outputs, the embedding of unit variance, norms,
// biases, D and dt_bias scaled by 1 +- 0.2; A_log kept (a stable decay).
#ifndef GK_TEST_MODEL_WEIGHTS_H
#define GK_TEST_MODEL_WEIGHTS_H

#include "harness.h"
#include "nn/model.h"

#include <math.h>
#include <string.h>

static void randomize(gk_model *m) {
  for (int i = 0; i < m->nparams; i++) {
    const gk_param *p = &m->params[i];
    float *w = m->w + p->offset;
    if (strstr(p->name, "A_log")) continue;
    bool matrix = p->rank == 2 && !strstr(p->name, "conv_w");
    double bound = !strcmp(p->name, "embedding") ? sqrt(3.0) : matrix ? sqrt(3.0 / (double)p->shape[1]) : 0;
    for (int64_t j = 0; j < p->numel; j++)
      w[j] = bound ? (float)rng_uniform(-bound, bound) : w[j] * (float)rng_uniform(0.8, 1.2);
  }
}

#endif
