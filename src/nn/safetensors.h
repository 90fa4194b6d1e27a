// Reading and writing safetensors files (the checkpoint format).
//
// Format (as the Python `safetensors` package writes and reads it):
//   bytes [0, 8)        N: the header length, unsigned 64-bit little-endian
//   bytes [8, 8 + N)    the header: a JSON object in UTF-8, padded at the end
//                       with spaces so that 8 + N is a multiple of 8:
//     {"__metadata__": {"key": "value", ...},                    (optional)
//      "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
//      ...}
//   bytes [8 + N, end)  the data section: each tensor's elements row-major,
//                       little-endian, at [begin, end) of data_offsets,
//                       counted from the start of the data section.
// dtype is one of F32 F64 F16 BF16 I32 I64 U8; shape a list of
// non-negative integers ([] for a scalar); end - begin must be the product
// of the shape times the element size.
//
// The reader is strict and says precisely what is wrong (which tensor, which
// field): the header length must lie within the file and the header start
// with '{'; the JSON must be well formed with nothing but whitespace after
// it; each tensor entry has exactly the fields dtype, shape and data_offsets;
// no name (and no metadata key) appears twice; the tensors' byte ranges,
// sorted, start at 0, follow one another with no gap or overlap, and end
// exactly at the end of the file. Strings are valid UTF-8 (escapes decoded,
// \u0000 refused).
//
// The writer orders tensors by element size, largest first (stable for equal
// sizes, as the Python package does), so that with the header padded to a
// multiple of 8 every tensor starts at a multiple of its element size.
#ifndef GK_NN_SAFETENSORS_H
#define GK_NN_SAFETENSORS_H

#include "nn.h"

#include <stddef.h>
#include <stdint.h>

// Element types. The first six have the values of the matching gk_dtype.
typedef enum gk_st_dtype {
  GK_ST_F32 = GK_F32,
  GK_ST_F64 = GK_F64,
  GK_ST_F16 = GK_F16,
  GK_ST_BF16 = GK_BF16,
  GK_ST_I32 = GK_I32,
  GK_ST_I64 = GK_I64,
  GK_ST_U8 = 6,
  GK_ST_DTYPE_COUNT_ = 7  // number of dtypes (not a dtype)
} gk_st_dtype;

// "F32", "BF16", ... as in the file, or "?" for an unknown value.
const char *gk_st_dtype_name(gk_st_dtype dtype);
// Bytes per element, 0 for an unknown value.
size_t gk_st_dtype_size(gk_st_dtype dtype);

// One tensor. Writing: fill name, dtype, rank, shape and data (the caller's
// bytes, row-major; nbytes is ignored). Reading: every field is filled, and
// `data` points into the loaded file (valid until gk_st_close); it is
// aligned to the element size for files whose header keeps 8 + N a multiple
// of 8 and whose tensors are ordered by element size (gradkern's, Python's),
// while gk_st_read copies safely from any file.
typedef struct gk_st_tensor {
  const char *name;
  gk_st_dtype dtype;
  int rank;                       // 0 .. GK_MAX_RANK
  int64_t shape[GK_MAX_RANK];
  const void *data;
  size_t nbytes;                  // product of shape x element size
} gk_st_tensor;

// One metadata entry: both strings UTF-8.
typedef struct gk_st_meta {
  const char *key;
  const char *value;
} gk_st_meta;

// Write `tensors` and `meta` to `path` atomically (see gk_nn_write_atomic:
// temporary file, fsync, rename, fsync of the directory); on failure an
// existing file at `path` is left untouched. Names must be non-empty, valid
// UTF-8, unique and not "__metadata__"; metadata keys unique, keys and values
// valid UTF-8. With nmeta == 0 no "__metadata__" entry is written.
gk_status gk_st_save(const char *path, const gk_st_tensor *tensors, size_t ntensors, const gk_st_meta *meta,
                     size_t nmeta);

// Checksums. gk_st_save_checksummed writes one more metadata entry per
// tensor: key "crc32:<tensor name>", value the CRC-32 of the tensor's bytes
// (as zlib's crc32 computes it) in 8 lowercase hex digits. A flipped bit in
// the data then shows as a mismatch when gk_st_verify_checksums checks the
// file.
uint32_t gk_st_crc32(uint32_t crc, const void *data, size_t n);  // crc: 0, or the CRC so far
gk_status gk_st_save_checksummed(const char *path, const gk_st_tensor *tensors, size_t ntensors,
                                 const gk_st_meta *meta, size_t nmeta);

// A loaded, validated file.
typedef struct gk_st_file gk_st_file;

// Read and validate the file at `path`. On failure *file is NULL and the
// message names the file and what is wrong with it.
gk_status gk_st_load(const char *path, gk_st_file **file);
// The same from bytes in memory (copied); `what` names them in messages.
gk_status gk_st_parse(const void *bytes, size_t size, const char *what, gk_st_file **file);
// Free everything of a loaded file (NULL is allowed).
void gk_st_close(gk_st_file *file);

// Tensors in the order of their data offsets: i in [0, gk_st_num_tensors).
size_t gk_st_num_tensors(const gk_st_file *file);
const gk_st_tensor *gk_st_tensor_at(const gk_st_file *file, size_t i);
// The tensor called `name`, or NULL when the file has none.
const gk_st_tensor *gk_st_lookup(const gk_st_file *file, const char *name);
// Copy tensor `name` into dst after checking that it exists and has exactly
// this dtype and shape; the message names the tensor and both shapes when
// not (e.g. a checkpoint of another configuration).
gk_status gk_st_read(const gk_st_file *file, const char *name, gk_st_dtype dtype, int rank, const int64_t *shape,
                     void *dst);

// Check every "crc32:" entry of a loaded file against its tensor's bytes.
// *checked: how many tensors have one. Errors, naming the file and tensor: a
// mismatch, a value that is not 8 hex digits, an entry for a tensor the file
// lacks, and a file where some tensors have a checksum and others not. A file
// with no checksums at all (*checked 0) is not an error: the caller decides.
gk_status gk_st_verify_checksums(const gk_st_file *file, size_t *checked);

// Metadata entries sorted by key: i in [0, gk_st_num_metadata).
size_t gk_st_num_metadata(const gk_st_file *file);
const gk_st_meta *gk_st_metadata_at(const gk_st_file *file, size_t i);
// The value of metadata `key`, or NULL when the file has none.
const char *gk_st_metadata(const gk_st_file *file, const char *key);
// The value of metadata `key`; an error naming the file and key when absent.
gk_status gk_st_get_metadata(const gk_st_file *file, const char *key, const char **value);

#endif
