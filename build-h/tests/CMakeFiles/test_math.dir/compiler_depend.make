# Empty compiler generated dependencies file for test_math.
# This may be replaced when dependencies are built.
