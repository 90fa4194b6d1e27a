#version 450
// RMSNorm / LayerNorm, backward for the parameters: one invocation per
// column c, summing over the rows in order (no atomics):
//   dweight[c] = sum_r dy[r,c] xhat[r,c],  dbias[c] = sum_r dy[r,c]
// overwritten, or added to with acc.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push { uint rows, C, layernorm, has_w, has_b, acc; } p;
#define DY 0
#define X 1
#define RSTD 2
#define MEAN 3
#define DW 4
#define DB 5
void main() {
  FOR_EACH(c, p.C) {
    float dw = 0.0, db = 0.0;
    for (uint r = 0; r < p.rows; r++) {
      float dy = LD(DY, r * p.C + c), mean = p.layernorm != 0u ? LD(MEAN, r) : 0.0;
      dw += dy * (LD(X, r * p.C + c) - mean) * LD(RSTD, r);
      db += dy;
    }
    if (p.has_w != 0u) ST(DW, c, p.acc != 0u ? LD(DW, c) + dw : dw);
    if (p.has_b != 0u) ST(DB, c, p.acc != 0u ? LD(DB, c) + db : db);
  }
}
