# Empty compiler generated dependencies file for gradkern_nn_args.
# This may be replaced when dependencies are built.
