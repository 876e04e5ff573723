"""Kafka's command-line tools, many runs in one JVM (java/src/main/java/dev/kipcheck/kafka/ToolRunner.java).

    with KafkaTools("4.2", work_dir / "tools.log") as tools:
        run = tools.run("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap, "--list")
        run.exit, run.out, run.err        # what the tool printed and its exit status, as if it had run alone

`kipcheck kafka run-class` runs one tool in a JVM of its own, as a user does; this runs each tool's main in a
JVM kept between runs, a second where `run-class` takes one to start (the tests compare the two).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kipcheck.oracle.kafka.line_program import LineProgram
from kipcheck.oracle.kafka.runtime import LOG4J_CONFIG

PROGRAM = "dev.kipcheck.kafka.ToolRunner"
RUN_TIMEOUT_S = 120.0
# Log4j's console appender follows System.err as ToolRunner swaps it, so a tool's logged errors are its own.
TOOLS_LOG4J_CONFIG = LOG4J_CONFIG + "appender.console.follow = true\n"


@dataclass(frozen=True)
class ToolRun:
    exit: int
    out: str
    err: str


class KafkaTools:
    def __init__(self, line: str, log_path: Path):
        self.program = LineProgram(PROGRAM, [], line, log_path, TOOLS_LOG4J_CONFIG)

    def __enter__(self) -> "KafkaTools":
        return self

    def __exit__(self, *exc) -> None:
        self.program.stop()

    def run(self, main_class: str, *arguments: str) -> ToolRun:
        if any("\t" in word or "\n" in word for word in (main_class, *arguments)):
            raise ValueError(f"a tool's arguments hold no tab or newline: {arguments}")
        answer = self.program.ask("\t".join((main_class, *arguments)), RUN_TIMEOUT_S)
        return ToolRun(answer["exit"], answer["out"], answer["err"])
