"""``kraftlog snapshot rebuild --master spark://...`` on a real standalone Spark cluster: a master and
a worker started on 127.0.0.1 from the pip-installed pyspark, the driver in a ``kraftlog``
subprocess as a user runs it. The executors get kraftlog's code as a zip and its Python
dependencies as the packed virtual environment (``spark.archives``); the snapshot is byte for byte
the one ``local[*]`` writes (issue 13 §2)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _daemon(cls: str, *args: str, log: Path, work: Path) -> subprocess.Popen[bytes]:
    env = dict(
        os.environ,
        SPARK_HOME=str(_spark_home()),
        SPARK_DAEMON_MEMORY="256m",
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_WORKER_DIR=str(work),
        SPARK_LOG_DIR=str(work),
    )
    env.pop("PYSPARK_PYTHON", None)  # the executors must not inherit the test's interpreter
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(_spark_home() / "bin" / "spark-class"), cls, *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def _wait_for(log: Path, text: str, proc: subprocess.Popen[bytes], timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in log.read_text(errors="replace"):
        if proc.poll() is not None:
            raise AssertionError(f"{proc.args[1]} exited: {log.read_text(errors='replace')[-2000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(
                f"no {text!r} in {log} within {timeout_s} s: {log.read_text(errors='replace')[-2000:]}"
            )
        time.sleep(0.2)


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    work = tmp_path_factory.mktemp("spark-standalone")
    port = _free_port()
    master_url = f"spark://127.0.0.1:{port}"
    master = _daemon(
        "org.apache.spark.deploy.master.Master",
        "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(_free_port()),
        log=work / "master.log", work=work,
    )  # fmt: skip
    worker = None
    try:
        _wait_for(work / "master.log", "I have been elected leader", master)
        worker = _daemon(
            "org.apache.spark.deploy.worker.Worker",
            master_url,
            "--host", "127.0.0.1", "--cores", "2", "--memory", "2g",
            "--webui-port", str(_free_port()), "--work-dir", str(work / "work"),
            log=work / "worker.log", work=work,
        )  # fmt: skip
        _wait_for(work / "worker.log", "Successfully registered with master", worker)
        yield master_url
    finally:
        for proc in (worker, master):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def _rebuild(log_dir: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "kraftlog.cli", "snapshot", "rebuild", "--log", str(log_dir), "--out", str(out)]
    env = dict(os.environ)
    env.pop("PYSPARK_PYTHON", None)
    env["XDG_CACHE_HOME"] = str(out.parent / "cache")
    return subprocess.run([*cmd, *extra], capture_output=True, text=True, timeout=600, env=env)


def test_standalone_cluster_rebuilds_the_same_snapshot_as_local(standalone: str, small_log, tmp_path: Path) -> None:
    local = tmp_path / "local.checkpoint"
    done = _rebuild(small_log.directory, local, "--master", "local[2]")
    assert done.returncode == 0, done.stderr
    remote = tmp_path / "standalone.checkpoint"
    done = _rebuild(
        small_log.directory,
        remote,
        "--master",
        standalone,
        "--conf",
        "spark.executor.memory=768m",
        "--conf",
        "spark.cores.max=2",
    )
    assert done.returncode == 0, done.stderr
    assert remote.read_bytes() == local.read_bytes()
    # the environment went through spark.archives, packed once and cached for the next rebuild
    assert list((tmp_path / "cache" / "kraftlog").glob("spark-executor-env-*.tar.gz"))


def test_without_the_environment_executors_miss_kraftlogs_dependencies(
    standalone: str, small_log, tmp_path: Path
) -> None:
    """What a user met before the environment was shipped: the executors' own python3 lacks msgpack."""
    probe = subprocess.run(["python3", "-c", "import msgpack"], capture_output=True, env={"PATH": os.environ["PATH"]})
    if probe.returncode == 0:
        pytest.skip("this machine's python3 has msgpack: executors would not miss it")
    done = _rebuild(
        small_log.directory, tmp_path / "none.checkpoint", "--master", standalone, "--environment-archive", "none"
    )
    assert done.returncode != 0 and "msgpack" in done.stderr
