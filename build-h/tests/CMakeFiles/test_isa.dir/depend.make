# Empty dependencies file for test_isa.
# This may be replaced when dependencies are built.
