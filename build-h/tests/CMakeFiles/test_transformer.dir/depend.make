# Empty dependencies file for test_transformer.
# This may be replaced when dependencies are built.
