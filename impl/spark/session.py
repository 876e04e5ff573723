"""A local SparkSession set up for the connectors: the venv's Python on the workers, Java found, quiet logs.

    spark = local_session("local[2]")      # or any master URL
    register(spark)                        # kipcheck-share and kipcheck-keyrange

PySpark starts its workers with `python3` from PATH unless PYSPARK_PYTHON
says otherwise, and they need this interpreter (pyarrow, confluent-kafka,
kipcheck). Spark needs a Java runtime: JAVA_HOME, or `java` on PATH.
"""

from __future__ import annotations

import os
import shutil
import sys

# Errors only. The repl logger at the root's level stops Spark printing "Setting default log level".
QUIET_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d %p %c: %m%n
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
logger.pyspark.name = org.apache.spark.api.python.PythonGatewayServer
logger.pyspark.level = error
"""


class JavaMissing(RuntimeError):
    """Spark needs a Java runtime (17 or later) and none was found."""


def find_java() -> str:
    """The java binary Spark will run: JAVA_HOME's, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.access(java, os.X_OK):
        raise JavaMissing("Spark needs a Java runtime (17 or later): set JAVA_HOME or put java on PATH "
                          "(Debian: apt-get install openjdk-17-jre-headless)")
    return java


def on_this_machine(master: str) -> bool:
    """Whether every executor of `master` runs here: local[...], or a cluster manager on loopback."""
    host = master.split("://", 1)[-1].split(":", 1)[0]
    return master.startswith("local") or host in ("127.0.0.1", "localhost")


def spark_environment(master: str = "local") -> None:
    """Point PySpark's workers at this interpreter and keep Spark's start-up quiet.

    The driver listens on loopback only when every executor of `master` runs on this machine: the
    executors of a cluster elsewhere connect back to it (SPARK_LOCAL_IP, when set, decides)."""
    find_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if on_this_machine(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def quiet_log4j_file(directory: str) -> str:
    path = os.path.join(directory, "kipcheck-log4j2.properties")
    os.makedirs(directory, exist_ok=True)
    with open(path, "w") as file:
        file.write(QUIET_LOG4J)
    return path


def local_session(master: str = "local[2]", app_name: str = "kipcheck", **config: str):
    """A SparkSession on `master` with the settings above (`config`: more spark.* settings)."""
    import tempfile

    from pyspark.sql import SparkSession

    spark_environment(master)
    log4j = quiet_log4j_file(os.path.join(tempfile.gettempdir(), "kipcheck-spark"))
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}"))
    for key, value in config.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def register(spark) -> None:
    """Register both connectors with `spark` (spark.read/readStream.format("kipcheck-share" / "kipcheck-keyrange"))."""
    from kipcheck.impl.spark.keyrange import KipcheckKeyRange
    from kipcheck.impl.spark.share import KipcheckShare

    spark.dataSource.register(KipcheckShare)
    spark.dataSource.register(KipcheckKeyRange)
