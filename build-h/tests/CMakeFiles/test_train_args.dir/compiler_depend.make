# Empty compiler generated dependencies file for test_train_args.
# This may be replaced when dependencies are built.
