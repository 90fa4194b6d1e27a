# CMake generated Testfile for 
# Source directory: /work/main
# Build directory: /work/main/build-h
# 
# This file includes the relevant testing commands required for 
# testing this directory and lists subdirectories to be tested as well.
add_test([=[example_rmsnorm]=] "/work/main/build-h/example_rmsnorm")
set_tests_properties([=[example_rmsnorm]=] PROPERTIES  _BACKTRACE_TRIPLES "/work/main/CMakeLists.txt;116;add_test;/work/main/CMakeLists.txt;0;")
subdirs("tests")
