"""LineProgram: one of kipcheck's Java programs kept running, asked one line at a time, answering a JSON line each.

    program = LineProgram("dev.kipcheck.kafka.ToolRunner", [], line="4.2", log_path=work_dir / "tools.log")
    answer = program.ask("org.apache.kafka.tools.TopicCommand\t--list", timeout_s=60)   # a dict
    program.stop()        # end of input, then wait (kill -9 if it does not end); program.kill(): kill -9 now

The JVM's standard error goes to `log_path`; a program that does not answer in time is killed, one that exits
is reported with the end of its log (LineProgramFailed). KafkaUnavailable (runtime.py) when Java, Maven or the
jars are missing.
"""

from __future__ import annotations

import json
import select
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from kipcheck.oracle.kafka.runtime import LOG4J_CONFIG, KafkaRuntime

HEAP_MB = 256
STOP_TIMEOUT_S = 60.0
JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k")  # starts fast, holds little


class LineProgramFailed(RuntimeError):
    """The program did not answer in time, or exited; the message ends with its log."""


class LineProgram:
    def __init__(self, program: str, arguments: list[str], line: str, log_path: Path,
                 log4j_config: str = LOG4J_CONFIG):
        runtime = KafkaRuntime.resolve(line)
        self.program, self.line = program, line
        self.log_path = Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._config_dir = tempfile.TemporaryDirectory(prefix="kipcheck-java-")
        log4j = Path(self._config_dir.name) / "log4j2.properties"
        log4j.write_text(log4j_config)
        command = runtime.java_command(program, arguments, HEAP_MB, log4j, JVM_OPTIONS, programs=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)

    def ask(self, line: str, timeout_s: float) -> dict[str, Any]:
        """Send one line; the JSON object it is answered with."""
        if "\n" in line:
            raise ValueError(f"one line at a time, not {line!r}")
        if self.process.poll() is not None:
            raise LineProgramFailed(f"{self.program} has exited ({self.process.returncode}){self.log_tail()}")
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()
        waiting = select.poll()
        waiting.register(self.process.stdout, select.POLLIN)
        if not waiting.poll(timeout_s * 1000):
            self.kill()
            raise LineProgramFailed(f"{self.program} did not answer {line!r} within {timeout_s:.0f} s{self.log_tail()}")
        answer = self.process.stdout.readline()
        if not answer:
            self.process.wait()
            raise LineProgramFailed(f"{self.program} exited ({self.process.returncode}) on {line!r}{self.log_tail()}")
        return json.loads(answer)

    def log_tail(self, lines: int = 15) -> str:
        text = self.log_path.read_text(errors="replace").strip() if self.log_path.exists() else ""
        return ":\n" + "\n".join(text.splitlines()[-lines:]) if text else ""

    def stop(self, last_line: str | None = None) -> None:
        """End its input (after `last_line`, when given) and wait for it; kill -9 if it does not end."""
        if self.process.poll() is None:
            try:
                if last_line is not None:
                    self.process.stdin.write(last_line.encode() + b"\n")
                self.process.stdin.close()
                self.process.wait(STOP_TIMEOUT_S)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.kill()
        self._close()

    def kill(self) -> None:
        """SIGKILL: no goodbye (the program's connections close)."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._close()

    def _close(self) -> None:
        for pipe in (self.process.stdin, self.process.stdout):
            try:
                pipe.close()
            except BrokenPipeError:
                pass
        self._config_dir.cleanup()
