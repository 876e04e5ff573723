package dev.kipcheck.kafka;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Apache Kafka's own Java clients, driven line by line: KafkaShareConsumers and KafkaConsumers by name, and an
 * Admin client, each command answered with what the call saw.
 *
 * <pre>java -cp KIPCHECK_JAR:KAFKA_CLASSPATH dev.kipcheck.kafka.ClientDriver BOOTSTRAP</pre>
 *
 * Standard input: one command a line, its words separated by single spaces (topic names, group ids and settings
 * are the caller's own and hold no space). Standard output: one JSON object a line for each command, in order,
 * {"ok": true, ...} or {"error": "ExceptionClass: message"}. Every client is called on the one thread that reads
 * the commands, as Kafka's consumers require, so callbacks (rebalance listeners, acknowledgement commit callbacks)
 * run inside the command that triggered them and are answered as its "events", numbered by one sequence across
 * every client ("seq"), so that the events of different clients can be ordered.
 *
 * <pre>
 * share_consumer NAME GROUP TOPIC[,TOPIC...] [SETTING=VALUE...]   a KafkaShareConsumer, subscribed
 * consumer NAME GROUP TOPIC[,TOPIC...] [SETTING=VALUE...]         a KafkaConsumer, subscribed; it commits what it
 *                                            consumed of a partition before letting it go (onPartitionsRevoked)
 * poll NAME TIMEOUT_MS                       -> "records": [{topic, partition, offset, key, value, delivery_count}]
 *                                               (key and value as UTF-8 text, null when absent; delivery_count
 *                                               only from a share consumer)
 * acknowledge NAME TYPE TOPIC:PARTITION:OFFSET...   TYPE: ACCEPT, RELEASE, REJECT or RENEW
 * commit_sync NAME TIMEOUT_MS                -> share consumer: "results": {"TOPIC-P": null | error};
 *                                               consumer: "committed": {"TOPIC-P": next offset}, all it consumed
 * commit_async NAME                          its outcome comes later, as an "acknowledged" or "commit" event
 * close NAME TIMEOUT_MS
 * set_group_config GROUP SETTING=VALUE...    Admin.incrementalAlterConfigs on the group (resource type GROUP)
 * share_group_offsets GROUP                  -> "offsets": {"TOPIC-P": {"start": start offset, "lag": records not
 *                                               yet delivered for good, or null}} (Admin.listShareGroupOffsets)
 * consumer_group_offsets GROUP               -> "offsets": {"TOPIC-P": committed offset}
 * exit
 * </pre>
 *
 * Events, each with "client" and "seq": {"event": "assigned" | "revoked" | "lost", "partitions": ["TOPIC-P"...]},
 * {"event": "commit", "offsets": {"TOPIC-P": offset}, "error": null | text} (a KafkaConsumer's commit), and
 * {"event": "acknowledged", "partition": "TOPIC-P", "offsets": [...], "error": null | text} (a share consumer's
 * acknowledgement commit callback). Exit status: 0 at exit or the end of input, 2 bad arguments.
 */
public final class ClientDriver {
    static final long ADMIN_TIMEOUT_MS = 30_000;
    static final Duration CLOSE_AT_EXIT = Duration.ofSeconds(5);

    private final String bootstrap;
    private final Map<String, KafkaShareConsumer<byte[], byte[]>> shareConsumers = new HashMap<>();
    private final Map<String, KafkaConsumer<byte[], byte[]>> consumers = new HashMap<>();
    // Per share consumer: TOPIC:PARTITION:OFFSET -> the record it was given and has not acknowledged for good
    // (KafkaShareConsumer acknowledges a record object of its in-flight batch).
    private final Map<String, Map<String, ConsumerRecord<byte[], byte[]>>> held = new HashMap<>();
    // Per consumer: partition -> the next offset to commit (one past the last record it was given).
    private final Map<String, Map<TopicPartition, Long>> consumed = new HashMap<>();
    private final List<Map<String, Object>> events = new ArrayList<>();
    private long sequence;
    private Admin admin;

    ClientDriver(String bootstrap) {
        this.bootstrap = bootstrap;
    }

    public static void main(String[] args) throws IOException {
        if (args.length != 1) {
            System.err.println("usage: ClientDriver BOOTSTRAP");
            System.exit(2);
        }
        ClientDriver driver = new ClientDriver(args[0]);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        try {
            String line;
            while ((line = in.readLine()) != null && !line.equals("exit")) {
                out.println(Json.write(driver.answer(line.split(" "))));
                out.flush();
            }
            out.println(Json.write(Map.of("ok", true)));
            out.flush();
        } finally {
            driver.closeAll();
        }
    }

    /** The answer to one command: what the call returned and the events it triggered, or the error it raised. */
    Map<String, Object> answer(String[] words) {
        Map<String, Object> answer = new LinkedHashMap<>();
        try {
            run(words, answer);
            answer.put("ok", true);
        } catch (ExecutionException error) {
            answer.put("error", describe(error.getCause()));
        } catch (RuntimeException | InterruptedException | TimeoutException error) {
            // A client's refusal (KafkaException, IllegalStateException) or a malformed command: answered, never fatal.
            answer.put("error", describe(error));
        }
        if (!events.isEmpty()) {
            answer.put("events", new ArrayList<>(events));
            events.clear();
        }
        return answer;
    }

    void run(String[] words, Map<String, Object> answer)
            throws ExecutionException, InterruptedException, TimeoutException {
        String op = words[0];
        int arity = switch (op) {
            case "share_consumer", "consumer" -> 4;
            case "poll", "commit_sync", "close", "acknowledge" -> 3;
            default -> 2;
        };
        if (words.length < arity) {
            throw new IllegalArgumentException(op + " takes at least " + (arity - 1) + " arguments");
        }
        String name = words[1];
        switch (op) {
            case "share_consumer" -> shareConsumer(name, words[2], words[3], settings(words, 4));
            case "consumer" -> consumer(name, words[2], words[3], settings(words, 4));
            case "poll" -> answer.put("records", poll(name, millis(words[2])));
            case "acknowledge" -> acknowledge(name, AcknowledgeType.valueOf(words[2]), words);
            case "commit_sync" -> commitSync(name, millis(words[2]), answer);
            case "commit_async" -> commitAsync(name);
            case "close" -> close(name, millis(words[2]));
            case "set_group_config" -> setGroupConfig(name, settings(words, 2));
            case "share_group_offsets" -> answer.put("offsets", shareGroupOffsets(name));
            case "consumer_group_offsets" -> answer.put("offsets", consumerGroupOffsets(name));
            default -> throw new IllegalArgumentException("unknown command " + Json.quote(op));
        }
    }

    // -- share consumers -------------------------------------------------------------------------------------

    void shareConsumer(String name, String group, String topics, Map<String, String> settings) {
        checkNew(name);
        KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(properties(name, group, settings),
            new ByteArrayDeserializer(), new ByteArrayDeserializer());
        consumer.setAcknowledgementCommitCallback((offsets, error) -> acknowledged(name, offsets, error));
        consumer.subscribe(Arrays.asList(topics.split(",")));
        shareConsumers.put(name, consumer);
        held.put(name, new HashMap<>());
    }

    void acknowledged(String name, Map<TopicIdPartition, Set<Long>> offsets, Exception error) {
        for (Map.Entry<TopicIdPartition, Set<Long>> entry : offsets.entrySet()) {
            Map<String, Object> event = event(name, "acknowledged");
            event.put("partition", label(entry.getKey().topicPartition()));
            event.put("offsets", new TreeSet<>(entry.getValue()));
            event.put("error", error == null ? null : describe(error));
        }
    }

    void acknowledge(String name, AcknowledgeType type, String[] words) {
        KafkaShareConsumer<byte[], byte[]> consumer = shareConsumer(name);
        for (String address : Arrays.asList(words).subList(3, words.length)) {
            ConsumerRecord<byte[], byte[]> record = held.get(name).get(address);
            if (record == null) {
                throw new IllegalArgumentException(name + " holds no record " + address + " to acknowledge");
            }
            consumer.acknowledge(record, type);
            if (type != AcknowledgeType.RENEW) {
                held.get(name).remove(address);
            }
        }
    }

    KafkaShareConsumer<byte[], byte[]> shareConsumer(String name) {
        KafkaShareConsumer<byte[], byte[]> consumer = shareConsumers.get(name);
        if (consumer == null) {
            throw new IllegalArgumentException("no share consumer named " + name);
        }
        return consumer;
    }

    // -- consumers -------------------------------------------------------------------------------------------

    void consumer(String name, String group, String topics, Map<String, String> settings) {
        checkNew(name);
        Properties properties = properties(name, group, settings);
        properties.putIfAbsent(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        properties.putIfAbsent(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(properties, new ByteArrayDeserializer(),
            new ByteArrayDeserializer());
        consumers.put(name, consumer);
        consumed.put(name, new HashMap<>());
        consumer.subscribe(Arrays.asList(topics.split(",")), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                event(name, "assigned").put("partitions", labels(partitions));
            }

            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                commitConsumed(name, partitions);
                partitions.forEach(consumed.get(name)::remove);
                event(name, "revoked").put("partitions", labels(partitions));
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> partitions) {
                partitions.forEach(consumed.get(name)::remove);  // another member may own them: nothing committed
                event(name, "lost").put("partitions", labels(partitions));
            }
        });
    }

    /** Commit synchronously what `name` consumed of `partitions`, as a commit event; the offsets committed. */
    Map<TopicPartition, OffsetAndMetadata> commitConsumed(String name, Collection<TopicPartition> partitions) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (TopicPartition partition : partitions) {
            Long next = consumed.get(name).get(partition);
            if (next != null) {
                offsets.put(partition, new OffsetAndMetadata(next));
            }
        }
        if (offsets.isEmpty()) {
            return offsets;
        }
        Map<String, Object> event = event(name, "commit");
        event.put("offsets", offsetsOf(offsets));
        event.put("error", null);
        try {
            consumer(name).commitSync(offsets);
        } catch (KafkaException error) {
            event.put("error", describe(error));
            throw error;
        }
        return offsets;
    }

    KafkaConsumer<byte[], byte[]> consumer(String name) {
        KafkaConsumer<byte[], byte[]> consumer = consumers.get(name);
        if (consumer == null) {
            throw new IllegalArgumentException("no consumer named " + name);
        }
        return consumer;
    }

    // -- calls on either kind --------------------------------------------------------------------------------

    List<Map<String, Object>> poll(String name, Duration timeout) {
        List<Map<String, Object>> records = new ArrayList<>();
        if (shareConsumers.containsKey(name)) {
            for (ConsumerRecord<byte[], byte[]> record : shareConsumer(name).poll(timeout)) {
                held.get(name).put(record.topic() + ":" + record.partition() + ":" + record.offset(), record);
                Map<String, Object> fields = record(record);
                fields.put("delivery_count", record.deliveryCount().map(Integer::valueOf).orElse(null));
                records.add(fields);
            }
            return records;
        }
        for (ConsumerRecord<byte[], byte[]> record : consumer(name).poll(timeout)) {
            records.add(record(record));
            consumed.get(name).put(new TopicPartition(record.topic(), record.partition()), record.offset() + 1);
        }
        return records;
    }

    void commitSync(String name, Duration timeout, Map<String, Object> answer) {
        if (shareConsumers.containsKey(name)) {
            Map<String, Object> results = new TreeMap<>();
            shareConsumer(name).commitSync(timeout).forEach((partition, error) ->
                results.put(label(partition.topicPartition()), error.map(ClientDriver::describe).orElse(null)));
            answer.put("results", results);
            return;
        }
        answer.put("committed", offsetsOf(commitConsumed(name, consumer(name).assignment())));
    }

    void commitAsync(String name) {
        if (shareConsumers.containsKey(name)) {
            shareConsumer(name).commitAsync();
            return;
        }
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        consumed.get(name).forEach((partition, next) -> offsets.put(partition, new OffsetAndMetadata(next)));
        consumer(name).commitAsync(offsets, (committed, error) -> {
            Map<String, Object> event = event(name, "commit");
            event.put("offsets", offsetsOf(committed == null ? offsets : committed));
            event.put("error", error == null ? null : describe(error));
        });
    }

    void close(String name, Duration timeout) {
        if (shareConsumers.containsKey(name)) {
            held.remove(name);
            shareConsumers.remove(name).close(timeout);
            return;
        }
        consumer(name).close(CloseOptions.timeout(timeout));
        consumers.remove(name);
        consumed.remove(name);
    }

    void closeAll() {
        for (String name : new ArrayList<>(shareConsumers.keySet())) {
            shareConsumers.remove(name).close(CLOSE_AT_EXIT);
        }
        for (String name : new ArrayList<>(consumers.keySet())) {
            consumers.remove(name).close(CloseOptions.timeout(CLOSE_AT_EXIT));
        }
        if (admin != null) {
            admin.close(CLOSE_AT_EXIT);
        }
    }

    // -- Admin -----------------------------------------------------------------------------------------------

    Admin admin() {
        if (admin == null) {
            Properties properties = new Properties();
            properties.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            properties.put(AdminClientConfig.CLIENT_ID_CONFIG, "kipcheck-admin");
            admin = Admin.create(properties);
        }
        return admin;
    }

    void setGroupConfig(String group, Map<String, String> settings)
            throws ExecutionException, InterruptedException, TimeoutException {
        List<AlterConfigOp> changes = new ArrayList<>();
        settings.forEach((setting, value) ->
            changes.add(new AlterConfigOp(new ConfigEntry(setting, value), AlterConfigOp.OpType.SET)));
        admin().incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.GROUP, group), changes)).all()
            .get(ADMIN_TIMEOUT_MS, TimeUnit.MILLISECONDS);
    }

    Map<String, Object> shareGroupOffsets(String group)
            throws ExecutionException, InterruptedException, TimeoutException {
        Map<TopicPartition, SharePartitionOffsetInfo> offsets = admin()
            .listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec())).partitionsToOffsetInfo(group)
            .get(ADMIN_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        Map<String, Object> answer = new TreeMap<>();
        offsets.forEach((partition, info) -> {
            Map<String, Object> offset = new LinkedHashMap<>();
            offset.put("start", info == null ? null : info.startOffset());
            offset.put("lag", info == null ? null : info.lag().orElse(null));
            answer.put(label(partition), offset);
        });
        return answer;
    }

    Map<String, Object> consumerGroupOffsets(String group)
            throws ExecutionException, InterruptedException, TimeoutException {
        return offsetsOf(admin().listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
            .get(ADMIN_TIMEOUT_MS, TimeUnit.MILLISECONDS));
    }

    // -- plumbing --------------------------------------------------------------------------------------------

    void checkNew(String name) {
        if (shareConsumers.containsKey(name) || consumers.containsKey(name)) {
            throw new IllegalArgumentException("a client named " + name + " exists already");
        }
    }

    Properties properties(String name, String group, Map<String, String> settings) {
        Properties properties = new Properties();
        properties.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        properties.put(ConsumerConfig.CLIENT_ID_CONFIG, "kipcheck-" + name);
        properties.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        properties.putAll(settings);
        return properties;
    }

    /** SETTING=VALUE words from `first` on. */
    static Map<String, String> settings(String[] words, int first) {
        Map<String, String> settings = new LinkedHashMap<>();
        for (String word : Arrays.asList(words).subList(first, words.length)) {
            int equals = word.indexOf('=');
            if (equals < 1) {
                throw new IllegalArgumentException("a setting is NAME=VALUE, not " + word);
            }
            settings.put(word.substring(0, equals), word.substring(equals + 1));
        }
        return settings;
    }

    static Duration millis(String word) {
        return Duration.ofMillis(Long.parseLong(word));
    }

    Map<String, Object> event(String client, String kind) {
        Map<String, Object> event = new LinkedHashMap<>();
        event.put("event", kind);
        event.put("client", client);
        event.put("seq", sequence++);
        events.add(event);
        return event;
    }

    static Map<String, Object> record(ConsumerRecord<byte[], byte[]> record) {
        Map<String, Object> fields = new LinkedHashMap<>();
        fields.put("topic", record.topic());
        fields.put("partition", record.partition());
        fields.put("offset", record.offset());
        fields.put("key", text(record.key()));
        fields.put("value", text(record.value()));
        return fields;
    }

    static String text(byte[] bytes) {
        return bytes == null ? null : new String(bytes, StandardCharsets.UTF_8);
    }

    static String label(TopicPartition partition) {
        return partition.topic() + "-" + partition.partition();
    }

    static List<String> labels(Collection<TopicPartition> partitions) {
        return partitions.stream().map(ClientDriver::label).sorted().toList();
    }

    static Map<String, Object> offsetsOf(Map<TopicPartition, OffsetAndMetadata> offsets) {
        Map<String, Object> labelled = new TreeMap<>();
        offsets.forEach((partition, offset) -> labelled.put(label(partition), offset == null ? null : offset.offset()));
        return labelled;
    }

    static String describe(Throwable error) {
        return error.getClass().getSimpleName() + ": " + error.getMessage();
    }
}
