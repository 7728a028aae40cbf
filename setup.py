"""The build of the Python package sparsepush for pip (pyproject.toml): the pure-Python files of
python/sparsepush/ as the package, and its extension sparsepush._core built by the project's CMake
(target sparsepush_python; tests, benchmarks, examples and the install rules off, and warnings not
errors: a user's compiler may warn where CI's does not) in a build tree under setuptools'
build_temp (build-pip/), which a second `pip install` in the same tree reuses. The version is the
project's, read from include/sparsepush/config.hpp as CMakeLists.txt reads it. Jobs:
CMAKE_BUILD_PARALLEL_LEVEL where set, else the CPUs this process may run on."""
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def project_version():
    text = (ROOT / "include" / "sparsepush" / "config.hpp").read_text()
    parts = []
    for part in ("MAJOR", "MINOR", "PATCH"):
        m = re.search(rf"^#define SPARSEPUSH_VERSION_{part} +([0-9]+) *$", text, re.MULTILINE)
        if not m:
            raise RuntimeError(f"include/sparsepush/config.hpp lacks '#define SPARSEPUSH_VERSION_{part} <number>'")
        parts.append(m.group(1))
    return ".".join(parts)


class CMakeExtension(Extension):
    """An extension that CMake builds: no sources of setuptools' own."""

    def __init__(self, name, target):
        super().__init__(name, sources=[])
        self.target = target


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        cmake = shutil.which("cmake")
        if cmake is None:
            raise RuntimeError("building sparsepush needs CMake >= 3.20 (Debian package cmake; cmake/install-deps.sh "
                               "installs every build dependency)")
        tree = Path(self.build_temp).resolve() / "cmake"
        subprocess.run([cmake, "-S", str(ROOT), "-B", str(tree), "-DCMAKE_BUILD_TYPE=Release",
                        "-DSPARSEPUSH_BUILD_PYTHON=ON", "-DSPARSEPUSH_INSTALL=OFF", "-DSPARSEPUSH_BUILD_TESTS=OFF",
                        "-DSPARSEPUSH_BUILD_BENCH=OFF", "-DSPARSEPUSH_BUILD_EXAMPLES=OFF", "-DSPARSEPUSH_WERROR=OFF",
                        f"-DPython3_EXECUTABLE={sys.executable}"], check=True)
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(cpus or 1)
        subprocess.run([cmake, "--build", str(tree), "--target", ext.target, "-j", jobs], check=True)
        # the extension CMake wrote beside the build tree's copy of the package (python/CMakeLists.txt)
        built = tree / "python" / "sparsepush" / ("_core" + sysconfig.get_config_var("EXT_SUFFIX"))
        if not built.is_file():
            raise RuntimeError(f"CMake built no {built.name} in {built.parent}")
        dest = Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, dest)


setup(
    version=project_version(),
    ext_modules=[CMakeExtension("sparsepush._core", target="sparsepush_python")],
    cmdclass={"build_ext": CMakeBuild},
    # not ./build: that is the quick start's CMake build tree (cmake/quickstart.sh)
    options={"build": {"build_base": "build-pip"}},
    zip_safe=False,
)
