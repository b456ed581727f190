# Conan 2 recipe for strata, a header-only library: `conan create . --profile:all conan/profiles/debian`
# builds it offline against Debian's Boost, fmt, OpenMPI and zlib (see that profile), and
# test_package/ builds and runs the quickstart on 2 ranks.
import os
import re

from conan import ConanFile
from conan.tools.build import check_min_cppstd
from conan.tools.files import copy, load
from conan.tools.layout import basic_layout

required_conan_version = ">=2.30"  # CMakeDeps' cmake_extra_dependencies / cmake_extra_interface_libs


class StrataConan(ConanFile):
    name = "strata"
    package_type = "header-library"
    license = "Apache-2.0"
    description = "Distributed training strategies as C++ types"
    topics = ("distributed-training", "mpi", "deep-learning", "header-only", "cpp20")
    settings = "os", "arch", "compiler", "build_type"
    # Boost is used for Hana only: no compiled Boost library is needed.
    default_options = {"boost/*:header_only": True}
    # The headers and the strata-launch script, as the top-level CMakeLists.txt installs them in
    # a build without CUDA: not the CUDA kernel layer (.cuh) nor the nccl backend. CMakeLists.txt
    # only gives the version (set_version() reads it from the source tree, at export).
    exports_sources = "include/*", "tools/strata-launch", "LICENSE", "!*.cuh", "!include/strata/comm/nccl/*"
    no_copy_source = True

    def set_version(self):
        # One version, project(strata VERSION x.y.z) in CMakeLists.txt.
        cmakelists = load(self, os.path.join(self.recipe_folder, "CMakeLists.txt"))
        self.version = re.search(r"project\(\s*strata\s+VERSION\s+([0-9.]+)", cmakelists).group(1)

    def layout(self):
        basic_layout(self)

    def requirements(self):
        # A header-library's requires are transitive (headers and libs) to its consumers by
        # default. The ranges include both Debian bookworm's versions (what strata is tested
        # with) and ConanCenter's; see conan/profiles/debian for the Debian ones.
        self.requires("boost/[>=1.74 <2]")         # Boost.Hana
        self.requires("fmt/[>=9.1 <10]")            # tested with 9.1 only
        self.requires("nlohmann_json/[>=3.11 <4]")  # timelines and calibration files (JSON)
        self.requires("openmpi/[>=4.1 <6]")         # MPI's C API: launcher and CPU transport
        self.requires("zlib/[>=1.2.11 <2]")         # CRC-32 of checkpoint files

    def validate(self):
        check_min_cppstd(self, 20)

    def package_id(self):
        self.info.clear()

    # No build step: there is nothing to compile, and packaging needs no dependency. (Configuring
    # the project and running `cmake --install` through CMake's helper works against Debian's
    # packages, but needs every dependency's CMake files at packaging time, and ConanCenter's
    # openmpi has no MPI::MPI_CXX target, which the project's CMakeLists.txt links, unless it is
    # built with the deprecated C++ bindings.) What is copied here is what `cmake --install`
    # installs without CUDA, less the project's own config and .pc files (Conan's generators
    # write those): include/strata/**/*.hpp and *.ipp but include/strata/comm/nccl/, and bin/strata-launch.
    def package(self):
        for headers in ("*.hpp", "*.ipp"):  # *.ipp: the definitions a header-only build includes
            copy(self, headers, src=os.path.join(self.source_folder, "include"),
                 dst=os.path.join(self.package_folder, "include"), excludes=("strata/comm/nccl/*",))
        copy(self, "strata-launch", src=os.path.join(self.source_folder, "tools"),
             dst=os.path.join(self.package_folder, "bin"))
        copy(self, "LICENSE", src=self.source_folder, dst=os.path.join(self.package_folder, "licenses"))

    def package_info(self):
        self.cpp_info.set_property("cmake_file_name", "strata")
        self.cpp_info.set_property("cmake_target_name", "strata::strata")
        self.cpp_info.set_property("pkg_config_name", "strata")
        self.cpp_info.bindirs = ["bin"]  # strata-launch
        self.cpp_info.libdirs = []
        if self.settings.os in ("Linux", "FreeBSD"):
            self.cpp_info.system_libs = ["pthread"]  # Threads::Threads
        # C++20 reaches consumers through compiler.cppstd (validate() refuses less), not through
        # a -std flag here, which would fight the one the consumer's toolchain sets.

        # Conan packages: Boost.Hana's headers, libfmt, MPI's C API (ConanCenter's openmpi names
        # its MPI::MPI_CXX component only with the deprecated C++ bindings), zlib.
        self.cpp_info.requires = ["boost::headers", "fmt::fmt", "nlohmann_json::nlohmann_json", "openmpi::ompi-c", "zlib::zlib"]

        # A dependency that the profile's [platform_requires] takes from the system is in the
        # graph, with no package and an empty cpp_info: CMakeDeps writes no config file for it,
        # and drops it from strata::strata's links (the requires above are accepted, and
        # ignored, because strata has no components: with components CMakeDeps rejects them,
        # conan-io/docs#3908). For each such dependency, the generated strata-config.cmake finds
        # the system's own CMake package and links its target instead, as the project's own
        # strataConfig.cmake does: CMakeDeps' cmake_extra_dependencies (find_dependency()
        # calls) and cmake_extra_interface_libs (targets linked) properties.
        system_cmake = {"boost": ("Boost", "Boost::headers"), "fmt": ("fmt", "fmt::fmt"),
                        "nlohmann_json": ("nlohmann_json", "nlohmann_json::nlohmann_json"),
                        "openmpi": ("MPI", "MPI::MPI_CXX"), "zlib": ("ZLIB", "ZLIB::ZLIB")}
        conan_packages = self.dependencies.filter({"build": False, "direct": True})  # platform ones left out
        from_system = [system_cmake[name] for name in system_cmake if name not in conan_packages]
        if from_system:
            self.cpp_info.set_property("cmake_extra_dependencies", [package for package, _ in from_system])
            self.cpp_info.set_property("cmake_extra_interface_libs", [target for _, target in from_system])
