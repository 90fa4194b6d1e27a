# Empty compiler generated dependencies file for test_backends.
# This may be replaced when dependencies are built.
