// Evaluation of sequences far longer than one run holds: a batch of
// sequences goes through a Mamba `chunk` tokens at a time, in piece runs
// (gk_run_create_piece) that carry every layer's conv and scan states from
// one piece to the next, so the memory is that of one piece whatever the
// length: a million-token sequence runs in the activations of `chunk`
// tokens. A last piece shorter than `chunk` runs in a second, smaller run
// that takes the state over.
//
// The logits equal those of the whole sequences in one run (gk_run_create,
// gk_run_forward) bit for bit where the CPU scan runs every channel step by
// step on both sides, as it does for 8 sequences of a width-64 Mamba with
// selection (its grid, chosen from the sizes alone, has enough batch and
// channel parts) in pieces of up to a few thousand tokens. Where the grid
// has fewer parts (one sequence; B and C shared, without selection) the
// whole run scans a sequence longer than two 64-step scan chunks in ranges,
// in two levels, which round differently: a few 1e-7 of the largest logit.
// tests/test_chunked.c checks both for every chunk size.
#ifndef GK_NN_CHUNKED_H
#define GK_NN_CHUNKED_H

#include "model.h"

typedef struct gk_chunked gk_chunked;

// Pieces of `chunk` tokens of `batch` sequences of model m (Mamba only;
// LLaMA's attention needs the whole sequence: refused with a message).
gk_status gk_chunked_create(gk_model *m, int batch, int chunk, gk_chunked **out);
void gk_chunked_free(gk_chunked *c);
// Bytes the runs hold (activations, workspace, logits, the carried state):
// the piece run and, once a run needed one, the last-piece run.
size_t gk_chunked_bytes(const gk_chunked *c);

// Called once per piece: the logits (batch * n, V) of positions
// [first, first + n) of every sequence, row b * n + t holding sequence b at
// position first + t. A status other than GK_SUCCESS stops the run and is
// returned.
typedef gk_status (*gk_chunk_fn)(void *ctx, int64_t first, int n, const float *logits);

// The batch's sequences, inputs (batch, T) row-major with T >= 1, through
// the model from the zero state, piece after piece.
gk_status gk_chunked_run(gk_chunked *c, const int32_t *inputs, int64_t T, gk_chunk_fn fn, void *ctx);

#endif
