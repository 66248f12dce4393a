"""Builds the allocsim wheel (`pip wheel .`, or scripts/build_wheel.sh): configures and builds the
allocsim command with CMake, statically linked to everything but glibc, and puts it, with
liballocsim_torch.so where the CUDA Toolkit is found, inside the Python package. The wheel's platform
tag names the newest glibc symbol version the binaries reference, so pip installs it only where it
runs. Nothing is downloaded: the build uses what is installed (scripts/setup.sh).

ALLOCSIM_WHEEL_BUILD_DIR: the CMake build folder (default build-wheel/); ALLOCSIM_CUDA: ON, OFF or
AUTO (default AUTO); ALLOCSIM_CMAKE: the cmake to run (default: cmake on the PATH).
"""
import os
import platform
import re
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools before 70.1
    from wheel.bdist_wheel import bdist_wheel

ROOT = os.path.dirname(os.path.abspath(__file__))
BUILD_DIR = os.path.abspath(os.environ.get("ALLOCSIM_WHEEL_BUILD_DIR",
                                           os.path.join(ROOT, "build-wheel")))
CMAKE = os.environ.get("ALLOCSIM_CMAKE", "cmake")


def version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        return re.search(r"project\(allocsim VERSION ([0-9.]+)", f.read()).group(1)


def built_files():
    """The binaries the CMake build made, and where each goes in the package."""
    files = [(os.path.join(BUILD_DIR, "allocsim"), os.path.join("bin", "allocsim"))]
    torch_library = os.path.join(BUILD_DIR, "liballocsim_torch.so")
    if os.path.isfile(torch_library):
        files.append((torch_library, os.path.join("lib", "liballocsim_torch.so")))
    return files


def newest_glibc(paths):
    """The highest GLIBC_x.y symbol version the files reference."""
    versions = []
    for path in paths:
        out = subprocess.run(["objdump", "-T", path], capture_output=True, text=True,
                             check=True).stdout
        versions += [tuple(map(int, v)) for v in re.findall(r"GLIBC_(\d+)\.(\d+)", out)]
    return max(versions)


class BuildWithBinary(build_py):
    """build_py, then the CMake build of the command into the package."""

    def run(self):
        super().run()
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        subprocess.run([CMAKE, "-S", ROOT, "-B", BUILD_DIR, *generator,
                        "-DCMAKE_BUILD_TYPE=Release", "-DALLOCSIM_STATIC_RUNTIME=ON",
                        "-DALLOCSIM_TESTS=OFF", "-DALLOCSIM_BENCH=OFF",
                        f"-DALLOCSIM_CUDA={os.environ.get('ALLOCSIM_CUDA', 'AUTO')}"],
                       check=True, stdout=subprocess.DEVNULL)
        targets = ["allocsim"]
        listed = subprocess.run([CMAKE, "--build", BUILD_DIR, "--target", "help"],
                                capture_output=True, text=True).stdout
        if re.search(r"\ballocsim_torch\b", listed):  # configured with the CUDA backend
            targets.append("allocsim_torch")
        subprocess.run([CMAKE, "--build", BUILD_DIR, "-j", str(os.cpu_count() or 1),
                        "--target", *targets], check=True)
        package = os.path.join(self.build_lib, "allocsim")
        for source, inside in built_files():
            target = os.path.join(package, inside)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(source, target)
            os.chmod(target, 0o755)
            subprocess.run(["strip", "-x", target], check=False)  # symbols: a third of the size


class PlatformWheel(bdist_wheel):
    """A wheel for any Python 3 (the package is pure Python over the binary) on this platform
    with this glibc or a later one."""

    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        if platform.system() != "Linux":  # macOS: the platform tag bdist_wheel names
            return ("py3", "none", super().get_tag()[2])
        major, minor = newest_glibc([source for source, _ in built_files()])
        return "py3", "none", f"manylinux_{major}_{minor}_{platform.machine()}"


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


os.makedirs(BUILD_DIR, exist_ok=True)
setup(version=version(),
      distclass=BinaryDistribution,
      cmdclass={"build_py": BuildWithBinary, "bdist_wheel": PlatformWheel},
      options={"build": {"build_base": os.path.join(BUILD_DIR, "setuptools")},
               "egg_info": {"egg_base": BUILD_DIR}})
