# Empty dependencies file for gradkern_cli.
# This may be replaced when dependencies are built.
