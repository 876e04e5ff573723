"""The embedded target (`--target embedded`), and EmbeddedBroker: the reference broker in a subprocess on a free
loopback port, for the target, the client scenarios and tests.

    with EmbeddedBroker(work_dir, settings={"group.share.record.lock.duration.ms": "20000"}) as broker:
        broker.bootstrap          # "127.0.0.1:PORT"
        broker.kill()             # SIGKILL: no flush, no goodbye
        broker.start()            # again, same data and trace dirs
    # leaving the block stops it cleanly (SIGTERM: traces flushed, files fsync'd)

`launcher` is the argv that runs `kipcheck broker` (default: this Python,
`-m kipcheck broker`); a test can point it at a script that injects a seeded
bug before starting the same command. The broker's stdout/stderr go to
`<work dir>/broker.log`, so a failing scenario can show them. `traced=False`
runs it without a trace dir (benchmarks).

The target starts the broker with EMBEDDED_SETTINGS (the settings its traces
are judged with; --set does not change them) and --trace-state, kills -9 and
restarts it for the broker-restart probe, judges the traces the broker wrote
about itself, and runs every client scenario (each on a broker of its own).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from kipcheck.model.profiles import is_kafka
from kipcheck.oracle.conformance.targets import BrokerSettings, Target, TargetError, TargetOptions

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
DEFAULT_LAUNCHER = (sys.executable, "-m", "kipcheck", "broker")

# The embedded broker's settings: short locks and small limits, so that expiry, the delivery limit, the in-flight
# limit, the session limit and share-state snapshots are all reached within seconds. Each is within Kafka 4.2's
# ranges (spec SP-45), which the broker holds its settings to under kafka-4.2: the shortest lock Kafka allows needs
# the lowest group.share.min.record.lock.duration.ms, and the in-flight limit is Kafka's least.
EMBEDDED_SETTINGS = {
    "group.share.record.lock.duration.ms": "2000",
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.delivery.count.limit": "3",
    "group.share.partition.max.record.locks": "100",
    "group.share.max.share.sessions": "6",
    "share.coordinator.snapshot.update.records.per.snapshot": "3",
    "share.auto.offset.reset": "earliest",
    "group.share.heartbeat.interval.ms": "1000",
}

# Consumer groups that rebalance within a second, for the client scenarios that run on either target
# (scenarios/java.py; the Kafka target sets the same, KAFKA_SETTINGS).
GROUP_SETTINGS = {"group.consumer.heartbeat.interval.ms": "500", "group.initial.rebalance.delay.ms": "0"}


class BrokerFailed(RuntimeError):
    """The broker did not start or stop as asked; the message ends with its log."""


class EmbeddedBroker:
    def __init__(self, work_dir: Path, settings: dict[str, str] | None = None, profile: str = "kafka-4.2",
                 launcher: tuple[str, ...] = DEFAULT_LAUNCHER, traced: bool = True):
        self.work_dir = Path(work_dir)
        self.data_dir = self.work_dir / "data"
        self.trace_dir = self.work_dir / "traces"
        self.log_path = self.work_dir / "broker.log"
        self.settings = dict(settings or {})
        self.profile = profile
        self.launcher = tuple(launcher)
        self.traced = traced
        self.process: subprocess.Popen | None = None
        self.port = 0
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> "EmbeddedBroker":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        """Start (or restart on the same dirs and, when it had one, the same port)."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        command = [*self.launcher, "--host", "127.0.0.1", "--port", str(self.port), "--data-dir", str(self.data_dir),
                   "--profile", self.profile, "--log-level", "INFO"]
        if self.traced:
            command += ["--trace-dir", str(self.trace_dir)]
        for name, value in self.settings.items():
            command += ["--set", f"{name}={value}"]
        log = open(self.log_path, "ab")
        log.write(f"--- start {self.starts + 1}: {' '.join(command)}\n".encode())
        log.flush()
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, cwd=self.work_dir,
                                        env={**os.environ, "PYTHONUNBUFFERED": "1"})
        log.close()
        self.starts += 1
        self.port = self._wait_listening()

    def _wait_listening(self) -> int:
        deadline = time.monotonic() + START_TIMEOUT_S
        assert self.process is not None and self.process.stdout is not None
        # poll, not select: a long-lived caller (a test run) may hold descriptors past select's limit of 1024.
        waiting = select.poll()
        waiting.register(self.process.stdout, select.POLLIN)
        while (remaining := deadline - time.monotonic()) > 0:
            if not waiting.poll(remaining * 1000):
                break
            line = self.process.stdout.readline().decode(errors="replace")
            if line.startswith("listening on "):
                return int(line.rsplit(":", 1)[1])
            if not line:
                break
        self.kill()
        raise BrokerFailed(f"broker did not start within {START_TIMEOUT_S:.0f} s\n{self.log_tail()}")

    def stop(self) -> int | None:
        """SIGTERM and wait: a clean stop. Returns the exit code (None if it was not running)."""
        if self.process is None:
            return None
        process, self.process = self.process, None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                raise BrokerFailed(f"broker ignored SIGTERM for {STOP_TIMEOUT_S:.0f} s\n{self.log_tail()}")
        if process.stdout is not None:
            process.stdout.close()
        return process.returncode

    def kill(self) -> None:
        """SIGKILL: the crash a durable broker must survive."""
        if self.process is None:
            return
        process, self.process = self.process, None
        if process.poll() is None:
            process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()

    def kill_and_start(self) -> None:
        """kill -9 the broker and start it again on the same data (a scenario's broker crash)."""
        self.kill()
        self.start()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def peak_memory_bytes(self) -> int:
        """The running broker's peak resident memory (VmHWM in /proc/PID/status; Linux only)."""
        return self._memory_bytes("VmHWM")

    def reset_peak_memory(self) -> None:
        """Start VmHWM again from the current resident memory (Linux's /proc/PID/clear_refs), so a test
        measures its own peak rather than the broker's start-up."""
        assert self.process is not None, "the broker is not running"
        Path(f"/proc/{self.process.pid}/clear_refs").write_text("5")

    def memory_bytes(self) -> int:
        """The running broker's resident memory now (VmRSS; Linux only)."""
        return self._memory_bytes("VmRSS")

    def _memory_bytes(self, field: str) -> int:
        assert self.process is not None, "the broker is not running"
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        kilobytes = next(line.split()[1] for line in status.splitlines() if line.startswith(f"{field}:"))
        return int(kilobytes) * 1024

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return "(no broker log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def embedded_settings(profile: str) -> dict[str, str]:
    """EMBEDDED_SETTINGS under `profile`: Kafka refuses fewer share sessions than members of its largest share
    group (ShareGroupConfig.validate), so under a Kafka profile the group size is bounded by the session limit too."""
    if not is_kafka(profile):
        return EMBEDDED_SETTINGS
    return {**EMBEDDED_SETTINGS, "group.share.max.size": EMBEDDED_SETTINGS["group.share.max.share.sessions"]}


