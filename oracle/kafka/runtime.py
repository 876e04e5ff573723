"""Apache Kafka's jars, fetched through Maven from the pins in java/pom.xml, and the Java that runs them.

    runtime = KafkaRuntime.resolve("4.2")     # KafkaUnavailable says why not (no Java, no Maven, no such line)
    runtime.release                           # "4.2.2": the pinned patch release of that line
    runtime.java_command("kafka.Kafka", ["server.properties"], heap_mb=512)

The classpath Maven resolves is cached beside the pom (java/target/kafka-LINE.classpath) and resolved again
when the pom is newer or a jar it names is gone; the jars themselves stay in Maven's own repository (~/.m2).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

POM = Path(__file__).resolve().parents[2] / "java" / "pom.xml"
MAVEN_TIMEOUT_S = 900
JAVA_MAJOR_MIN = 17
# Log4j 2's configuration for every JVM kipcheck starts: warnings and errors to stderr, which the caller keeps.
LOG4J_CONFIG = """\
status = error
appender.console.type = Console
appender.console.name = STDERR
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
"""


class KafkaUnavailable(RuntimeError):
    """Apache Kafka cannot run here; the message says what is missing and how to get it."""


def release_lines() -> dict[str, str]:
    """{"4.2": "4.2.2", ...}: each release line the pom pins (a profile kafka-LINE) and its release."""
    if not POM.exists():
        raise KafkaUnavailable(f"{POM} is missing: Apache Kafka runs from a kipcheck checkout, which has java/pom.xml")
    pins = re.findall(r"<id>kafka-([0-9.]+)</id>\s*<properties><kafka.version>([0-9.]+)</kafka.version>",
                      POM.read_text())
    return dict(pins)


def java_binary() -> str:
    """JAVA_HOME's java, else the one on PATH; KafkaUnavailable unless it is Java 17 or later."""
    home = os.environ.get("JAVA_HOME")
    binary = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not binary or not Path(binary).exists():
        raise KafkaUnavailable("Apache Kafka needs Java 17 or later: none found (set JAVA_HOME, or on Debian "
                               "`apt-get install openjdk-17-jre-headless`; `make test` installs it)")
    version = subprocess.run([binary, "-version"], capture_output=True, text=True, timeout=60).stderr
    match = re.search(r'version "(\d+)', version)
    if not match or int(match[1]) < JAVA_MAJOR_MIN:
        raise KafkaUnavailable(f"Apache Kafka needs Java {JAVA_MAJOR_MIN} or later; {binary} is {version.strip()!r}")
    return binary


@dataclass(frozen=True)
class KafkaRuntime:
    line: str       # "4.2"
    release: str    # "4.2.2"
    java: str
    classpath: str

    @classmethod
    def resolve(cls, line: str) -> "KafkaRuntime":
        lines = release_lines()
        if line not in lines:
            raise KafkaUnavailable(f"no Apache Kafka {line} is pinned in {POM} (pinned: {', '.join(sorted(lines))})")
        java = java_binary()
        return cls(line, lines[line], java, _classpath(line))

    def java_command(self, main_class: str, arguments: list[str], heap_mb: int, log4j_config: Path,
                     jvm_options: tuple[str, ...] = ()) -> list[str]:
        return [self.java, f"-Xms{min(heap_mb, 256)}m", f"-Xmx{heap_mb}m", *jvm_options,
                f"-Dlog4j2.configurationFile={log4j_config}", "-cp", self.classpath, main_class, *arguments]


def _classpath(line: str) -> str:
    cached = POM.parent / "target" / f"kafka-{line}.classpath"
    if cached.exists() and cached.stat().st_mtime >= POM.stat().st_mtime:
        classpath = cached.read_text().strip()
        if classpath and all(Path(jar).exists() for jar in classpath.split(os.pathsep)):
            return classpath
    maven = shutil.which("mvn")
    if maven is None:
        raise KafkaUnavailable("fetching Apache Kafka's jars needs Maven (`mvn`): on Debian `apt-get install maven`")
    command = [maven, "-q", "-B", "-f", str(POM), "-P", f"kafka-{line}", "dependency:build-classpath",
               f"-Dmdep.outputFile={cached}"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=MAVEN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise KafkaUnavailable(f"Maven did not fetch Apache Kafka {line} within {MAVEN_TIMEOUT_S} s") from None
    if done.returncode != 0 or not cached.exists():
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise KafkaUnavailable(f"Maven could not fetch Apache Kafka {line} ({' '.join(command)}):\n{tail}")
    return cached.read_text().strip()
