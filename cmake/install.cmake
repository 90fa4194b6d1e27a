# What `make install` (cmake --install) puts under the prefix:
#   include/gradkern.h
#   lib/libgradkern.so.MAJOR.MINOR.PATCH, its links libgradkern.so.MAJOR
#     (the SONAME) and libgradkern.so, and lib/libgradkern.a
#   bin/gradkern
#   lib/pkgconfig/gradkern.pc                    pkg-config --cflags --libs gradkern
#   lib/cmake/gradkern/gradkernConfig*.cmake     find_package(gradkern): the
#     imported targets gradkern::gradkern (shared) and gradkern::gradkern_static
# (lib is CMAKE_INSTALL_LIBDIR.) `make uninstall` removes the files the last
# install listed in install_manifest.txt (scripts/uninstall.sh).
include(CMakePackageConfigHelpers)
set(GK_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/gradkern)

install(FILES ${PROJECT_SOURCE_DIR}/include/gradkern.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS gradkern gradkern_static EXPORT gradkernTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS gradkern_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

install(EXPORT gradkernTargets NAMESPACE gradkern:: DESTINATION ${GK_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/gradkernConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/gradkernConfig.cmake INSTALL_DESTINATION ${GK_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/gradkernConfigVersion.cmake
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/gradkernConfig.cmake ${PROJECT_BINARY_DIR}/gradkernConfigVersion.cmake
        DESTINATION ${GK_CMAKE_DIR})

# gradkern.pc names the prefix installed into, known only at install time
# (cmake --install --prefix): written then, into the build tree, and installed.
set(GK_PC_LIBS_PRIVATE "")
if(GK_WITH_VULKAN)
  set(GK_PC_LIBS_PRIVATE " -lvulkan")  # the Vulkan loader, for static linking
endif()
install(CODE "
  set(GK_VERSION ${PROJECT_VERSION})
  set(GK_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR})
  set(GK_LIBDIR ${CMAKE_INSTALL_LIBDIR})
  set(GK_LIBS_PRIVATE \"${GK_PC_LIBS_PRIVATE}\")
  configure_file(${PROJECT_SOURCE_DIR}/cmake/gradkern.pc.in ${PROJECT_BINARY_DIR}/gradkern.pc @ONLY)")
install(FILES ${PROJECT_BINARY_DIR}/gradkern.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
