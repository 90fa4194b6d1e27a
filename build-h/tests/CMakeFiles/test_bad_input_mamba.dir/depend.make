# Empty dependencies file for test_bad_input_mamba.
# This may be replaced when dependencies are built.
