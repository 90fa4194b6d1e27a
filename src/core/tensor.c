// Tensor views: construction, DLPack, strided element access with dtype
// conversion.
#include "convert.h"
#include "internal.h"

#if GK_X86
#include <immintrin.h>
#endif

#include <string.h>

gk_status gk_tensor_init(gk_tensor *t, void *data, gk_dtype dtype, int rank,
                         const int64_t *shape) {
  if (!t) return gk_fail(GK_ERR_NULL_POINTER, "gk_tensor_init: argument 't' is NULL");
  if (rank < 0 || rank > GK_MAX_RANK)
    return gk_fail(GK_ERR_BAD_RANK, "gk_tensor_init: rank = %d is outside 0..%d", rank, GK_MAX_RANK);
  if (rank > 0 && !shape) return gk_fail(GK_ERR_NULL_POINTER, "gk_tensor_init: argument 'shape' is NULL");
  if (gk_dtype_size(dtype) == 0)
    return gk_fail(GK_ERR_BAD_DTYPE, "gk_tensor_init: dtype = %d is not a gk_dtype", (int)dtype);
  memset(t, 0, sizeof *t);
  t->data = data;
  t->dtype = dtype;
  t->device = GK_DEVICE_CPU;
  t->rank = rank;
  int64_t stride = 1;
  for (int i = rank - 1; i >= 0; i--) {
    t->shape[i] = shape[i];
    t->strides[i] = stride;
    stride *= shape[i] > 0 ? shape[i] : 1;
  }
  gk_clear_error();
  return GK_SUCCESS;
}

int64_t gk_tensor_numel(const gk_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) n *= t->shape[i];
  return n;
}

bool gk_tensor_is_contiguous(const gk_tensor *t) {
  int64_t expect = 1;
  for (int i = t->rank - 1; i >= 0; i--) {
    if (t->shape[i] != 1 && t->strides[i] != expect) return false;
    expect *= t->shape[i];
  }
  return true;
}

bool gk_tensor_is_one_value(const gk_tensor *t) {
  for (int i = 0; i < t->rank; i++)
    if (t->shape[i] != 1 && t->strides[i] != 0) return false;
  return true;
}

int64_t gk_tensor_offset(const gk_tensor *t, int64_t i) {
  int64_t off = 0;
  for (int d = t->rank - 1; d >= 0; d--) {
    int64_t n = t->shape[d];
    off += (i % n) * t->strides[d];
    i /= n;
  }
  return off;
}

gk_tensor gk_tensor_narrow(const gk_tensor *t, int dim, int64_t start, int64_t len) {
  gk_tensor v = *t;
  v.data = (char *)t->data + start * t->strides[dim] * (int64_t)gk_elem_size(t->dtype);
  v.shape[dim] = len;
  return v;
}

gk_tensor gk_tensor_row(const gk_tensor *t, int inner_rank, int64_t r) {
  // Row r's offset over the leading dims, innermost first; the outermost
  // takes what is left of r without a division (kernels call this per row).
  int lead = t->rank - inner_rank;
  int64_t off = 0;
  for (int d = lead - 1; d > 0; d--) {
    off += (r % t->shape[d]) * t->strides[d];
    r /= t->shape[d];
  }
  if (lead > 0) off += r * t->strides[0];
  gk_tensor row = *t;
  row.rank = inner_rank;
  for (int i = 0; i < inner_rank; i++) {
    row.shape[i] = t->shape[lead + i];
    row.strides[i] = t->strides[lead + i];
  }
  row.data = (char *)t->data + off * (int64_t)gk_elem_size(t->dtype);
  return row;
}

// ---------------------------------------------------------------- DLPack

enum { DL_INT = 0, DL_FLOAT = 2, DL_BFLOAT = 4, DL_CPU = 1, DL_CUDA = 2 };

