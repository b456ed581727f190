# vcpkg overlay port of strata, built from this repository's own tree (two folders up):
#   vcpkg install strata --overlay-ports=<repo>/ports
# vcpkg's binary cache hashes the port's files, not that tree: after changing strata, reinstall
# with --no-binarycaching.
# strata is header-only: one release configuration, no debug tree. The CPU library alone
# (the CUDA kernel layer and the nccl backend are built from the repository, see docs/gpu.md).
set(SOURCE_PATH "${CMAKE_CURRENT_LIST_DIR}/../..")
set(VCPKG_BUILD_TYPE release)

vcpkg_cmake_configure(
    SOURCE_PATH "${SOURCE_PATH}"
    OPTIONS
        -DSTRATA_BUILD_TESTS=OFF
        -DSTRATA_BUILD_EXAMPLES=OFF
        -DSTRATA_BUILD_BENCHMARKS=OFF
        -DSTRATA_ENABLE_CUDA=OFF
        -DSTRATA_INSTALL_CMAKEDIR=share/${PORT}
)
vcpkg_cmake_install()
vcpkg_cmake_config_fixup(CONFIG_PATH share/${PORT})
vcpkg_fixup_pkgconfig()

# strata-launch (restarts failed jobs) is a tool, not a library: vcpkg keeps tools in tools/<port>.
file(INSTALL "${CURRENT_PACKAGES_DIR}/bin/strata-launch" DESTINATION "${CURRENT_PACKAGES_DIR}/tools/${PORT}"
     FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/bin")

file(INSTALL "${CMAKE_CURRENT_LIST_DIR}/usage" DESTINATION "${CURRENT_PACKAGES_DIR}/share/${PORT}")
vcpkg_install_copyright(FILE_LIST "${SOURCE_PATH}/LICENSE")
