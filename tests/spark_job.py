"""A streaming job for the end-to-end tests, run as its own process so a test can kill -9 it (whole group).

    python tests/spark_job.py --connector share --bootstrap HOST:PORT --topic T --group G --work DIR [--bug NAME]

Reads the topic with the connector and writes each micro-batch, in foreachBatch, to
DIR/out/batch-<id>.<pid>.json (rows as [partition, offset, deliveryCount]), after writing
DIR/started-<id> and sleeping --batch-ms. Runs until DIR/stop exists. --bug runs a
deliberately broken connector (the seeded bugs the tests must catch).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from kipcheck.impl.spark import local_session, register
from kipcheck.impl.spark.share import KipcheckShare, ShareStreamReader, settings_of


class AcceptBeforeCommitReader(ShareStreamReader):
    """Seeded bug: accepts a batch as soon as it is staged, before Spark ran and committed it."""

    def latestOffset(self, start, limit=None):
        end = super().latestOffset(start, limit)
        self.accept_committed(end["batch"])
        return end


class AcceptBeforeCommit(KipcheckShare):
    @classmethod
    def name(cls):
        return "kipcheck-share-accept-before-commit"

    def streamReader(self, schema):
        return AcceptBeforeCommitReader(settings_of(self.options, streaming=True))


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("--connector", "--bootstrap", "--topic", "--group", "--work"):
        parser.add_argument(name, required=True)
    parser.add_argument("--bug", choices=("accept-before-commit",))
    parser.add_argument("--batch-ms", type=int, default=800)
    parser.add_argument("--max-per-trigger", type=int, default=10)
    args = parser.parse_args()
    work = Path(args.work)
    (work / "out").mkdir(parents=True, exist_ok=True)
    spark = local_session("local[2]", "kipcheck-e2e")
    register(spark)
    source = f"kipcheck-{args.connector}"
    if args.bug == "accept-before-commit":
        spark.dataSource.register(AcceptBeforeCommit)
        source = AcceptBeforeCommit.name()
    reader = (spark.readStream.format(source).option("kafka.bootstrap.servers", args.bootstrap)
              .option("subscribe", args.topic).option("maxOffsetsPerTrigger", args.max_per_trigger)
              .option("traceLocation", str(work / "traces")).option("kafka.group.id", args.group))
    if args.connector == "share":
        reader = reader.option("stagingLocation", str(work / "staging"))
    else:
        reader = reader.option("startingOffsets", "earliest").option("keyRangesPerPartition", 2)

    def write_batch(frame, batch_id):
        (work / f"started-{batch_id}").touch()
        rows = [[row.partition, row.offset, getattr(row, "deliveryCount", 1)] for row in frame.collect()]
        time.sleep(args.batch_ms / 1000)
        temporary = work / "out" / f".batch-{batch_id}.{os.getpid()}.tmp"
        temporary.write_text(json.dumps(rows))
        os.replace(temporary, work / "out" / f"batch-{batch_id}.{os.getpid()}.json")

    query = (reader.load().writeStream.foreachBatch(write_batch)
             .option("checkpointLocation", str(work / "checkpoint")).trigger(processingTime="200 milliseconds").start())
    while not (work / "stop").exists():
        if query.awaitTermination(0.5):
            raise SystemExit(f"the query ended: {query.exception()}")
    query.stop()
    spark.stop()


if __name__ == "__main__":
    main()
