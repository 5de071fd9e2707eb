/*
 * Reads records from a real Kafka broker with Apache Kafka's own Java consumer, for tests/kafka.
 * Run with Java's single-source launcher (Java 11+), the Kafka jars on the class path:
 *
 *   java -cp '<libs>/*' tests/kafka/Consumer.java SPEC.json
 *
 * SPEC.json: {"bootstrap": "127.0.0.1:9092", "tasks": [TASK, ...]}, each TASK one of
 *
 *   {"kind": "read", "topic": "t", "isolation": "read_committed" | "read_uncommitted",
 *    "partitions": [0, 1]}                     // default: every partition of the topic
 *       every record from the log start to the end (the last stable offset for read_committed),
 *       by partition assignment: no group, nothing committed.
 *   {"kind": "group", "group": "g", "protocol": "classic" | "consumer", "topic": "t",
 *    "isolation": "read_committed", "max_records": 10}
 *       joins the group (subscribe; group.protocol=consumer is KIP-848's protocol), consumes from
 *       its committed offsets (earliest when it has none) at most max_records records (default:
 *       until the end), commits the offset after the last record consumed of each partition and leaves.
 *   {"kind": "committed", "group": "g"}
 *       the group's committed offsets (Admin.listConsumerGroupOffsets).
 *   {"kind": "times", "topic": "t", "partition": 0, "timestamps": [1700000000000, ...]}
 *       offsetsForTimes (ListOffsets by timestamp): {"offsets": {"<timestamp>": offset or null}}.
 *
 * Prints one JSON object to stdout: {"results": [RESULT, ...]} in the tasks' order. A read or group
 * RESULT is {"records": [{"topic", "partition", "offset", "key", "value", "headers": [[k, v]],
 * "timestamp", "timestamp_type", "leader_epoch"}], "end": {partition: offset}} with, for a read,
 * "start": {partition: offset} and, for a group, "committed": {partition: offset}; keys, values and header values are
 * decoded as UTF-8 (null stays null); "value_base64" is the value's bytes in base64 (null for null). A committed RESULT is {"committed": {topic: {partition: offset}}}.
 * "timeout_ms" (default 60000) bounds a task; running out of time fails the program (exit 1).
 */
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class Consumer {
    static final ObjectMapper JSON = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: java -cp '<kafka libs>/*' Consumer.java SPEC.json");
            System.exit(2);
        }
        JsonNode spec = JSON.readTree(new File(args[0]));
        String bootstrap = spec.get("bootstrap").asText();
        ObjectNode out = JSON.createObjectNode();
        ArrayNode results = out.putArray("results");
        for (JsonNode task : spec.path("tasks")) {
            String kind = task.get("kind").asText();
            switch (kind) {
                case "read": results.add(read(bootstrap, task)); break;
                case "group": results.add(group(bootstrap, task)); break;
                case "committed": results.add(committed(bootstrap, task)); break;
                case "times": results.add(times(bootstrap, task)); break;
                default: throw new IllegalArgumentException("unknown task kind " + kind);
            }
        }
        System.out.println(JSON.writeValueAsString(out));
        System.out.flush();
        System.exit(0);
    }

    static Properties consumerProps(String bootstrap, JsonNode task) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, task.path("isolation").asText("read_uncommitted"));
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "500");
        task.path("props").fields().forEachRemaining(e -> props.put(e.getKey(), e.getValue().asText()));
        return props;
    }

    static List<TopicPartition> partitions(KafkaConsumer<byte[], byte[]> consumer, JsonNode task) {
        String topic = task.get("topic").asText();
        List<TopicPartition> tps = new ArrayList<>();
        if (task.has("partitions")) {
            for (JsonNode p : task.get("partitions")) tps.add(new TopicPartition(topic, p.asInt()));
        } else {
            for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofSeconds(30))) {
                tps.add(new TopicPartition(topic, info.partition()));
            }
        }
        tps.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
        return tps;
    }

    static ObjectNode read(String bootstrap, JsonNode task) throws Exception {
        long deadline = System.currentTimeMillis() + task.path("timeout_ms").asLong(60000);
        ObjectNode result = JSON.createObjectNode();
        ArrayNode records = result.putArray("records");
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps(bootstrap, task))) {
            List<TopicPartition> tps = partitions(consumer, task);
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> start = consumer.beginningOffsets(tps);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps);  // the LSO for read_committed
            offsets(result.putObject("start"), start);
            offsets(result.putObject("end"), end);
            while (!reached(consumer, tps, end)) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("read of " + tps + " did not reach " + end + " in time");
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    if (r.offset() < end.get(new TopicPartition(r.topic(), r.partition()))) records.add(json(r));
                }
            }
        }
        return result;
    }

    static boolean reached(KafkaConsumer<byte[], byte[]> consumer, List<TopicPartition> tps,
                           Map<TopicPartition, Long> end) {
        for (TopicPartition tp : tps) if (consumer.position(tp) < end.get(tp)) return false;
        return true;
    }

    static ObjectNode group(String bootstrap, JsonNode task) throws Exception {
        long deadline = System.currentTimeMillis() + task.path("timeout_ms").asLong(60000);
        long max = task.path("max_records").asLong(Long.MAX_VALUE);
        Properties props = consumerProps(bootstrap, task);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, task.get("group").asText());
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, task.path("protocol").asText("classic"));
        ObjectNode result = JSON.createObjectNode();
        ArrayNode records = result.putArray("records");
        Map<TopicPartition, Long> next = new TreeMap<>((a, b) -> Integer.compare(a.partition(), b.partition()));
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> tps = partitions(consumer, task);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps);
            offsets(result.putObject("end"), end);
            consumer.subscribe(List.of(task.get("topic").asText()));
            long taken = 0;
            boolean assigned = false;
            while (taken < max) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("group " + task.get("group").asText() + " got " + taken
                        + " records of " + max + " in time");
                }
                ConsumerRecords<byte[], byte[]> polled = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<byte[], byte[]> r : polled) {
                    if (taken >= max) break;
                    records.add(json(r));
                    next.put(new TopicPartition(r.topic(), r.partition()), r.offset() + 1);
                    taken++;
                }
                if (!consumer.assignment().isEmpty()) assigned = true;
                if (assigned && polled.isEmpty() && consumer.assignment().containsAll(tps)
                        && reached(consumer, tps, end)) break;  // the whole topic consumed
            }
            if (!next.isEmpty()) {
                Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
                next.forEach((tp, o) -> commit.put(tp, new OffsetAndMetadata(o)));
                consumer.commitSync(commit);
            }
            ObjectNode committed = result.putObject("committed");
            next.forEach((tp, o) -> committed.put(Integer.toString(tp.partition()), o));
        }
        return result;
    }

    static ObjectNode committed(String bootstrap, JsonNode task) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        ObjectNode result = JSON.createObjectNode();
        ObjectNode byTopic = result.putObject("committed");
        try (Admin admin = Admin.create(props)) {
            Map<TopicPartition, OffsetAndMetadata> offsets = admin
                .listConsumerGroupOffsets(task.get("group").asText()).partitionsToOffsetAndMetadata().get();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                ObjectNode t = byTopic.has(e.getKey().topic()) ? (ObjectNode) byTopic.get(e.getKey().topic())
                    : byTopic.putObject(e.getKey().topic());
                if (e.getValue() != null) t.put(Integer.toString(e.getKey().partition()), e.getValue().offset());
            }
        }
        return result;
    }

    static ObjectNode times(String bootstrap, JsonNode task) throws Exception {
        ObjectNode result = JSON.createObjectNode();
        ObjectNode out = result.putObject("offsets");
        TopicPartition tp = new TopicPartition(task.get("topic").asText(), task.get("partition").asInt());
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps(bootstrap, task))) {
            for (JsonNode ts : task.get("timestamps")) {  // one request per timestamp
                Map<TopicPartition, org.apache.kafka.clients.consumer.OffsetAndTimestamp> found =
                    consumer.offsetsForTimes(Map.of(tp, ts.asLong()), Duration.ofSeconds(30));
                if (found.get(tp) == null) out.putNull(ts.asText());
                else out.put(ts.asText(), found.get(tp).offset());
            }
        }
        return result;
    }

    static void offsets(ObjectNode node, Map<TopicPartition, Long> offsets) {
        offsets.forEach((tp, o) -> node.put(Integer.toString(tp.partition()), o));
    }

    static ObjectNode json(ConsumerRecord<byte[], byte[]> r) {
        ObjectNode o = JSON.createObjectNode();
        o.put("topic", r.topic());
        o.put("partition", r.partition());
        o.put("offset", r.offset());
        o.put("key", text(r.key()));
        o.put("value", text(r.value()));
        // the bytes as they are, for values that are not text (Avro, Protobuf in Confluent's wire format)
        o.put("value_base64", r.value() == null ? null : Base64.getEncoder().encodeToString(r.value()));
        ArrayNode headers = o.putArray("headers");
        for (Header h : r.headers()) {
            ArrayNode pair = headers.addArray();
            pair.add(h.key());
            pair.add(text(h.value()));
        }
        o.put("timestamp", r.timestamp());
        o.put("timestamp_type", r.timestampType().name);
        o.put("leader_epoch", r.leaderEpoch().orElse(-1));
        return o;
    }

    static String text(byte[] bytes) {
        return bytes == null ? null : new String(bytes, StandardCharsets.UTF_8);
    }
}
