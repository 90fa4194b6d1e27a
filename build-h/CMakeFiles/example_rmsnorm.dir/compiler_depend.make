# Empty compiler generated dependencies file for example_rmsnorm.
# This may be replaced when dependencies are built.
