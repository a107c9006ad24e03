"""The optional C accelerator for search pages; everything else is declared in pyproject.toml.

Built when a C compiler is present; without one the gateway runs its pure-Python path.
"""

from pathlib import Path

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "gateway.search._pagescan",
            sources=sorted(str(path) for path in Path("gateway/search/_pagescan_c").glob("*.c")),
            depends=sorted(str(path) for path in Path("gateway/search/_pagescan_c").glob("*.h")),
            # one optimisation unit across the files (the parser's calls into the lexer are hot)
            extra_compile_args=["-O2", "-flto", "-fvisibility=hidden"],
            extra_link_args=["-O2", "-flto"],
            optional=True,
        )
    ]
)
