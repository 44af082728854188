"""The driver's Spark session (any master), its file system (Hadoop: local, hdfs://, s3a://), and
what the executors are shipped.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

from kraftlog.common import METADATA_PARTITION_DIR
from kraftlog.spark._types import SnapshotRebuildError, require_pyspark

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
    environment: str = "auto",
) -> Any:
    """A SparkSession for the job (the CLI's and the benchmark's; tests bring their own).

    ``quiet``: the driver JVM logs errors only (unless ``conf`` sets its own
    ``spark.driver.extraJavaOptions``). An already running session is returned as it is.

    ``environment`` says how executors of a non-local master get kraftlog's Python dependencies:
    ``auto`` packs this virtual environment (`environment_archive`) and ships it with
    ``spark.archives``, a path ships that packed environment (venv-pack or conda-pack), ``none``
    ships nothing (the executors' Python has them). ``auto`` steps back when the caller chose
    already: ``spark.archives`` in ``conf`` or ``PYSPARK_PYTHON`` set. kraftlog's own code always
    travels as a zip (`_metadata_package_zip`).
    """
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
    conf = dict(conf or {})
    if master.startswith("local"):
        # The executors are this process's JVM: run their Python workers with this interpreter (the
        # venv that has msgpack and crc32c), not whatever `python3` is first on PATH.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    elif environment != "none" and not (
        environment == "auto" and ("spark.archives" in conf or "PYSPARK_PYTHON" in os.environ)
    ):
        archive = environment_archive() if environment == "auto" else Path(environment)
        if not archive.is_file():
            raise SnapshotRebuildError(f"--environment-archive {archive}: no such file")
        conf["spark.archives"] = ",".join(
            filter(None, [conf.get("spark.archives"), f"{archive.resolve()}#{ENVIRONMENT_ALIAS}"])
        )
        # read when the context starts: the executors' Python workers run from the unpacked archive
        os.environ["PYSPARK_PYTHON"] = f"./{ENVIRONMENT_ALIAS}/bin/python"
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**defaults, **conf}.items():
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
        return str(fs.makeQualified(p).toString())


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
            for f in sorted(pkg.rglob("*.py")):  # with the sub-packages (common.errors, metadata_log.image, ...)
                zf.write(f, f"kraftlog/{name}/{f.relative_to(pkg).as_posix()}")
    return target


#: where executors find the shipped environment: ``spark.archives`` unpacks it under this name in
#: each executor's working directory
ENVIRONMENT_ALIAS = "kraftlog_env"

# What the executors import (their modules' top-level packages), measured in a fresh interpreter.
_EXECUTOR_IMPORTS = (
    "import sys, kraftlog.spark._decode, kraftlog.spark._fold, kraftlog.spark._types;"
    "print('\\n'.join(sorted({m.split('.')[0] for m in sys.modules})))"
)


def _executor_distributions() -> list[importlib.metadata.Distribution]:
    """The installed distributions the executors' code imports (kraftlog itself excluded: it is
    shipped as a zip, see `_metadata_package_zip`)."""
    out = subprocess.run([sys.executable, "-c", _EXECUTOR_IMPORTS], capture_output=True, text=True, check=True)
    by_module = importlib.metadata.packages_distributions()
    names = {dist for module in out.stdout.split() for dist in by_module.get(module, ())}
    names.discard("kraftlog")
    return [importlib.metadata.distribution(name) for name in sorted(names)]


def environment_archive(cache_dir: Path | None = None) -> Path:
    """This interpreter's virtual environment, packed for executors (Spark's documented way to ship
    Python dependencies: ``spark.archives`` with a venv-pack archive).

    Only what the executors import goes in (msgpack, crc32c, structlog, ...): not pyspark, whose
    workers come from the executors' own Spark, nor the tools of a dev install. The archive is cached
    under a name derived from the interpreter and those distributions' versions, so a second rebuild
    reuses it. Raises `SnapshotRebuildError` outside a virtual environment.
    """
    if sys.prefix == sys.base_prefix:
        raise SnapshotRebuildError(
            "shipping the Python environment to the executors needs a virtual environment; "
            "pass --environment-archive FILE (a packed environment) or none (executors have kraftlog's dependencies)"
        )
    import venv_pack

    prefix = Path(sys.prefix)
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    dists = _executor_distributions()
    key = hashlib.sha256(
        "\n".join([sys.version, str(prefix), *(f"{d.metadata['Name']}=={d.version}" for d in dists)]).encode()
    ).hexdigest()[:16]
    cache = cache_dir or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kraftlog"
    target = cache / f"spark-executor-env-{key}.tar.gz"
    if target.exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    filters = [("exclude", "*"), ("include", "pyvenv.cfg"), ("include", "bin/python*")]
    for dist in dists:
        for file in dist.files or ():
            path = (site / file).resolve()
            if path.is_relative_to(prefix.resolve()) and not path.suffix == ".pyc":
                filters.append(("include", str(path.relative_to(prefix.resolve()))))
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp.tar.gz")
    venv_pack.pack(prefix=str(prefix), output=str(tmp), filters=filters, force=True, compress_level=1)
    os.replace(tmp, target)
    return target
