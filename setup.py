"""The one thing pyproject.toml cannot say without an experimental table: the compiled records scan.

storage/_cscan.c (issue 12 §3) is optional: where no C compiler is at hand the install goes on and
kraftlog.storage._scan runs its pure-Python scan, slower but with the same checks. Everything else
about the package is in pyproject.toml.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("kraftlog.storage._cscan", sources=["storage/_cscan.c"], optional=True)])
