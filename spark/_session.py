"""The driver's Spark session (any master), its file system (Hadoop: local, hdfs://, s3a://), and
what the executors are shipped.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kraftlog.common import METADATA_PARTITION_DIR
from kraftlog.spark._types import require_pyspark

_QUIET_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
"""


def _quiet_log4j_options() -> str:
    """JVM options that make the driver log errors only (no start-up warnings on a CLI's stderr)."""
    import tempfile

    uid = os.getuid() if hasattr(os, "getuid") else 0
    path = Path(tempfile.gettempdir()) / f"kraftlog-spark-log4j2-{uid}.properties"
    if not path.exists() or path.read_text() != _QUIET_LOG4J:
        tmp = path.with_name(f"{path.name}.{os.getpid()}")
        tmp.write_text(_QUIET_LOG4J)
        os.replace(tmp, path)
    return f"-Dlog4j.configurationFile=file:{path}"


def spark_session(
    master: str = "local[*]",
    app_name: str = "kraftlog-snapshot-rebuild",
    conf: dict[str, str] | None = None,
    *,
    quiet: bool = True,
) -> Any:
    """A SparkSession for the job (the CLI's and the benchmark's; tests bring their own).

    ``quiet``: the driver JVM logs errors only (unless ``conf`` sets its own
    ``spark.driver.extraJavaOptions``). An already running session is returned as it is.
    """
    import sys

    require_pyspark()
    from pyspark.sql import SparkSession

    defaults = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": "2g",
        "spark.python.worker.reuse": "true",
    }
    if quiet:
        defaults["spark.driver.extraJavaOptions"] = _quiet_log4j_options()
    if master.startswith("local"):
        # The executors are this process's JVM: run their Python workers with this interpreter (the
        # venv that has msgpack and crc32c), not whatever `python3` is first on PATH.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**defaults, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class _Hadoop:
    """The driver's view of the input through Hadoop's FileSystem API (any scheme Spark reads)."""

    def __init__(self, sc: Any) -> None:
        self.sc = sc
        self.jvm = sc._jvm
        self.conf = sc._jsc.hadoopConfiguration()

    def _path(self, text: str) -> tuple[Any, Any]:
        p = self.jvm.org.apache.hadoop.fs.Path(text)
        return p, p.getFileSystem(self.conf)

    def list_files(self, text: str) -> list[tuple[str, str, int]]:
        """``(uri, name, size)`` of the files ``text`` names: a dir (or the dir holding
        ``__cluster_metadata-0/``), a file, or a glob."""
        p, fs = self._path(text)
        statuses = fs.globStatus(p)
        if statuses is None or len(statuses) == 0:
            raise FileNotFoundError(f"{text}: no such file or directory")
        if len(statuses) == 1 and statuses[0].isDirectory():
            d = statuses[0].getPath()
            sub = self.jvm.org.apache.hadoop.fs.Path(d, METADATA_PARTITION_DIR)
            if fs.exists(sub) and fs.getFileStatus(sub).isDirectory():
                d = sub
            statuses = fs.listStatus(d)
        out = []
        for st in statuses:
            if st.isFile():
                path = st.getPath()
                out.append((path.toString(), path.getName(), int(st.getLen())))
        return out

    def read_prefix(self, text: str, limit: int = 1 << 20) -> bytes:
        """The first bytes of a file (its snapshot header frame)."""
        p, fs = self._path(text)
        size = int(fs.getFileStatus(p).getLen())
        n = min(size, limit)
        stream = fs.open(p)
        try:
            return bytes(stream.readNBytes(n))  # byte[] comes back to Python as bytes
        finally:
            stream.close()

    def qualify(self, text: str) -> str:
        p, fs = self._path(text)
        return fs.makeQualified(p).toString()


def _metadata_package_zip(tmp_dir: Path) -> Path:
    """The code executors run, as a zip for executors that do not have kraftlog installed: the
    namespace root ``kraftlog/__init__.py``, this package, kraftlog.metadata_log and the ground floor
    they import (``kraftlog.common``), under the names they are imported by."""
    import zipfile

    import kraftlog
    import kraftlog.common
    import kraftlog.metadata_log

    packages = {
        "spark": Path(__file__).resolve().parent,
        "metadata_log": Path(kraftlog.metadata_log.__file__).resolve().parent,
        "common": Path(kraftlog.common.__file__).resolve().parent,
    }
    target = tmp_dir / "kraftlog_spark_job.zip"
    with zipfile.ZipFile(target, "w") as zf:
        zf.write(Path(kraftlog.__file__).resolve(), "kraftlog/__init__.py")
        for name, pkg in packages.items():
            for f in sorted(pkg.glob("*.py")):
                zf.write(f, f"kraftlog/{name}/{f.name}")
    return target
