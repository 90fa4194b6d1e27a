# Empty dependencies file for test_concurrency.
# This may be replaced when dependencies are built.
