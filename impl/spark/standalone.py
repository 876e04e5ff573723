"""A Spark standalone cluster on loopback (a master and its workers), started from the installed PySpark.

    with StandaloneCluster(directory, workers=2) as cluster:
        spark = local_session(cluster.master_url)    # spark://127.0.0.1:PORT

Each daemon is `bin/spark-class org.apache.spark.deploy.master.Master` (or
`...worker.Worker`) of the pyspark package, run as a child process of this
one on free loopback ports and stopped by its process id; logs and the
workers' directories (their executors' stdout and stderr) stay in
`directory`. The cluster is ready once the master's status page
(/json/) counts every worker alive. It exists to run what a real cluster
runs (a driver, separate executor JVMs and their Python workers) on one
machine; the Spark documentation's "Spark Standalone Mode" covers clusters
of many machines.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

from kipcheck.impl.spark.session import quiet_log4j_file, spark_environment

LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 180  # three JVMs on a loaded two-core machine
STOP_TIMEOUT_S = 30
DAEMON_MEMORY = "256m"  # the master's and workers' own heaps (SPARK_DAEMON_MEMORY); executors have their own


class ClusterFailed(RuntimeError):
    """A daemon of the cluster exited or did not become ready in time (its log is named)."""


def spark_class() -> str:
    """bin/spark-class of the installed pyspark package."""
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


class StandaloneCluster:
    """A master and `workers` workers of `cores` cores and `memory` for executors each, on loopback."""

    def __init__(self, directory: str | os.PathLike, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.directory = Path(directory)
        self.workers, self.cores, self.memory = workers, cores, memory
        self.port, self.status_port = free_port(), free_port()
        self.processes: list[tuple[subprocess.Popen, Path]] = []

    @property
    def master_url(self) -> str:
        return f"spark://{LOOPBACK}:{self.port}"

    def worker_directories(self) -> list[Path]:
        return [self.directory / f"worker-{number}" for number in range(1, self.workers + 1)]

    def start(self, timeout_s: float = START_TIMEOUT_S) -> StandaloneCluster:
        spark_environment()
        self.directory.mkdir(parents=True, exist_ok=True)
        log4j = quiet_log4j_file(str(self.directory))
        environment = {**os.environ, "SPARK_LOCAL_IP": LOOPBACK, "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
                       "SPARK_DAEMON_JAVA_OPTS": f"-Dlog4j2.configurationFile=file:{log4j}"}
        deadline = time.monotonic() + timeout_s
        try:
            self._launch("master", environment, "org.apache.spark.deploy.master.Master", "--host", LOOPBACK,
                         "--port", str(self.port), "--webui-port", str(self.status_port))
            for number, work in enumerate(self.worker_directories(), 1):
                work.mkdir(exist_ok=True)
                self._launch(f"worker-{number}", environment, "org.apache.spark.deploy.worker.Worker",
                             self.master_url, "--host", LOOPBACK, "--cores", str(self.cores),
                             "--memory", self.memory, "--webui-port", "0", "--work-dir", str(work))
            self._await_workers(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self, name: str, environment: dict[str, str], *arguments: str) -> None:
        log = self.directory / f"{name}.log"
        with log.open("wb") as output:
            process = subprocess.Popen([spark_class(), *arguments], stdout=output, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, env=environment, cwd=self.directory)
        self.processes.append((process, log))

    def alive_workers(self) -> int:
        """Workers the master counts alive (0 while its status page is not up yet)."""
        try:
            with urllib.request.urlopen(f"http://{LOOPBACK}:{self.status_port}/json/", timeout=5) as page:
                return int(json.load(page).get("aliveworkers", 0))
        except (OSError, ValueError):
            return 0

    def _await_workers(self, deadline: float) -> None:
        while self.alive_workers() < self.workers:
            for process, log in self.processes:
                if process.poll() is not None:
                    raise ClusterFailed(f"a Spark daemon exited with status {process.returncode}; see {log}")
            if time.monotonic() > deadline:
                raise ClusterFailed(f"{self.alive_workers()} of {self.workers} Spark workers registered in time; "
                                    f"see the logs in {self.directory}")
            time.sleep(0.5)

    def stop(self) -> None:
        """Stop the workers (and so their executors), then the master; kill whatever does not stop in time."""
        for process, _ in reversed(self.processes):
            process.terminate()
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes.clear()

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