class EmbeddedTarget(Target):
    """The reference broker (or --launcher, a command that serves the same flags) started on a free loopback port."""

    forms = {"embedded": "the reference broker, started here on a free\n"
                         "loopback port (the default; what `make conformance` runs)"}
    can_restart = True
    client_scenarios_label = ("client scenarios (real clients: confluent-kafka's, kio's, and java-*: Apache Kafka's "
                              "own; each on a broker of its own)")
    given_by = "started with it"

    def __init__(self, text: str, options: TargetOptions):
        from kipcheck.impl.share.config import PROFILES, unserved_profile

        super().__init__(text, options)
        if self.profile not in PROFILES:  # its broker and client scenarios are the reference broker's
            raise TargetError(f"--target embedded: {unserved_profile(self.profile)}")
        self.launcher = options.launcher or DEFAULT_LAUNCHER
        self.broker_settings = embedded_settings(self.profile)
        self.given = dict(self.broker_settings)
        self.settings = BrokerSettings.from_properties(self.given, self.profile)
        self.broker: EmbeddedBroker | None = None

    def partition_trace_config(self) -> dict:
        """SP-40: the reference broker answers INVALID_RECORD_STATE where Kafka 4.2 throws, and says so in its
        traces (`straddle_npe`); the probes' traces of it say the same."""
        from kipcheck.impl.share.config import ShareConfig

        served = ShareConfig(profile=self.profile).trace_config(0)
        return {**super().partition_trace_config(),
                **{name: served[name] for name in ("straddle_npe",) if name in served}}

    def client_scenarios(self) -> list[str]:
        from kipcheck.oracle.conformance import scenarios

        return scenarios.names()

    def open(self, work_dir: Path) -> None:
        # --trace-state: the broker's own traces show its state after every step, not only at the clean stop.
        self.broker = EmbeddedBroker(work_dir / "broker", self.broker_settings, profile=self.profile,
                                     launcher=(*self.launcher, "--trace-state"))
        self.broker.start()
        self.address = ("127.0.0.1", self.broker.port)

    def restart(self) -> None:
        self.broker.kill()
        self.broker.start()
        self.address = ("127.0.0.1", self.broker.port)

    def broker_traces(self) -> list[Path]:
        """Stop the broker cleanly (its traces end with a `check` of every share-partition) and list them."""
        self.broker.stop()
        return sorted(self.broker.trace_dir.glob("*.jsonl"))

    def replay(self, scenario: str) -> str:
        extra = f" --launcher '{' '.join(self.options.launcher)}'" if self.options.launcher else ""
        return super().replay(scenario) + extra

    def close(self) -> None:
        if self.broker is not None:
            self.broker.stop()
