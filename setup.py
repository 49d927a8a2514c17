"""Build step for the optional C fast path (project metadata: pyproject.toml).

``streamlearn/kernels/_c/cfast.c`` is compiled into ``streamlearn/kernels/_cfast_lib*.so``: a shared library
that uses no Python API and is loaded with ctypes (``streamlearn/kernels/_cfast.py``). The extension
is optional: when it cannot be compiled (no C compiler), the install still succeeds and
streamlearn uses its numba kernels. Flags: -O2 without fast-math and without FMA contraction
(-ffp-contract=off), so every floating-point operation is the one the numba kernels do.
"""
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

CFLAGS = ["-O2", "-std=c99", "-ffp-contract=off", "-fno-fast-math", "-fvisibility=hidden"]


class build_c_library(build_ext):
    """build_ext for a plain C library: no ``PyInit_`` export is required, and any failure
    (no compiler, bad flags) only skips the library."""

    def get_export_symbols(self, ext):
        return []

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as e:  # noqa: BLE001 - optional: fall back to numba at run time
            print(f"streamlearn: C fast path not built ({e}); numba kernels will be used")

    def run(self):
        try:
            super().run()
        except Exception as e:  # noqa: BLE001
            print(f"streamlearn: C fast path not built ({e}); numba kernels will be used")


setup(
    ext_modules=[Extension("streamlearn.kernels._cfast_lib", sources=["streamlearn/kernels/_c/cfast.c"],
                           depends=["streamlearn/kernels/_c/pow10.h"], extra_compile_args=CFLAGS,
                           libraries=["m"], optional=True)],
    cmdclass={"build_ext": build_c_library},
)
