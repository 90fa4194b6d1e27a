// Tensor construction and the DLPack mapping: every dtype and device maps
// both ways, strides and byte offsets are kept.
#include "harness.h"

int main(void) {
  float buf[64];
  int64_t shape[3] = {2, 3, 4};
  gk_tensor t;
  check(gk_tensor_init(&t, buf, GK_F32, 3, shape) == GK_SUCCESS, "init: %s", gk_last_error());
  check(t.strides[0] == 12 && t.strides[1] == 4 && t.strides[2] == 1, "row-major strides");
  check(gk_tensor_numel(&t) == 24, "numel");
  int64_t scalar_shape[1] = {0};
  check(gk_tensor_init(&t, buf, GK_F64, 0, scalar_shape) == GK_SUCCESS && gk_tensor_numel(&t) == 1, "rank 0");

  static const gk_dtype dtypes[] = {GK_F32, GK_F64, GK_F16, GK_BF16, GK_I32, GK_I64};
  for (size_t i = 0; i < sizeof dtypes / sizeof *dtypes; i++)
    for (int dev = GK_DEVICE_CPU; dev <= GK_DEVICE_CUDA; dev++) {
      gk_tensor src, back;
      gk_tensor_init(&src, buf, dtypes[i], 3, shape);
      src.device = (gk_device_type)dev;
      src.device_id = dev;
      src.strides[0] = 1, src.strides[1] = 2, src.strides[2] = 6;  // a permuted view
      gk_dlpack_tensor dl;
      int64_t dl_shape[GK_MAX_RANK], dl_strides[GK_MAX_RANK];
      check(gk_tensor_to_dlpack(&src, &dl, dl_shape, dl_strides) == GK_SUCCESS, "to_dlpack: %s", gk_last_error());
      check(dl.ndim == 3 && dl.dtype.bits == 8 * gk_dtype_size(dtypes[i]) && dl.dtype.lanes == 1 &&
                dl.device.device_type == (dev ? 2 : 1) && dl.strides[2] == 6,
            "DLPack fields for %s", gk_dtype_name(dtypes[i]));
      check(gk_tensor_from_dlpack(&dl, &back) == GK_SUCCESS, "from_dlpack: %s", gk_last_error());
      check(back.dtype == src.dtype && back.device == src.device && back.device_id == src.device_id &&
                back.data == src.data && back.rank == 3 && back.strides[0] == 1 && back.strides[2] == 6 &&
                back.shape[1] == 3,
            "DLPack round trip of %s on device %d", gk_dtype_name(dtypes[i]), dev);
    }
  // Contiguous DLPack tensors (strides NULL) and a byte offset.
  gk_dlpack_tensor dl = {0};
  dl.data = buf;
  dl.device.device_type = 1;
  dl.ndim = 3;
  dl.shape = shape;
  dl.dtype.code = 2;
  dl.dtype.bits = 32;
  dl.dtype.lanes = 1;
  dl.byte_offset = 8;
  check(gk_tensor_from_dlpack(&dl, &t) == GK_SUCCESS && t.data == (void *)(buf + 2) && t.strides[0] == 12,
        "NULL strides and byte offset");
  dl.byte_offset = 6;
  check(gk_tensor_from_dlpack(&dl, &t) == GK_ERR_BAD_ALIGNMENT && strstr(gk_last_error(), "byte_offset = 6"),
        "byte offset that splits an element");
  return finish("test_tensor");
}
