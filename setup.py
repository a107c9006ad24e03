"""The optional C accelerator for search pages; everything else is declared in pyproject.toml.

Built when a C compiler is present; without one the gateway runs its pure-Python path.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "gateway._pagescan",
            sources=["gateway/_pagescan.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
