# `conan create` builds the repository's quickstart (examples/quickstart/main.cpp) against the
# created package and runs it on 2 ranks; it fails when the model did not fit.
import os

from conan import ConanFile
from conan.tools.build import can_run
from conan.tools.cmake import CMake, cmake_layout


class StrataTestConan(ConanFile):
    settings = "os", "arch", "compiler", "build_type"
    generators = "CMakeDeps", "CMakeToolchain"

    def requirements(self):
        self.requires(self.tested_reference_str)

    def layout(self):
        cmake_layout(self)

    def build(self):
        cmake = CMake(self)
        cmake.configure()
        cmake.build()

    def test(self):
        if not can_run(self):
            return
        program = os.path.join(self.cpp.build.bindir, "quickstart")
        flags = "--oversubscribe --bind-to none"
        if os.geteuid() == 0:  # OpenMPI refuses to run as root unless told
            flags += " --allow-run-as-root"
        # self.run raises when mpirun exits non-zero: the quickstart exits 1 when it did not fit.
        self.run(f"mpirun -np 2 {flags} {program}", env="conanrun")
