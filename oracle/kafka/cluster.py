"""KafkaCluster: Apache Kafka itself, in KRaft mode on loopback, started, killed -9 and restarted by kipcheck.

    with KafkaCluster("4.2", work_dir, settings={"group.share.record.lock.duration.ms": "2000"}) as kafka:
        kafka.bootstrap            # "127.0.0.1:PORT" (one address per broker, comma-separated)
        kafka.kill()               # SIGKILL every node: no flush, no goodbye
        kafka.start()              # again, on the same data and ports
    # leaving the block stops it cleanly (SIGTERM, then waits)

Node 1 is broker and controller (the quorum's only voter); with `brokers=3` nodes 2 and 3 are brokers only,
on the next ports. Share groups are on (Kafka 4.2 formats its storage with share.version=1). Internal topics
are replicated once per broker they can have, at most three, so that any layout works on one machine. The JVMs
are sized for a two-core machine (SIZING, JVM_OPTIONS). Each node logs warnings to <work dir>/node-N/kafka.log.
"""

from __future__ import annotations

import base64
import random
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

from kipcheck.impl.consumer.connection import BrokerConnection, ConnectionFailed
from kipcheck.oracle.kafka.runtime import LOG4J_CONFIG, KafkaRuntime

START_TIMEOUT_S = 120.0
PORT_ATTEMPTS = 3
STOP_TIMEOUT_S = 60.0
HEAP_MB = 512
# Two cores: few threads of each kind, and a collector that does not take both cores from the clients.
JVM_OPTIONS = ("-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:ParallelGCThreads=2", "-XX:ConcGCThreads=1",
               "-XX:CICompilerCount=2", "-Xss512k", "-Djava.awt.headless=true")
SIZING = {"num.network.threads": "2", "num.io.threads": "2", "background.threads": "2",
          "num.recovery.threads.per.data.dir": "1", "log.cleaner.threads": "1", "num.replica.fetchers": "1",
          "group.coordinator.threads": "1", "share.coordinator.threads": "1"}


class KafkaFailed(RuntimeError):
    """A node did not start or stop as asked; the message ends with its log."""


