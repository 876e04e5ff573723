package dev.kipcheck.kafka;

import java.io.BufferedOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.common.runtime.Deserializer.UnknownRecordTypeException;
import org.apache.kafka.coordinator.share.ShareCoordinatorRecordSerde;
import org.apache.kafka.coordinator.share.generated.ShareSnapshotKey;
import org.apache.kafka.coordinator.share.generated.ShareSnapshotValue;
import org.apache.kafka.coordinator.share.generated.ShareUpdateKey;
import org.apache.kafka.coordinator.share.generated.ShareUpdateValue;

/**
 * Kafka's share coordinator, read back: every record of __share_group_state from the beginning of each partition
 * to its last stable offset, with a plain consumer (read_committed), decoded with the share coordinator's own
 * record serde and generated schemas (ShareSnapshotKey/Value, ShareUpdateKey/Value; a null value is a tombstone).
 *
 * <pre>java -cp KIPCHECK_JAR:KAFKA_CLASSPATH dev.kipcheck.kafka.ShareGroupStateDump BOOTSTRAP TIMEOUT_MS</pre>
 *
 * Standard output, JSON Lines: one line per record {"partition", "offset", "timestamp", "type", "key", "value"}, in
 * offset order within a partition (the partitions are read together and interleave), then one line per partition
 * {"partition", "log_start", "end"} (its log start asked after the reading), where type is
 * "snapshot", "update", "tombstone" (no value) or "unknown" (a record type this Kafka does not know, with
 * "record_type"; Kafka's own loader skips those too). Field names inside key and value are the schemas' own.
 * Exit status: 0 done, 1 Kafka could not be read in time (the reason on standard error), 2 bad arguments.
 */
public final class ShareGroupStateDump {
    static final String TOPIC = "__share_group_state";
    static final Duration POLL = Duration.ofMillis(200);
    // UTF-8 whatever the platform's default: group ids are any string a client chose.
    static final PrintStream OUT = new PrintStream(new BufferedOutputStream(new FileOutputStream(FileDescriptor.out)),
        false, StandardCharsets.UTF_8);

    private ShareGroupStateDump() {
    }

    public static void main(String[] args) {
        if (args.length != 2 || !args[1].matches("[0-9]{1,9}")) {
            System.err.println("usage: ShareGroupStateDump BOOTSTRAP TIMEOUT_MS");
            System.exit(2);
        }
        try {
            dump(args[0], Duration.ofMillis(Long.parseLong(args[1])));
        } catch (KafkaException | IllegalStateException error) {
            OUT.flush();
            System.err.println("reading " + TOPIC + " failed: " + error);
            System.exit(1);
        }
    }

