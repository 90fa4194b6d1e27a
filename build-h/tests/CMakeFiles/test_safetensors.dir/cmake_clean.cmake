file(REMOVE_RECURSE
  "CMakeFiles/test_safetensors.dir/test_safetensors.c.o"
  "CMakeFiles/test_safetensors.dir/test_safetensors.c.o.d"
  "test_safetensors"
  "test_safetensors.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_safetensors.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
