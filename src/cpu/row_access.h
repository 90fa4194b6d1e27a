// How the CPU kernels that walk rows in chunks read and write them: the
// f32 (f64) forms take a chunk through gk_chunk_in / gk_chunk_out /
// gk_chunk_commit (the tensor's own memory when it is contiguous in that
// dtype, else converted through a buffer); the 16-bit forms, for rows that
// are contiguous bf16 or f16, hand out the row's own memory, whose elements
// the kernels widen to f32 in registers and narrow (round to nearest even,
// convert.h) as they store them.
#ifndef GK_CPU_ROW_ACCESS_H
#define GK_CPU_ROW_ACCESS_H

#include "../core/internal.h"

#include <stdint.h>

// IN gives chunk [c, c + len) of row view x for reading (buf: room for the
// chunk), OUT one to write (buf likewise) and COMMIT stores it; kernels
// widen elements with LD and narrow results with ST (GK_ROW_SAME for f32
// and f64).
#define GK_ROW_SAME(v) (v)
#define GK_ROW_IN_f32(x, c, len, buf) gk_chunk_in_f32(x, c, len, buf)
#define GK_ROW_IN_f64(x, c, len, buf) gk_chunk_in_f64(x, c, len, buf)
#define GK_ROW_OUT_f32(x, c, buf) gk_chunk_out_f32(x, c, buf)
#define GK_ROW_OUT_f64(x, c, buf) gk_chunk_out_f64(x, c, buf)
#define GK_ROW_COMMIT_f32(x, c, len, o, buf) gk_chunk_commit_f32(x, c, len, o, buf)
#define GK_ROW_COMMIT_f64(x, c, len, o, buf) gk_chunk_commit_f64(x, c, len, o, buf)
// A contiguous 16-bit row: its own memory.
#define GK_ROW_IN_16(x, c, len, buf) ((void)(len), (void)(buf), (const uint16_t *)(x)->data + (c))
#define GK_ROW_OUT_16(x, c, buf) ((void)(buf), (uint16_t *)(x)->data + (c))
#define GK_ROW_COMMIT_16(x, c, len, o, buf) ((void)(o), (void)(buf))

#endif
