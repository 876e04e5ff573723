"""KIP-287 for real: the linear-hashing partitioner and the processor side of a stateful job (spec/expansion.md).

    from kipcheck.impl.expansion import JobRecord, LinearHashPartitioner, Processor

Modules (each documents its API in its own docstring):

- `partitioner`: LinearHashPartitioner, the model's function over the job's
                 initial count, for confluent-kafka's Producer (the producer
                 passes the partition explicitly).
- `job`:         JobRecord, what the job remembers (N0 and every expansion
                 with its split offsets), encoded as JSON, checked by the model.
- `assignor`:    who holds which partition and when partitions move:
                 linear hashing over N0, handover only to a ready new processor.
- `processor`:   Processor, a user's stateful function per key over a
                 PartitionReader and a Group (protocols: the consumer and the
                 coordination underneath can be swapped); catch-up without
                 output, the handover at T1, draining p before p + N.
- `confluent`:   ConfluentReader, a PartitionReader over confluent-kafka's Consumer.
- `tracing`:     ExpansionTrace, the expansion traces `kipcheck check` judges.

It imports the model and impl's storage and trace writing, never the broker
or the groups package: the group coordinator's assignors and the broker's
CreatePartitions use this package, not the other way round.
"""

from kipcheck.impl.expansion.job import JobRecord, JobRecordError
from kipcheck.impl.expansion.partitioner import LinearHashPartitioner
from kipcheck.impl.expansion.processor import Output, Processor, ProcessorError, Record

__all__ = ["JobRecord", "JobRecordError", "LinearHashPartitioner", "Output", "Processor", "ProcessorError", "Record"]