    static void dump(String bootstrap, Duration timeout) {
        Properties properties = new Properties();
        properties.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        properties.put(ConsumerConfig.CLIENT_ID_CONFIG, "kipcheck-share-state-reader");
        properties.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        properties.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        properties.put(ConsumerConfig.ALLOW_AUTO_CREATE_TOPICS_CONFIG, "false");
        properties.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        properties.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        long deadline = System.nanoTime() + timeout.toNanos();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(properties)) {
            List<PartitionInfo> infos = consumer.partitionsFor(TOPIC, timeout);
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo info : infos == null ? List.<PartitionInfo>of() : infos) {
                partitions.add(new TopicPartition(TOPIC, info.partition()));
            }
            partitions.sort(Comparator.comparingInt(TopicPartition::partition));
            Map<TopicPartition, Long> ends = consumer.endOffsets(partitions, timeout);
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            ShareCoordinatorRecordSerde serde = new ShareCoordinatorRecordSerde();
            Set<TopicPartition> reading = new HashSet<>(partitions);
            while (!reading.isEmpty()) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("partitions " + reading + " were not read to their end offsets in "
                        + timeout.toMillis() + " ms");
                }
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(POLL)) {
                    if (record.offset() < ends.get(new TopicPartition(TOPIC, record.partition()))) {
                        OUT.println(line(serde, record));
                    }
                }
                reading.removeIf(partition -> consumer.position(partition) >= ends.get(partition));
            }
            // Asked last: a log start that pruning moved while the records were read shows as moved.
            Map<TopicPartition, Long> starts = consumer.beginningOffsets(partitions, timeout);
            for (TopicPartition partition : partitions) {
                OUT.println("{\"partition\":" + partition.partition() + ",\"log_start\":" + starts.get(partition)
                    + ",\"end\":" + ends.get(partition) + "}");
            }
        }
        OUT.flush();
    }

    static String line(ShareCoordinatorRecordSerde serde, ConsumerRecord<byte[], byte[]> record) {
        String envelope = "{\"partition\":" + record.partition() + ",\"offset\":" + record.offset()
            + ",\"timestamp\":" + record.timestamp();
        CoordinatorRecord decoded;
        try {
            decoded = serde.deserialize(ByteBuffer.wrap(record.key()),
                record.value() == null ? null : ByteBuffer.wrap(record.value()));
        } catch (UnknownRecordTypeException unknown) {
            return envelope + ",\"type\":\"unknown\",\"record_type\":" + unknown.unknownType() + "}";
        }
        String key = key(decoded);
        if (decoded.value() == null) {
            return envelope + ",\"type\":\"tombstone\",\"key\":" + key + "}";
        }
        Object value = decoded.value().message();
        if (value instanceof ShareSnapshotValue snapshot) {
            return envelope + ",\"type\":\"snapshot\",\"key\":" + key + ",\"value\":" + snapshot(snapshot) + "}";
        }
        return envelope + ",\"type\":\"update\",\"key\":" + key + ",\"value\":" + update((ShareUpdateValue) value) + "}";
    }

    static String key(CoordinatorRecord decoded) {
        if (decoded.key() instanceof ShareSnapshotKey key) {
            return key(key.groupId(), key.topicId(), key.partition());
        }
        ShareUpdateKey key = (ShareUpdateKey) decoded.key();
        return key(key.groupId(), key.topicId(), key.partition());
    }

    static String key(String groupId, Uuid topicId, int partition) {
        return "{\"groupId\":" + Json.quote(groupId) + ",\"topicId\":\"" + topicId + "\",\"partition\":" + partition + "}";
    }

    static String snapshot(ShareSnapshotValue value) {
        String batches = batches(value.stateBatches().stream().map(batch -> batch(batch.firstOffset(),
            batch.lastOffset(), batch.deliveryState(), batch.deliveryCount())));
        return "{\"snapshotEpoch\":" + value.snapshotEpoch() + ",\"stateEpoch\":" + value.stateEpoch()
            + ",\"leaderEpoch\":" + value.leaderEpoch() + ",\"startOffset\":" + value.startOffset()
            + ",\"deliveryCompleteCount\":" + value.deliveryCompleteCount() + ",\"createTimestamp\":"
            + value.createTimestamp() + ",\"writeTimestamp\":" + value.writeTimestamp() + ",\"stateBatches\":"
            + batches + "}";
    }

    static String update(ShareUpdateValue value) {
        String batches = batches(value.stateBatches().stream().map(batch -> batch(batch.firstOffset(),
            batch.lastOffset(), batch.deliveryState(), batch.deliveryCount())));
        return "{\"snapshotEpoch\":" + value.snapshotEpoch() + ",\"leaderEpoch\":" + value.leaderEpoch()
            + ",\"startOffset\":" + value.startOffset() + ",\"deliveryCompleteCount\":" + value.deliveryCompleteCount()
            + ",\"stateBatches\":" + batches + "}";
    }

    static String batch(long first, long last, byte state, short deliveryCount) {
        return "{\"firstOffset\":" + first + ",\"lastOffset\":" + last + ",\"deliveryState\":" + state
            + ",\"deliveryCount\":" + deliveryCount + "}";
    }

    static String batches(Stream<String> batches) {
        return batches.collect(Collectors.joining(",", "[", "]"));
    }
}
