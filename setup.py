"""Builds the optional compiled fast paths; everything else is in pyproject.toml.

The extensions are optional: without a C compiler the install still succeeds and
streamer runs its pure-Python code (same results, slower).
"""

from setuptools import Extension, setup

COMPILED = {  # module -> its C source
    "streamer.events._bpfast": "streamer/events/_bpfast.c",
    "streamer.events._eventfast": "streamer/events/_eventfast.c",
    "streamer.events._jsonfast": "streamer/events/_jsonfast.c",
    "streamer.monitor._yamlfast": "streamer/monitor/_yamlfast.c",
}

HEADERS = ["streamer/events/_buffer.h", "streamer/events/_slots.h", "streamer/events/_typing.h"]  # shared by the C files (and in the sdist)

setup(
    ext_modules=[
        Extension(name, [source], depends=HEADERS, optional=True, extra_compile_args=["-O2"])
        for name, source in COMPILED.items()
    ],
)
