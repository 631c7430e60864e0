"""Builds the extension cairn._cairn with the project's CMake (python/CMakeLists.txt), so pip
gets the same module that scripts/build.sh builds. The checkout's root is this folder's parent
(pip builds a local folder in place).

CAIRN_BUILD_DIR=<tree> reuses an existing CMake build tree (`build`, made by scripts/build.sh):
only the extension is brought up to date there, as configured. Otherwise a release tree is
configured under setuptools' build_temp (the first build compiles the client libraries: about
8 minutes on 2 cores).
"""

import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent.parent


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        if not (ROOT / "CMakeLists.txt").is_file():
            raise RuntimeError(f"cairn's CMake project is not at {ROOT}: install from a checkout")
        tree = os.environ.get("CAIRN_BUILD_DIR")
        if tree:
            tree = pathlib.Path(tree).resolve()
            if not (tree / "CMakeCache.txt").is_file():
                raise RuntimeError(f"CAIRN_BUILD_DIR={tree} is not a configured CMake tree")
        else:
            tree = pathlib.Path(self.build_temp).resolve() / "cmake"
            subprocess.run(["cmake", "-S", str(ROOT), "-B", str(tree), "-G", "Ninja",
                            "-DCMAKE_BUILD_TYPE=Release", "-DCAIRN_BUILD_TESTS=OFF",
                            "-DCAIRN_BUILD_BENCH=OFF", f"-DPython_EXECUTABLE={sys.executable}"],
                           check=True)
        subprocess.run(["cmake", "--build", str(tree), "--target", "_cairn"], check=True)
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        built = sorted((tree / "python" / "cairn").glob("_cairn*.so"))
        if not built:
            raise RuntimeError(f"the build left no _cairn*.so in {tree}/python/cairn")
        if not built[-1].name.endswith(suffix):
            raise RuntimeError(f"{built[-1]} was built for another Python than {sys.executable} "
                               f"({suffix}); configure the tree with -DPython_EXECUTABLE")
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[-1], target)


setup(ext_modules=[Extension("cairn._cairn", sources=[])], cmdclass={"build_ext": CMakeBuild})
