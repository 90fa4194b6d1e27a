# Empty compiler generated dependencies file for test_generate.
# This may be replaced when dependencies are built.
