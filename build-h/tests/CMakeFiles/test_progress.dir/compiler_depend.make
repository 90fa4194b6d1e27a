# Empty compiler generated dependencies file for test_progress.
# This may be replaced when dependencies are built.