gk_status gk_tensor_from_dlpack(const gk_dlpack_tensor *src, gk_tensor *dst) {
  if (!src) return gk_fail(GK_ERR_NULL_POINTER, "gk_tensor_from_dlpack: argument 'src' is NULL");
  if (!dst) return gk_fail(GK_ERR_NULL_POINTER, "gk_tensor_from_dlpack: argument 'dst' is NULL");
  if (src->ndim < 0 || src->ndim > GK_MAX_RANK)
    return gk_fail(GK_ERR_BAD_RANK, "gk_tensor_from_dlpack: src->ndim = %d is outside 0..%d",
                   src->ndim, GK_MAX_RANK);
  if (src->ndim > 0 && !src->shape)
    return gk_fail(GK_ERR_NULL_POINTER, "gk_tensor_from_dlpack: src->shape is NULL");
  gk_dtype dt;
  unsigned code = src->dtype.code, bits = src->dtype.bits;
  if (src->dtype.lanes != 1)
    return gk_fail(GK_ERR_BAD_DTYPE, "gk_tensor_from_dlpack: src->dtype.lanes = %u (only 1 is supported)",
                   (unsigned)src->dtype.lanes);
  if (code == DL_FLOAT && bits == 32) dt = GK_F32;
  else if (code == DL_FLOAT && bits == 64) dt = GK_F64;
  else if (code == DL_FLOAT && bits == 16) dt = GK_F16;
  else if (code == DL_BFLOAT && bits == 16) dt = GK_BF16;
  else if (code == DL_INT && bits == 32) dt = GK_I32;
  else if (code == DL_INT && bits == 64) dt = GK_I64;
  else
    return gk_fail(GK_ERR_BAD_DTYPE, "gk_tensor_from_dlpack: src->dtype (code %u, bits %u) has no gk_dtype",
                   code, bits);
  gk_device_type dev;
  if (src->device.device_type == DL_CPU) dev = GK_DEVICE_CPU;
  else if (src->device.device_type == DL_CUDA) dev = GK_DEVICE_CUDA;
  else
    return gk_fail(GK_ERR_BAD_DEVICE, "gk_tensor_from_dlpack: src->device.device_type = %d is neither CPU (1) nor CUDA (2)",
                   (int)src->device.device_type);
  size_t es = gk_dtype_size(dt);
  if (src->byte_offset % es != 0)
    return gk_fail(GK_ERR_BAD_ALIGNMENT, "gk_tensor_from_dlpack: src->byte_offset = %llu is not a multiple of %zu",
                   (unsigned long long)src->byte_offset, es);
  gk_status s = gk_tensor_init(dst, (char *)src->data + src->byte_offset, dt, src->ndim, src->shape);
  if (s != GK_SUCCESS) return s;
  dst->device = dev;
  dst->device_id = src->device.device_id;
  if (src->strides)
    for (int i = 0; i < src->ndim; i++) dst->strides[i] = src->strides[i];
  return GK_SUCCESS;
}

gk_status gk_tensor_to_dlpack(const gk_tensor *src, gk_dlpack_tensor *dst, int64_t *shape,
                              int64_t *strides) {
  if (!src || !dst || ((!shape || !strides) && src->rank > 0))
    return gk_fail(GK_ERR_NULL_POINTER, "gk_tensor_to_dlpack: argument '%s' is NULL",
                   !src ? "src" : !dst ? "dst" : !shape ? "shape" : "strides");
  if (src->rank < 0 || src->rank > GK_MAX_RANK)
    return gk_fail(GK_ERR_BAD_RANK, "gk_tensor_to_dlpack: src->rank = %d is outside 0..%d", src->rank, GK_MAX_RANK);
  static const uint8_t codes[] = {DL_FLOAT, DL_FLOAT, DL_FLOAT, DL_BFLOAT, DL_INT, DL_INT};
  if (gk_dtype_size(src->dtype) == 0)
    return gk_fail(GK_ERR_BAD_DTYPE, "gk_tensor_to_dlpack: src->dtype = %d is not a gk_dtype", (int)src->dtype);
  memset(dst, 0, sizeof *dst);
  dst->data = src->data;
  dst->device.device_type = src->device == GK_DEVICE_CUDA ? DL_CUDA : DL_CPU;
  dst->device.device_id = src->device_id;
  dst->ndim = src->rank;
  dst->dtype.code = codes[src->dtype];
  dst->dtype.bits = (uint8_t)(8 * gk_dtype_size(src->dtype));
  dst->dtype.lanes = 1;
  for (int i = 0; i < src->rank; i++) {
    shape[i] = src->shape[i];
    strides[i] = src->strides[i];
  }
  dst->shape = shape;
  dst->strides = strides;
  gk_clear_error();
  return GK_SUCCESS;
}

