"""Builds the optional compiled fast paths; everything else is in pyproject.toml.

The extension is optional: without a C compiler the install still succeeds and
streamer runs its pure-Python code (same results, slower).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("streamer.events._bpfast", ["streamer/events/_bpfast.c"], optional=True,
                  extra_compile_args=["-O2"]),
        Extension("streamer.events._eventfast", ["streamer/events/_eventfast.c"], optional=True,
                  extra_compile_args=["-O2"]),
        Extension("streamer.events._jsonfast", ["streamer/events/_jsonfast.c"], optional=True,
                  extra_compile_args=["-O2"]),
        Extension("streamer.monitor._yamlfast", ["streamer/monitor/_yamlfast.c"], optional=True,
                  extra_compile_args=["-O2"]),
    ],
)
