# Empty compiler generated dependencies file for test_optim.
# This may be replaced when dependencies are built.
