# The Vulkan backend (src/vulkan): built when the Vulkan headers and loader
# and glslc are found. Each compute shader src/vulkan/shaders/<name>.comp is
# compiled by glslc to SPIR-V at build time, and cmake/embed_spirv.cmake
# turns the .spv files into one C file of arrays (vk_spirv.c), compiled into
# the library: nothing is compiled at run time, no file ships beside it.
# Sets GK_WITH_VULKAN, adds to GK_SOURCES (relative) and GK_BACKEND_LIBS;
# GK_VULKAN_GENERATED is the generated C file (absolute), added after the
# sources are made absolute.
find_package(Vulkan QUIET)
find_program(GK_GLSLC glslc)
if(NOT Vulkan_FOUND OR NOT GK_GLSLC)
  message(STATUS "Vulkan backend not built: Vulkan found: ${Vulkan_FOUND}, glslc: ${GK_GLSLC} "
                 "(Debian: libvulkan-dev glslc)")
  set(GK_WITH_VULKAN OFF)
  return()
endif()
set(GK_WITH_VULKAN ON)
list(APPEND GK_SOURCES src/vulkan/device.c src/vulkan/kernels.c)
list(APPEND GK_BACKEND_LIBS ${Vulkan_LIBRARY})

file(GLOB GK_VULKAN_SHADERS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/vulkan/shaders/*.comp)
file(GLOB GK_VULKAN_SHADER_INCLUDES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/vulkan/shaders/*.glsl)
set(spv_dir ${PROJECT_BINARY_DIR}/vulkan_spirv)
set(spv_files)
# A shader that reduces over its workgroup (workgroup_sum/max of
# common.glsl) or names GK_SUBGROUPS itself (gemm.comp) is also compiled
# with -DGK_SUBGROUPS, as <name>_subgroups, which src/vulkan/device.c uses
# where the device has every subgroup operation that build declares.
foreach(src ${GK_VULKAN_SHADERS})
  get_filename_component(name ${src} NAME_WE)
  file(READ ${src} text)
  set(variants ${name})
  if(text MATCHES "workgroup_(sum|max)|GK_SUBGROUPS")
    list(APPEND variants ${name}_subgroups)
  endif()
  foreach(variant ${variants})
    set(spv ${spv_dir}/${variant}.spv)
    set(defines)
    if(variant MATCHES "_subgroups$")
      set(defines -DGK_SUBGROUPS)
    endif()
    add_custom_command(OUTPUT ${spv}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${spv_dir}
      COMMAND ${GK_GLSLC} --target-env=vulkan1.1 -O -Werror ${defines} -I ${PROJECT_SOURCE_DIR}/src/vulkan/shaders ${src} -o ${spv}
      DEPENDS ${src} ${GK_VULKAN_SHADER_INCLUDES} VERBATIM)
    list(APPEND spv_files ${spv})
  endforeach()
endforeach()
set(GK_VULKAN_GENERATED ${spv_dir}/vk_spirv.c)
add_custom_command(OUTPUT ${GK_VULKAN_GENERATED}
  COMMAND ${CMAKE_COMMAND} -DOUT=${GK_VULKAN_GENERATED} "-DSPV=${spv_files}" -P ${PROJECT_SOURCE_DIR}/cmake/embed_spirv.cmake
  DEPENDS ${spv_files} ${PROJECT_SOURCE_DIR}/cmake/embed_spirv.cmake VERBATIM)
# The one target that owns the rules; every library built from GK_SOURCES
# depends on it (the sanitizer and fuzz builds in tests/ too).
add_custom_target(gk_vulkan_spirv DEPENDS ${GK_VULKAN_GENERATED})
