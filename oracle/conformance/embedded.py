"""EmbeddedBroker: the reference broker in a subprocess on a free loopback port, for scenarios and tests.

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
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
DEFAULT_LAUNCHER = (sys.executable, "-m", "kipcheck", "broker")


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
