"""Builds the optional compiled codec; everything else is in pyproject.toml.

The extension is optional: without a C compiler the install still succeeds and
streamer runs its pure-Python code (same results, slower).
"""

from setuptools import Extension, setup

COMPILED = {  # module -> its C source
    "streamer.events._codec": "streamer/events/_codec.c",
}

HEADERS = ["streamer/events/_buffer.h"]  # included by the C file (and in the sdist)

setup(
    ext_modules=[
        Extension(name, [source], depends=HEADERS, optional=True, extra_compile_args=["-O2"])
        for name, source in COMPILED.items()
    ],
)
