"""Apache Kafka's jars, fetched through Maven from the pins in java/pom.xml, and the Java that runs them.

    runtime = KafkaRuntime.resolve("4.2")     # KafkaUnavailable says why not (no Java, no Maven, no such line)
    runtime.release                           # "4.2.2": the pinned patch release of that line
    runtime.java_command("kafka.Kafka", ["server.properties"], heap_mb=512)
    runtime.java_command("dev.kipcheck.kafka.ShareGroupStateDump", [...], 256, log4j, programs=True)

The classpath Maven resolves is cached beside the pom (java/target/kafka-LINE.classpath) and resolved again
when the pom is newer or a jar it names is gone; the jars themselves stay in Maven's own repository (~/.m2).
kipcheck's own Java programs (java/src/main/java) are compiled by Maven against each line's jars into
java/target/kafka-LINE/ (programs_jar), once, and again when a source or the pom is newer than the jar.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

POM = Path(__file__).resolve().parents[2] / "java" / "pom.xml"
PROGRAM_SOURCES = POM.parent / "src" / "main" / "java"
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


def javac_binary() -> str:
    """JAVA_HOME's javac, else the one on PATH; KafkaUnavailable when only a Java runtime is installed."""
    home = os.environ.get("JAVA_HOME")
    binary = str(Path(home) / "bin" / "javac") if home else shutil.which("javac")
    if not binary or not Path(binary).exists():
        raise KafkaUnavailable("building kipcheck's Java programs (java/src) needs a JDK's javac, and only a Java "
                               "runtime was found: on Debian `apt-get install openjdk-17-jdk-headless` (`make kafka` "
                               "installs it), or set JAVA_HOME to a JDK")
    return binary


def programs_jar(line: str) -> Path:
    """kipcheck's own Java programs compiled against Apache Kafka `line`'s jars, built now if missing or stale."""
    jar = POM.parent / "target" / f"kafka-{line}" / "kipcheck-kafka-1.jar"
    newest_source = max(path.stat().st_mtime for path in [POM, *PROGRAM_SOURCES.rglob("*.java")])
    if jar.exists() and jar.stat().st_mtime >= newest_source:
        return jar
    javac_binary()
    _maven(["-P", f"kafka-{line}", "package"], f"build kipcheck's Java programs for Apache Kafka {line}")
    if not jar.exists():
        raise KafkaUnavailable(f"Maven built no {jar}")
    jar.touch()  # built from these sources, even where Maven found its jar up to date and left it alone
    return jar


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
                     jvm_options: tuple[str, ...] = (), programs: bool = False) -> list[str]:
        """The command that runs `main_class` from Kafka's jars (with `programs`, from kipcheck's own first)."""
        classpath = f"{programs_jar(self.line)}{os.pathsep}{self.classpath}" if programs else self.classpath
        return [self.java, f"-Xms{min(heap_mb, 256)}m", f"-Xmx{heap_mb}m", *jvm_options,
                f"-Dlog4j2.configurationFile={log4j_config}", "-cp", classpath, main_class, *arguments]


def _classpath(line: str) -> str:
    cached = POM.parent / "target" / f"kafka-{line}.classpath"
    if cached.exists() and cached.stat().st_mtime >= POM.stat().st_mtime:
        classpath = cached.read_text().strip()
        if classpath and all(Path(jar).exists() for jar in classpath.split(os.pathsep)):
            return classpath
    _maven(["-P", f"kafka-{line}", "dependency:build-classpath", f"-Dmdep.outputFile={cached}"],
           f"fetch Apache Kafka {line}")
    if not cached.exists():
        raise KafkaUnavailable(f"Maven wrote no {cached}")
    return cached.read_text().strip()


def _maven(arguments: list[str], purpose: str) -> None:
    """Run Maven on java/pom.xml; KafkaUnavailable, with Maven's last lines, when it fails."""
    maven = shutil.which("mvn")
    if maven is None:
        raise KafkaUnavailable(f"to {purpose} kipcheck needs Maven (`mvn`): on Debian `apt-get install maven`")
    command = [maven, "-q", "-B", "-f", str(POM), *arguments]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=MAVEN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise KafkaUnavailable(f"Maven did not {purpose} within {MAVEN_TIMEOUT_S} s") from None
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise KafkaUnavailable(f"Maven could not {purpose} ({' '.join(command)}):\n{tail}")
