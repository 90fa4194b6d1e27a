// The gradkern command.
//   gradkern train ...       train a language model (tools/train.c)
//   gradkern sample ...      generate from a text model (tools/sample.c)
//   gradkern tokenize ...    text to BPE token ids and back (tools/tokenize.c)
//   gradkern bench ...       op timings against the machine's or the device's limits (tools/bench.c)
//   gradkern plot ...        series from files to an SVG plot (tools/plot_cmd.c)
//   gradkern info [--json]   the registered backends; every op x direction x
//                            dtype x backend: the kernel selected, its
//                            precision guarantee and the kernels that declined
//   gradkern --version       the library's version
#include "bench.h"
#include "gradkern.h"
#include "plot_cmd.h"
#include "tokenize.h"
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
    "                  (or --model DIR: a Hugging Face Mamba or LLaMA model directory)\n"
    "                  (gradkern sample --help)\n"
    "  tokenize --tokenizer PATH [--decode]\n"
    "                  text on standard input to BPE token ids, or back\n"
    "                  (gradkern tokenize --help)\n"
    "  plot --out FILE.svg LABEL=FILE ...\n"
    "                  line plots of x y tables as SVG (gradkern plot --help)\n"
    "  bench [--device cpu|vulkan] [--json] [--op NAME] [--repeat N] [--quick]\n"
    "                  time every op forward and backward, AdamW and a training\n"
    "                  step, against the triad bandwidth and OpenBLAS's sgemm\n"
    "                  measured in the same run, or on the Vulkan device against\n"
    "                  its copy bandwidth (gradkern bench --help)\n"
    "  info [--json]   list the registered backends, and every op x direction x\n"
    "                  dtype x backend with the kernel it selects and its precision\n"
    "                  guarantee (table, or JSON)\n"
    "  help            show this message (also --help, -h)\n"
    "  --version       print the version\n";

static const char *info_usage =
    "usage: gradkern info [--json]\n"
    "\n"
    "Lists the registered backends (in the order auto tries them; one whose\n"
    "device is absent says why), then every op x direction x dtype x backend\n"
    "with the kernel the plan selects on this machine, its instruction set, its\n"
    "math and accumulator, whether it is deterministic, and the kernels tried\n"
    "first that declined it; combinations without a kernel say why.\n"
    "\n"
    "  --json       one JSON object {\"backends\": [...], \"plans\": [...]}\n"
    "  --help, -h   show this message\n";

static const gk_dtype dtypes[] = {GK_F32, GK_F64, GK_F16, GK_BF16};

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

// A JSON string body: quotes and backslashes escaped (messages quote names).
static void json_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') putchar('\\');
    putchar(*s);
  }
  putchar('"');
}

// The registered backends, then each op x direction x dtype x backend choice
// (auto and every registered backend): the kernel selected, or why none.
static int info(int json) {
  int nb = gk_backend_count();
  gk_backend choices[1 + 16] = {GK_BACKEND_AUTO};
  int nchoices = 1;
  if (json) printf("{\n\"backends\": [\n");
  else printf("backends, in the order auto tries them:\n");
  for (int i = 0; i < nb; i++) {
    gk_backend_info bi;
    gk_backend_get(i, &bi);
    if (nchoices < (int)(sizeof choices / sizeof *choices)) choices[nchoices++] = bi.id;
    if (json) {
      printf("%s  {\"name\": \"%s\", \"id\": %d, \"device\": %d, \"available\": %s, \"reason\": ", i ? ",\n" : "",
             bi.name, (int)bi.id, (int)bi.device, bi.available ? "true" : "false");
      json_string(bi.reason);
      printf(", \"device_description\": ");
      json_string(gk_backend_device_description(bi.id));
      printf("}");
    } else {
      printf("  %-6s device %d  %s%s\n", bi.name, (int)bi.device, bi.available ? "available" : "unavailable: ",
             bi.reason);
      if (*gk_backend_device_description(bi.id)) printf("         %s\n", gk_backend_device_description(bi.id));
    }
  }
  if (json) printf("\n],\n\"plans\": [\n");
  else
    printf("\n%-14s %-8s %-5s %-7s %-32s %-10s %-44s %-5s %-13s %s\n", "op", "dir", "dtype", "backend", "kernel", "isa",
           "math", "acc", "deterministic", "declined");
  int first = 1;
  for (int op = 0; op < GK_OP_COUNT_; op++)
    for (int dir = GK_FORWARD; dir <= GK_BACKWARD; dir++)
      for (size_t t = 0; t < sizeof dtypes / sizeof *dtypes; t++)
        for (int b = 0; b < nchoices; b++) {
          gk_op_desc d;
          example_desc(&d, (gk_op)op, (gk_direction)dir, dtypes[t]);
          d.backend = choices[b];
          gk_plan *plan;
          gk_plan_info pi;
          const char *dirname = dir == GK_FORWARD ? "forward" : "backward";
          if (json)
            printf("%s  {\"op\": \"%s\", \"direction\": \"%s\", \"dtype\": \"%s\", \"backend\": \"%s\", ",
                   first ? "" : ",\n", gk_op_name((gk_op)op), dirname, gk_dtype_name(dtypes[t]),
                   gk_backend_name(choices[b]));
          first = 0;
          if (gk_plan_create(&d, &plan) != GK_SUCCESS) {
            if (json) {
              printf("\"error\": ");
              json_string(gk_last_error());
              printf("}");
            } else
              printf("%-14s %-8s %-5s %-7s unavailable: %s\n", gk_op_name((gk_op)op), dirname,
                     gk_dtype_name(dtypes[t]), gk_backend_name(choices[b]), gk_last_error());
            continue;
          }
          gk_plan_get_info(plan, &pi);
          if (json) {
            printf("\"kernel\": \"%s\", \"kernel_backend\": \"%s\", \"isa\": \"%s\", \"math\": \"%s\", "
                   "\"accumulator\": \"%s\", \"deterministic\": %s, \"declined\": ",
                   pi.kernel, gk_backend_name(pi.backend), pi.isa, pi.math, gk_dtype_name(pi.accumulator),
                   pi.deterministic ? "true" : "false");
            json_string(pi.declined);
            printf("}");
          } else
            printf("%-14s %-8s %-5s %-7s %-32s %-10s %-44s %-5s %-13s %s\n", gk_op_name((gk_op)op), dirname,
                   gk_dtype_name(dtypes[t]), gk_backend_name(choices[b]), pi.kernel, pi.isa, pi.math,
                   gk_dtype_name(pi.accumulator), pi.deterministic ? "yes" : "no", pi.declined[0] ? pi.declined : "-");
          gk_plan_destroy(plan);
        }
  if (json) printf("\n]\n}\n");
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
  if (!strcmp(argv[1], "tokenize")) return gk_cmd_tokenize(argc - 2, argv + 2);
  if (!strcmp(argv[1], "plot")) return gk_cmd_plot(argc - 2, argv + 2);
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
