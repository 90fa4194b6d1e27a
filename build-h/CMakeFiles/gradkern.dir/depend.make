# Empty dependencies file for gradkern.
# This may be replaced when dependencies are built.