// ---------------------------------------------------------------- access

static inline double load_one(gk_dtype dt, const char *p) {
  switch (dt) {
  case GK_F32: return *(const float *)p;
  case GK_F64: return *(const double *)p;
  case GK_F16: return gk_f16_to_f32_inline(*(const uint16_t *)p);
  case GK_BF16: return gk_bf16_to_f32_inline(*(const uint16_t *)p);
  case GK_I32: return *(const int32_t *)p;
  case GK_I64: return (double)*(const int64_t *)p;
  }
  return 0;
}

static inline void store_one(gk_dtype dt, char *p, double v) {
  switch (dt) {
  case GK_F32: *(float *)p = (float)v; break;
  case GK_F64: *(double *)p = v; break;
  case GK_F16: *(uint16_t *)p = gk_f32_to_f16_inline((float)v); break;
  case GK_BF16: *(uint16_t *)p = gk_f32_to_bf16_inline((float)v); break;
  case GK_I32: *(int32_t *)p = (int32_t)v; break;
  case GK_I64: *(int64_t *)p = (int64_t)v; break;
  }
}

double gk_get(const gk_tensor *t, int64_t i) {
  size_t es = gk_elem_size(t->dtype);
  return load_one(t->dtype, (const char *)t->data + gk_tensor_offset(t, i) * (int64_t)es);
}

void gk_set(const gk_tensor *t, int64_t i, double v) {
  size_t es = gk_elem_size(t->dtype);
  store_one(t->dtype, (char *)t->data + gk_tensor_offset(t, i) * (int64_t)es, v);
}

// Walk elements [start, start + n) in row-major order, calling BODY with
// `p` (char *) pointing at each element and `k` its index in the chunk. The
// last dim is walked as a run; the multi-index is advanced per run.
#define GK_WALK(t, start, n, BODY)                                                   \
  do {                                                                               \
    const gk_tensor *w_t = (t);                                                      \
    int64_t w_es = (int64_t)gk_elem_size(w_t->dtype);                                \
    if ((n) <= 0) break;                                                             \
    if (w_t->rank == 0) {                                                            \
      char *p = (char *)w_t->data;                                                   \
      int64_t k = 0;                                                                 \
      if ((n) > 0) { BODY; }                                                         \
      break;                                                                         \
    }                                                                                \
    int w_r = w_t->rank;                                                             \
    int64_t w_idx[GK_MAX_RANK], w_rem = (start);                                     \
    for (int d = w_r - 1; d >= 0; d--) {                                             \
      w_idx[d] = w_rem % w_t->shape[d];                                              \
      w_rem /= w_t->shape[d];                                                        \
    }                                                                                \
    int64_t k = 0, w_n = (n), w_last = w_t->shape[w_r - 1];                          \
    /* a dim of size 1 may have any stride: not scaled then (it could overflow) */   \
    int64_t w_ls = w_last > 1 ? w_t->strides[w_r - 1] * w_es : 0;                    \
    while (k < w_n) {                                                                \
      int64_t w_off = 0;                                                             \
      for (int d = 0; d < w_r; d++) w_off += w_idx[d] * w_t->strides[d];             \
      char *p = (char *)w_t->data + w_off * w_es;                                    \
      int64_t w_run = gk_min64(w_last - w_idx[w_r - 1], w_n - k);                    \
      for (int64_t w_j = 0; w_j < w_run; w_j++, k++, p += w_ls) { BODY; }           \
      w_idx[w_r - 1] += w_run;                                                       \
      for (int d = w_r - 1; d > 0 && w_idx[d] == w_t->shape[d]; d--) {               \
        w_idx[d] = 0;                                                                \
        w_idx[d - 1]++;                                                              \
      }                                                                              \
    }                                                                                \
  } while (0)

