// The gradkern command.
//   gradkern train ...       train a language model (tools/train.c)
//   gradkern sample ...      generate from a text model (tools/sample.c)
//   gradkern bench ...       op timings against the machine's limits (tools/bench.c)
//   gradkern info [--json]   every op x direction x dtype x backend: the
//                            kernel selected and its precision guarantee
//   gradkern --version       the library's version
#include "bench.h"
#include "gradkern.h"
#include "train.h"

#include <stdio.h>
#include <string.h>

static const char *usage =
    "usage: gradkern <command> [options]\n"
    "\n"
    "commands:\n"
    "  train [options] train a Mamba or LLaMA language model (gradkern train --help);\n"
    "                  with no options: a small Mamba on the selective-copying task\n"
    "  sample --checkpoint FILE [options]\n"
    "                  continue a prompt with a text model trained with --task text\n"
    "                  (gradkern sample --help)\n"
    "  bench [--json] [--op NAME] [--repeat N] [--quick]\n"
    "                  time every op forward and backward, AdamW and a training\n"
    "                  step, against the triad bandwidth and OpenBLAS's sgemm\n"
    "                  measured in the same run (gradkern bench --help)\n"
    "  info [--json]   list every op x direction x dtype x backend with the kernel\n"
    "                  it selects and its precision guarantee (table, or JSON)\n"
    "  help            show this message (also --help, -h)\n"
    "  --version       print the version\n";

static const char *info_usage =
    "usage: gradkern info [--json]\n"
    "\n"
    "Lists every op x direction x dtype x backend with the kernel the plan\n"
    "selects on this machine, its instruction set, its math and accumulator,\n"
    "and whether it is deterministic; combinations without a kernel say why.\n"
    "\n"
    "  --json       one JSON array of rows instead of the table\n"
    "  --help, -h   show this message\n";

static const gk_dtype dtypes[] = {GK_F32, GK_F64, GK_F16, GK_BF16};
static const gk_backend backends[] = {GK_BACKEND_AUTO, GK_BACKEND_CPU, GK_BACKEND_REF};

// A small example description of each op for the table: {4, 8} unless the
// op needs another rank or its options set.
static void example_desc(gk_op_desc *d, gk_op op, gk_direction dir, gk_dtype dtype) {
  static const int64_t shape[2] = {4, 8}, batched[3] = {2, 4, 8}, heads[4] = {2, 4, 16, 8};
  switch (op) {
  case GK_OP_MATMUL:
    gk_op_desc_init(d, op, dir, dtype, 3, batched);
    d->matmul.n = 16;
    break;
  case GK_OP_ROPE:
  case GK_OP_ATTENTION:
    gk_op_desc_init(d, op, dir, dtype, 4, heads);
    d->attn.kv_heads = 2;
    break;
  case GK_OP_CONV1D:
  case GK_OP_SELECTIVE_SCAN: gk_op_desc_init(d, op, dir, dtype, 3, batched); break;
  default:
    gk_op_desc_init(d, op, dir, dtype, 2, shape);
    d->linear.out_features = 16;
    d->embedding.num_embeddings = 100;
    d->embedding.dim = 16;
    d->binary.b_rank = 1;
    d->binary.b_shape[0] = 8;
    break;
  }
}

static int info(int json) {
  int first = 1;
  if (json) printf("[\n");
  else
    printf("%-14s %-8s %-5s %-7s %-32s %-8s %-44s %-5s %s\n", "op", "dir", "dtype", "backend", "kernel", "isa",
           "math", "acc", "deterministic");
  for (int op = 0; op < GK_OP_COUNT_; op++)
    for (int dir = GK_FORWARD; dir <= GK_BACKWARD; dir++)
      for (size_t t = 0; t < sizeof dtypes / sizeof *dtypes; t++)
        for (size_t b = 0; b < sizeof backends / sizeof *backends; b++) {
          gk_op_desc d;
          example_desc(&d, (gk_op)op, (gk_direction)dir, dtypes[t]);
          d.backend = backends[b];
          gk_plan *plan;
          gk_plan_info pi;
          const char *dirname = dir == GK_FORWARD ? "forward" : "backward";
          if (gk_plan_create(&d, &plan) != GK_SUCCESS) {
            if (json)
              printf("%s  {\"op\": \"%s\", \"direction\": \"%s\", \"dtype\": \"%s\", \"backend\": \"%s\", "
                     "\"error\": \"%s\"}",
                     first ? "" : ",\n", gk_op_name((gk_op)op), dirname, gk_dtype_name(dtypes[t]),
                     gk_backend_name(backends[b]), gk_last_error());
            else
              printf("%-14s %-8s %-5s %-7s unavailable: %s\n", gk_op_name((gk_op)op), dirname,
                     gk_dtype_name(dtypes[t]), gk_backend_name(backends[b]), gk_last_error());
            first = 0;
            continue;
          }
          gk_plan_get_info(plan, &pi);
          if (json)
            printf("%s  {\"op\": \"%s\", \"direction\": \"%s\", \"dtype\": \"%s\", \"backend\": \"%s\", "
                   "\"kernel\": \"%s\", \"kernel_backend\": \"%s\", \"isa\": \"%s\", \"math\": \"%s\", "
                   "\"accumulator\": \"%s\", \"deterministic\": %s}",
                   first ? "" : ",\n", gk_op_name((gk_op)op), dirname, gk_dtype_name(dtypes[t]),
                   gk_backend_name(backends[b]), pi.kernel, gk_backend_name(pi.backend), pi.isa, pi.math,
                   gk_dtype_name(pi.accumulator), pi.deterministic ? "true" : "false");
          else
            printf("%-14s %-8s %-5s %-7s %-32s %-8s %-44s %-5s %s\n", gk_op_name((gk_op)op), dirname,
                   gk_dtype_name(dtypes[t]), gk_backend_name(backends[b]), pi.kernel, pi.isa, pi.math,
                   gk_dtype_name(pi.accumulator), pi.deterministic ? "yes" : "no");
          first = 0;
          gk_plan_destroy(plan);
        }
  if (json) printf("\n]\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    fputs(usage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "--version")) {
    printf("gradkern %s\n", gk_version());
    return 0;
  }
  if (!strcmp(argv[1], "train")) return gk_cmd_train(argc - 2, argv + 2);
  if (!strcmp(argv[1], "bench")) return gk_cmd_bench(argc - 2, argv + 2);
  if (!strcmp(argv[1], "sample")) return gk_cmd_sample(argc - 2, argv + 2);
  if (!strcmp(argv[1], "info")) {
    int json = 0;
    for (int i = 2; i < argc; i++) {
      if (!strcmp(argv[i], "--json")) json = 1;
      else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
        fputs(info_usage, stdout);
        return 0;
      } else {
        fprintf(stderr, "gradkern info: unknown option '%s' (see gradkern info --help)\n", argv[i]);
        return 2;
      }
    }
    return info(json);
  }
  fprintf(stderr, "gradkern: unknown command '%s' (see gradkern --help)\n", argv[1]);
  return 2;
}
