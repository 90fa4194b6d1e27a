# Empty dependencies file for model_helper.
# This may be replaced when dependencies are built.