// Contiguous runs of f16/bf16 <-> f32, compiled per instruction-set level:
// bf16 by the shifts and rounding of convert.h (which vectorise); f16 by the
// conversion instructions where the level has them (AVX-512 level: 16 lanes
// at a time; AVX2 level: F16C, 8 lanes), else convert.h's forms. Both round
// to nearest even and give the same bits, but for NaNs: the instructions keep
// a NaN's payload and return signaling NaNs quiet.
#define GK_DEFINE_CVT(NAME, FROM, TO, CVT)                                             \
  GK_INLINE void NAME##_body(const FROM *src, int64_t n, TO *dst) {                   \
    for (int64_t i = 0; i < n; i++) dst[i] = CVT(src[i]);                              \
  }
GK_DEFINE_CVT(bf16_to_f32, uint16_t, float, gk_bf16_to_f32_inline)
GK_ISA_VARIANTS(bf16_to_f32, (const uint16_t *src, int64_t n, float *dst), (src, n, dst))
GK_DEFINE_CVT(f32_to_bf16, float, uint16_t, gk_f32_to_bf16_inline)
GK_ISA_VARIANTS(f32_to_bf16, (const float *src, int64_t n, uint16_t *dst), (src, n, dst))
GK_DEFINE_CVT(f16_to_f32, uint16_t, float, gk_f16_to_f32_inline)
GK_DEFINE_CVT(f32_to_f16, float, uint16_t, gk_f32_to_f16_inline)

#if GK_X86
GK_TARGET_AVX512 static void f16_to_f32_avx512(const uint16_t *src, int64_t n, float *dst) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
  f16_to_f32_body(src + i, n - i, dst + i);
}
GK_TARGET_AVX2 static void f16_to_f32_avx2(const uint16_t *src, int64_t n, float *dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
  f16_to_f32_body(src + i, n - i, dst + i);
}
GK_TARGET_AVX512 static void f32_to_f16_avx512(const float *src, int64_t n, uint16_t *dst) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  f32_to_f16_body(src + i, n - i, dst + i);
}
GK_TARGET_AVX2 static void f32_to_f16_avx2(const float *src, int64_t n, uint16_t *dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  f32_to_f16_body(src + i, n - i, dst + i);
}
#endif

static void f16_to_f32(const uint16_t *src, int64_t n, float *dst) {
#if GK_X86
  switch (gk_isa_level()) {
  case GK_ISA_AVX512BF16:
  case GK_ISA_AVX512: f16_to_f32_avx512(src, n, dst); return;
  case GK_ISA_AVX2: f16_to_f32_avx2(src, n, dst); return;
  default: break;
  }
#endif
  f16_to_f32_body(src, n, dst);
}

static void f32_to_f16(const float *src, int64_t n, uint16_t *dst) {
#if GK_X86
  switch (gk_isa_level()) {
  case GK_ISA_AVX512BF16:
  case GK_ISA_AVX512: f32_to_f16_avx512(src, n, dst); return;
  case GK_ISA_AVX2: f32_to_f16_avx2(src, n, dst); return;
  default: break;
  }
#endif
  f32_to_f16_body(src, n, dst);
}

void gk_widen16(gk_dtype dt, const uint16_t *src, int64_t n, float *out) {
  if (dt == GK_BF16) bf16_to_f32(src, n, out);
  else f16_to_f32(src, n, out);
}

