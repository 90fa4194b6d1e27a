file(REMOVE_RECURSE
  "libgradkern_nn_args.a"
)
