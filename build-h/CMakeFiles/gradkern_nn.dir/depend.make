# Empty dependencies file for gradkern_nn.
# This may be replaced when dependencies are built.
