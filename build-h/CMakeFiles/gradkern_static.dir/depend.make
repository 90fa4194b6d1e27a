# Empty dependencies file for gradkern_static.
# This may be replaced when dependencies are built.
