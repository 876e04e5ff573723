# Two commands for a newcomer (see README): `make conformance` and `make test`.
# Each sets up what it needs first (a virtualenv in .venv, Node packages for tla/, Java for Spark).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The test extra adds the test tools and the Spark connectors' packages (pyspark, pyarrow, pandas).
TEST_STAMP := $(VENV)/.installed-test
# Quint (tla/) is pinned in tla/package-lock.json; reinstalled when the lock changes.
NODE_STAMP := tla/node_modules/.installed

.PHONY: setup conformance test java kafka clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $(STAMP)

$(TEST_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(TEST_STAMP)

$(NODE_STAMP): tla/package-lock.json
	cd tla && npm ci --no-audit --no-fund
	touch $(NODE_STAMP)

## A Java development kit, 17 or later: Spark runs on its java, and `make kafka` compiles kipcheck's own Java
## programs (java/src) with its javac. JAVA_HOME's, else the one on PATH; Debian's openjdk-17-jdk-headless is
## installed when java or javac is missing and we may (root with apt-get), else a clear message.
java:
	@if [ -n "$$JAVA_HOME" ]; then \
		for tool in java javac; do \
			if [ ! -x "$$JAVA_HOME/bin/$$tool" ]; then \
				echo "JAVA_HOME=$$JAVA_HOME has no bin/$$tool: point it at a Java 17+ JDK or unset it" >&2; \
				exit 1; \
			fi; \
		done; \
		java_bin="$$JAVA_HOME/bin/java"; \
	else \
		java_bin=java; \
		if ! command -v java >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then \
			if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
				echo "Java 17 with javac not found: installing Debian's openjdk-17-jdk-headless (Spark runs on it; make kafka compiles java/src with it)"; \
				apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jdk-headless >/dev/null; \
			else \
				echo "kipcheck needs a Java 17+ JDK, java and javac (Spark runs on it, make kafka compiles java/src): install one (Debian: apt-get install openjdk-17-jdk-headless) or set JAVA_HOME, then run make again" >&2; \
				exit 1; \
			fi; \
		fi; \
	fi; \
	version=$$("$$java_bin" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1); \
	if [ -z "$$version" ] || [ "$$version" -lt 17 ]; then \
		echo "kipcheck needs Java 17 or later; $$java_bin is version $${version:-unknown}: set JAVA_HOME to a newer JDK" >&2; \
		exit 1; \
	fi

## Apache Kafka itself (java/pom.xml pins it) runs beside the reference broker in the tests: its jars come from
## Maven Central through Maven, installed from Debian when missing and we may (root with apt-get), and
## `kipcheck kafka fetch` also compiles kipcheck's Java programs (java/src) against each pinned release.
kafka: $(STAMP) java
	@if ! command -v mvn >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "Maven not found: installing Debian's maven to fetch Apache Kafka"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven >/dev/null; \
		else \
			echo "Apache Kafka's jars are fetched with Maven: install it (Debian: apt-get install maven), then run make again" >&2; \
			exit 1; \
		fi; \
	fi
	$(BIN)/kipcheck kafka fetch

setup: $(TEST_STAMP) $(NODE_STAMP) java kafka

## The main job: the reference broker probed over the wire, with a verdict per machine and clause.
conformance: $(STAMP)
	$(BIN)/kipcheck conform --target embedded

## The tests: everything CI runs.
test: $(TEST_STAMP) $(NODE_STAMP) java kafka
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis tla/node_modules