class KafkaCluster:
    def __init__(self, line: str, work_dir: Path, settings: dict[str, str] | None = None, port: int = 0,
                 brokers: int = 1, heap_mb: int = HEAP_MB):
        if not 1 <= brokers <= 9:
            raise ValueError(f"brokers must be 1 to 9, not {brokers}")
        self.runtime = KafkaRuntime.resolve(line)
        self.work_dir = Path(work_dir)
        self.settings = dict(settings or {})
        self.brokers = brokers
        self.heap_mb = heap_mb
        self.ports_chosen = not port  # by kipcheck: chosen again when another process takes one first
        self.ports = list(range(port, port + brokers)) if port else _free_ports(brokers)
        self.controller_port = _free_ports(1)[0]
        self.processes: dict[int, subprocess.Popen] = {}
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.ports)

    @property
    def release(self) -> str:
        return self.runtime.release

    def __enter__(self) -> "KafkaCluster":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def node_dir(self, node: int) -> Path:
        return self.work_dir / f"node-{node}"

    def start(self) -> None:
        """Format the nodes' storage the first time, start every node and wait until each serves clients.

        Free ports are found before Kafka binds them, so another process may take one in between: a first start
        that fails so, on ports kipcheck chose, starts again on new ones (a restart keeps its clients' addresses)."""
        for attempt in range(PORT_ATTEMPTS):
            try:
                return self._start()
            except KafkaFailed as failure:
                taken = "Address already in use" in str(failure) or any(
                    "Address already in use" in self.log_tail(node) for node in range(1, self.brokers + 1))
                if not (taken and self.ports_chosen and self.starts == 1) or attempt == PORT_ATTEMPTS - 1:
                    raise
                self.starts = 0
                self.ports, self.controller_port = _free_ports(self.brokers), _free_ports(1)[0]

    def _start(self) -> None:
        log4j = self.work_dir / "log4j2.properties"
        self.work_dir.mkdir(parents=True, exist_ok=True)
        log4j.write_text(LOG4J_CONFIG)
        cluster_id = self._cluster_id()
        for node in range(1, self.brokers + 1):
            properties = self._write_properties(node)
            if not (self.node_dir(node) / "data" / "meta.properties").exists():
                self._format(properties, cluster_id, log4j)
        self.starts += 1
        for node in range(1, self.brokers + 1):
            log = open(self.node_dir(node) / "kafka.log", "ab")
            log.write(f"--- start {self.starts}\n".encode())
            log.flush()
            command = self.runtime.java_command("kafka.Kafka", [str(self.node_dir(node) / "server.properties")],
                                                self.heap_mb, log4j, JVM_OPTIONS)
            self.processes[node] = subprocess.Popen(command, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
            log.close()
        self._wait_ready()

    def stop(self) -> None:
        """SIGTERM every node (brokers first, the controller last) and wait for each."""
        for node in sorted(self.processes, reverse=True):
            process = self.processes.pop(node)
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
                    raise KafkaFailed(f"node {node} ignored SIGTERM for {STOP_TIMEOUT_S:.0f} s\n{self.log_tail(node)}")

    def kill(self) -> None:
        """SIGKILL every node: the crash a durable broker must survive."""
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
        for process in self.processes.values():
            process.wait()
        self.processes.clear()

    def restart(self) -> None:
        self.kill()
        self.start()

    def alive(self) -> bool:
        return bool(self.processes) and all(process.poll() is None for process in self.processes.values())

    def memory_bytes(self, field: str = "VmRSS") -> int:
        """Resident memory of every node together, now (VmRSS) or at its peak (VmHWM); Linux only."""
        total = 0
        for process in self.processes.values():
            status = Path(f"/proc/{process.pid}/status").read_text()
            total += int(next(line.split()[1] for line in status.splitlines() if line.startswith(f"{field}:"))) * 1024
        return total

    def log_tail(self, node: int = 1, lines: int = 40) -> str:
        path = self.node_dir(node) / "kafka.log"
        if not path.exists():
            return "(no log)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    # -- set-up ---------------------------------------------------------------------------------

    def _cluster_id(self) -> str:
        path = self.work_dir / "cluster.id"
        if not path.exists():
            # Kafka's cluster ids are 16 random bytes in URL-safe base64 without padding (Uuid.randomUuid), never
            # starting with "-", which its command-line tools would read as an option.
            cluster_id = "-"
            while cluster_id.startswith("-"):
                cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            path.write_text(cluster_id)
        return path.read_text().strip()

    def _write_properties(self, node: int) -> Path:
        directory = self.node_dir(node)
        directory.mkdir(parents=True, exist_ok=True)
        port = self.ports[node - 1]
        replicas = str(min(self.brokers, 3))
        properties = {
            "node.id": str(node),
            "process.roles": "broker,controller" if node == 1 else "broker",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "controller.listener.names": "CONTROLLER",
            "listeners": f"PLAINTEXT://127.0.0.1:{port}" + (
                f",CONTROLLER://127.0.0.1:{self.controller_port}" if node == 1 else ""),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(directory / "data"),
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            **SIZING,
            **self.settings,
        }
        path = directory / "server.properties"
        path.write_text("".join(f"{name}={value}\n" for name, value in properties.items()))
        return path

    def _format(self, properties: Path, cluster_id: str, log4j: Path) -> None:
        command = self.runtime.java_command("kafka.tools.StorageTool",
                                            ["format", "-t", cluster_id, "-c", str(properties)], 256, log4j)
        done = subprocess.run(command, capture_output=True, text=True, timeout=START_TIMEOUT_S)
        if done.returncode != 0:
            raise KafkaFailed(f"formatting {properties.parent.name} failed:\n{done.stdout}{done.stderr}")

    def _wait_ready(self) -> None:
        """Every node answers with this cluster's id (not another process that took its port) and lists every
        broker in its metadata."""
        deadline = time.monotonic() + START_TIMEOUT_S
        cluster_id = self._cluster_id()
        for node, port in enumerate(self.ports, start=1):
            while not _answers(port, lambda connection: _ready(connection, cluster_id, self.brokers)):
                self._check_running(node, deadline)

    def _check_running(self, node: int, deadline: float) -> None:
        if self.processes[node].poll() is not None:
            code = self.processes[node].returncode
            self.kill()
            raise KafkaFailed(f"node {node} exited with status {code} while starting\n{self.log_tail(node)}")
        if time.monotonic() > deadline:
            self.kill()
            raise KafkaFailed(f"node {node} did not serve clients within {START_TIMEOUT_S:.0f} s\n"
                              f"{self.log_tail(node)}")
        time.sleep(0.2)


def _ready(connection: BrokerConnection, cluster_id: str, brokers: int) -> bool:
    metadata = connection.request(3, 12, topics=[], allow_auto_topic_creation=False,
                                  include_topic_authorized_operations=False)
    return metadata.cluster_id == cluster_id and len(metadata.brokers) == brokers


def _answers(port: int, ask) -> bool:
    try:
        connection = BrokerConnection("127.0.0.1", port, "kipcheck-ready", 5_000, 10_000_000)
    except ConnectionFailed:
        return False
    try:
        return bool(ask(connection))
    except ConnectionFailed:
        return False
    finally:
        connection.close()


# Kafka is told its ports, it cannot pick them: they are chosen below Linux's ephemeral range (32768 on),
# where the clients' own connections of a busy machine cannot take them between the choice and the bind.
PORT_RANGE = (20000, 32000)


def _free_ports(count: int) -> list[int]:
    """`count` consecutive loopback ports that are free now."""
    chooser = random.Random()
    for _ in range(200):
        first = chooser.randrange(PORT_RANGE[0], PORT_RANGE[1] - count)
        if all(_free(port) for port in range(first, first + count)):
            return list(range(first, first + count))
    raise KafkaFailed(f"found no {count} consecutive free loopback ports in {PORT_RANGE[0]}..{PORT_RANGE[1]}")


def _free(port: int) -> bool:
    """Free to a server socket: one in TIME_WAIT is (Kafka binds with SO_REUSEADDR, as this probe does)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True
