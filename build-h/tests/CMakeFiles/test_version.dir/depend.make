# Empty dependencies file for test_version.
# This may be replaced when dependencies are built.
