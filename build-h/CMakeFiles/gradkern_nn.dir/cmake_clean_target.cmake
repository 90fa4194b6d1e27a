file(REMOVE_RECURSE
  "libgradkern_nn.a"
)
