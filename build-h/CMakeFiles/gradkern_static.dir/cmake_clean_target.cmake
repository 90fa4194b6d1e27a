file(REMOVE_RECURSE
  "libgradkern.a"
)
