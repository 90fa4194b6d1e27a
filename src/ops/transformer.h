// Helpers shared by the transformer ops' descriptions, reference kernels and
// CPU kernels.
#ifndef GK_OPS_TRANSFORMER_H
#define GK_OPS_TRANSFORMER_H

#include "../core/internal.h"

// A view of t with dimension `dim` moved to the end (others keep their order).
gk_tensor gk_tensor_move_dim_last(const gk_tensor *t, int dim);

#endif
