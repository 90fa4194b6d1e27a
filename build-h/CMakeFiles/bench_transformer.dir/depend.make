# Empty dependencies file for bench_transformer.
# This may be replaced when dependencies are built.
