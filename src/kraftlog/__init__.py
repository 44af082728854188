"""kraftlog: a Kafka-style distributed commit log coordinated by a Raft quorum.

This file is the root of the ``kraftlog`` import namespace and nothing more. The code lives in the
repository's top-level folders (``proto/``, ``storage/``, ``broker/`` ...), which pyproject maps to
``kraftlog.proto``, ``kraftlog.storage``, ``kraftlog.broker`` ...; only this root lives under
``src/``, so that running from the repository root (where the working directory is on
``sys.path``) never finds a ``kraftlog`` folder that would shadow the installed mapping.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__: str = version("kraftlog")
except PackageNotFoundError:  # imported without the distribution's metadata (e.g. a Spark executor's zip)
    __version__ = "0+unknown"

__all__ = ["__version__"]
