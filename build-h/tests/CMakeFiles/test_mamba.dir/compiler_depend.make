# Empty compiler generated dependencies file for test_mamba.
# This may be replaced when dependencies are built.