void gk_narrow16(gk_dtype dt, const float *in, int64_t n, uint16_t *dst) {
  if (dt == GK_BF16) f32_to_bf16(in, n, dst);
  else f32_to_f16(in, n, dst);
}

void gk_load_f32(const gk_tensor *t, int64_t start, int64_t n, float *out) {
  if (n <= 0) return;  // out may then be NULL (an empty workspace), and NULL + 0 is undefined in C
  if (gk_tensor_is_one_value(t)) {  // a broadcast scalar (autograd's dy of a sum): one load, a fill
    float v = (float)load_one(t->dtype, t->data);
    for (int64_t k = 0; k < n; k++) out[k] = v;
    return;
  }
  if ((t->dtype == GK_BF16 || t->dtype == GK_F16) && gk_tensor_is_contiguous(t)) {
    gk_widen16(t->dtype, (const uint16_t *)t->data + start, n, out);
    return;
  }
  switch (t->dtype) {
  case GK_F32: GK_WALK(t, start, n, out[k] = *(const float *)p); break;
  case GK_F16: GK_WALK(t, start, n, out[k] = gk_f16_to_f32_inline(*(const uint16_t *)p)); break;
  case GK_BF16: GK_WALK(t, start, n, out[k] = gk_bf16_to_f32_inline(*(const uint16_t *)p)); break;
  default: GK_WALK(t, start, n, out[k] = (float)load_one(t->dtype, p)); break;
  }
}

void gk_store_f32(const gk_tensor *t, int64_t start, int64_t n, const float *in) {
  if (n <= 0) return;  // in may then be NULL (an empty workspace), and NULL + 0 is undefined in C
  if ((t->dtype == GK_BF16 || t->dtype == GK_F16) && gk_tensor_is_contiguous(t)) {
    gk_narrow16(t->dtype, in, n, (uint16_t *)t->data + start);
    return;
  }
  switch (t->dtype) {
  case GK_F32: GK_WALK(t, start, n, *(float *)p = in[k]); break;
  case GK_F16: GK_WALK(t, start, n, *(uint16_t *)p = gk_f32_to_f16_inline(in[k])); break;
  case GK_BF16: GK_WALK(t, start, n, *(uint16_t *)p = gk_f32_to_bf16_inline(in[k])); break;
  default: GK_WALK(t, start, n, store_one(t->dtype, p, in[k])); break;
  }
}

void gk_load_f64(const gk_tensor *t, int64_t start, int64_t n, double *out) {
  if (n > 0 && gk_tensor_is_one_value(t)) {  // a broadcast scalar: one load, a fill
    double v = load_one(t->dtype, t->data);
    for (int64_t k = 0; k < n; k++) out[k] = v;
    return;
  }
  GK_WALK(t, start, n, out[k] = load_one(t->dtype, p));
}

void gk_store_f64(const gk_tensor *t, int64_t start, int64_t n, const double *in) {
  GK_WALK(t, start, n, store_one(t->dtype, p, in[k]));
}

#define GK_DEFINE_CHUNK(T, S, DT)                                                        \
  const T *gk_chunk_in_##S(const gk_tensor *t, int64_t start, int64_t n, T *buf) {       \
    if (t->dtype == DT && gk_tensor_is_contiguous(t)) return (const T *)t->data + start; \
    gk_load_##S(t, start, n, buf);                                                       \
    return buf;                                                                          \
  }                                                                                      \
  T *gk_chunk_out_##S(const gk_tensor *t, int64_t start, T *buf) {                       \
    if (t->dtype == DT && gk_tensor_is_contiguous(t)) return (T *)t->data + start;       \
    return buf;                                                                          \
  }                                                                                      \
  void gk_chunk_commit_##S(const gk_tensor *t, int64_t start, int64_t n, T *p,           \
                           const T *buf) {                                               \
    if (p == buf) gk_store_##S(t, start, n, buf);                                        \
  }
GK_DEFINE_CHUNK(float, f32, GK_F32)
GK_DEFINE_CHUNK(double, f64, GK_F64)
