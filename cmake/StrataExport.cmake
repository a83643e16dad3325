# Installs strata's libraries and headers and exports them as strata::core.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
install(TARGETS strata_core strata EXPORT strataTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY src/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/strata FILES_MATCHING PATTERN "*.hpp")
install(FILES ${CMAKE_BINARY_DIR}/include/strata/config.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/strata)
install(EXPORT strataTargets NAMESPACE strata:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/strata)
export(EXPORT strataTargets NAMESPACE strata:: FILE ${CMAKE_BINARY_DIR}/strataTargets.cmake)
file(WRITE ${CMAKE_BINARY_DIR}/strataConfig.cmake.in
  "@PACKAGE_INIT@\ninclude(CMakeFindDependencyMacro)\nfind_dependency(MPI)\ninclude(\"\${CMAKE_CURRENT_LIST_DIR}/strataTargets.cmake\")\n")
configure_package_config_file(${CMAKE_BINARY_DIR}/strataConfig.cmake.in ${CMAKE_BINARY_DIR}/strataConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/strata)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/strataConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/strataConfig.cmake ${CMAKE_BINARY_DIR}/strataConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/strata)
