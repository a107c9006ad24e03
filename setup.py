"""What pyproject.toml cannot say declaratively: the packages with the schema mapped in, and the
optional C accelerator for search pages; everything else is declared in pyproject.toml.

- Every `gateway*` package is found (new subpackages need no edit here), and the top-level
  `migrations/` folder ships inside the package as `gateway/migrations/` (which files of it and
  of the other packages ship: pyproject.toml's package-data; gateway/store/migrations.py reads
  them with importlib.resources).
- The C page scanner is built when a C compiler is present; without one the gateway runs its
  pure-Python path. Its sources go into the sdist (MANIFEST.in), not into wheels.
"""

from pathlib import Path

from setuptools import Extension, find_packages, setup

setup(
    packages=[*find_packages(include=["gateway", "gateway.*"]), "gateway.migrations"],
    package_dir={"gateway.migrations": "migrations"},
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
    ],
)
