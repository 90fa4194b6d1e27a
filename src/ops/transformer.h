// Helpers shared by the transformer ops' descriptions, reference kernels and
// CPU kernels.
#ifndef GK_OPS_TRANSFORMER_H
#define GK_OPS_TRANSFORMER_H

#include "../core/internal.h"

// A view of t with dimension `dim` moved to the end (others keep their order).
gk_tensor gk_tensor_move_dim_last(const gk_tensor *t, int dim);

// The number of elements of target tensor t that are not `ignore` (the rows
// a mean cross-entropy divides by; the values were checked by gk_plan_run).
int64_t gk_count_not_ignored(const gk_tensor *t, int64_t ignore);
// RoPE: the position of row r of x seen as (rows, Dh), and the angle of
// pair i at position p (f64).
int64_t gk_rope_position(const gk_op_desc *d, int64_t r);
double gk_rope_angle(const gk_op_desc *d, int64_t p, int64_t i);

// add/mul: x (A or B) as a view of the output's shape (rank, shape), its
// dims aligned at the trailing end, stride 0 along the dims it is broadcast on.
gk_tensor gk_broadcast_view(const gk_tensor *x, int rank, const int64_t *shape);

// desc.index_dtype must be GK_I32 or GK_I64.
gk_status gk_check_index_dtype(const gk_op_desc *d);

#endif
