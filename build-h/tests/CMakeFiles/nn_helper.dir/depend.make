# Empty dependencies file for nn_helper.
# This may be replaced when dependencies are built.
