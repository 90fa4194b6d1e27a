# Empty compiler generated dependencies file for scan_timing.
# This may be replaced when dependencies are built.
