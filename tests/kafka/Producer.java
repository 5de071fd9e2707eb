/*
 * Produces records through a real Kafka broker with Apache Kafka's own Java client, for tests/kafka.
 * Run with Java's single-source launcher (Java 11+), the Kafka jars on the class path:
 *
 *   java -cp '<libs>/*' tests/kafka/Producer.java SPEC.json
 *
 * SPEC.json (the test writes it; every field but bootstrap and runs is optional):
 *
 *   {"bootstrap": "127.0.0.1:9092",
 *    "topics": [{"name": "t", "partitions": 1, "replication_factor": 1,   // created first
 *                "configs": {"cleanup.policy": "compact"}}],
 *    "alter_topics": [{"name": "t", "configs": {"min.compaction.lag.ms": "0"}}],  // then altered (SET)
 *    "runs": [{
 *       "topic": "t", "partition": 0,                      // partition: else the client's partitioner
 *       "mode": "plain" | "idempotent" | "transactional",  // transactional needs "transactional_id"
 *       "transactional_id": "tx-1", "compression": "none|gzip|snappy|lz4|zstd",
 *       "linger_ms": 0, "batch_size": 16384, "props": {"any.producer.config": "value"},
 *       "groups": [{"end": "commit" | "abort" | "flush", "pause_ms": 0,
 *                   "records": [{"key": "k", "value": "v" | null, "headers": [["h", "v"]],
 *                                "timestamp": 1700000000000}]}]}]}
 *
 * "alter_topics" sets the given configs of existing topics (incrementalAlterConfigs, SET), then waits
 * until DescribeConfigs shows them, before any run.
 * A group is one transaction in transactional mode (committed or aborted) and one flush otherwise;
 * "pause_ms" waits before the group (to let segment.ms roll segments). A null value is a tombstone.
 * A group may also have "wait_for": PATH (wait until that file exists before the group) and
 * "signal": PATH (once the group is done, write that file: {"groups": [...]}, the run's acks so far,
 * as below): one producer, with its producer id, epoch and sequence numbers, can so go on producing
 * across a broker restart the test makes between the two (nothing is in flight meanwhile).
 * Keys, values and header values are UTF-8 strings (a null key or header value stays null); a record
 * may give "value_base64" instead of "value": its bytes in base64 (Avro or Protobuf in Confluent's
 * wire format, which are not text).
 *
 * Prints one JSON object to stdout: {"runs": [{"groups": [[{"partition": p, "offset": o,
 * "timestamp": ts}, ...], ...]}]}, the metadata the broker acknowledged for every record, in the
 * spec's order. Any error fails the program (exit 1).
 */
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class Producer {
    static final ObjectMapper JSON = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: java -cp '<kafka libs>/*' Producer.java SPEC.json");
            System.exit(2);
        }
        JsonNode spec = JSON.readTree(new File(args[0]));
        String bootstrap = spec.get("bootstrap").asText();
        if (spec.has("topics")) createTopics(bootstrap, spec.get("topics"));
        if (spec.has("alter_topics")) alterTopics(bootstrap, spec.get("alter_topics"));
        ObjectNode out = JSON.createObjectNode();
        ArrayNode runs = out.putArray("runs");
        for (JsonNode run : spec.path("runs")) runs.add(produce(bootstrap, run));
        System.out.println(JSON.writeValueAsString(out));
        System.out.flush();
        System.exit(0);
    }

    static void createTopics(String bootstrap, JsonNode topics) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(props)) {
            List<NewTopic> requests = new ArrayList<>();
            for (JsonNode t : topics) {
                NewTopic topic = new NewTopic(t.get("name").asText(), t.path("partitions").asInt(1),
                    (short) t.path("replication_factor").asInt(1));
                Map<String, String> configs = new HashMap<>();
                t.path("configs").fields().forEachRemaining(e -> configs.put(e.getKey(), e.getValue().asText()));
                requests.add(topic.configs(configs));
            }
            for (Map.Entry<String, org.apache.kafka.common.KafkaFuture<Void>> e :
                    admin.createTopics(requests).values().entrySet()) {
                try {
                    e.getValue().get();
                } catch (ExecutionException err) {
                    if (!(err.getCause() instanceof TopicExistsException)) throw err;
                }
            }
        }
    }

    static void alterTopics(String bootstrap, JsonNode topics) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(props)) {
            Map<ConfigResource, Collection<AlterConfigOp>> ops = new HashMap<>();
            for (JsonNode t : topics) {
                List<AlterConfigOp> set = new ArrayList<>();
                t.path("configs").fields().forEachRemaining(e -> set.add(
                    new AlterConfigOp(new ConfigEntry(e.getKey(), e.getValue().asText()), AlterConfigOp.OpType.SET)));
                ops.put(new ConfigResource(ConfigResource.Type.TOPIC, t.get("name").asText()), set);
            }
            admin.incrementalAlterConfigs(ops).all().get();
            long deadline = System.currentTimeMillis() + 60_000;
            while (true) {  // the broker answers DescribeConfigs from the metadata it has applied
                Map<ConfigResource, Config> now = admin.describeConfigs(ops.keySet()).all().get();
                boolean applied = true;
                for (Map.Entry<ConfigResource, Collection<AlterConfigOp>> e : ops.entrySet()) {
                    for (AlterConfigOp op : e.getValue()) {
                        ConfigEntry entry = now.get(e.getKey()).get(op.configEntry().name());
                        applied &= entry != null && op.configEntry().value().equals(entry.value());
                    }
                }
                if (applied) break;
                if (System.currentTimeMillis() > deadline) throw new IllegalStateException("configs not applied: " + now);
                Thread.sleep(100);
            }
        }
    }

    static ObjectNode produce(String bootstrap, JsonNode run) throws Exception {
        String mode = run.path("mode").asText("plain");
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, run.path("compression").asText("none"));
        props.put(ProducerConfig.LINGER_MS_CONFIG, run.path("linger_ms").asText("0"));
        props.put(ProducerConfig.BATCH_SIZE_CONFIG, run.path("batch_size").asText("16384"));
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, mode.equals("plain") ? "false" : "true");
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        if (mode.equals("plain")) props.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "1");
        if (mode.equals("transactional")) {
            props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, run.get("transactional_id").asText());
        }
        run.path("props").fields().forEachRemaining(e -> props.put(e.getKey(), e.getValue().asText()));

        String topic = run.get("topic").asText();
        Integer partition = run.has("partition") && !run.get("partition").isNull()
            ? run.get("partition").asInt() : null;
        ObjectNode result = JSON.createObjectNode();
        ArrayNode groups = result.putArray("groups");
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            if (mode.equals("transactional")) producer.initTransactions();
            for (JsonNode group : run.path("groups")) {
                long pause = group.path("pause_ms").asLong(0);
                if (pause > 0) Thread.sleep(pause);
                if (group.has("wait_for")) waitFor(new File(group.get("wait_for").asText()));
                String end = group.path("end").asText(mode.equals("transactional") ? "commit" : "flush");
                if (mode.equals("transactional")) producer.beginTransaction();
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                for (JsonNode r : group.path("records")) {
                    Long ts = r.has("timestamp") && !r.get("timestamp").isNull() ? r.get("timestamp").asLong() : null;
                    ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(topic, partition, ts,
                        bytes(r.get("key")), value(r));
                    for (JsonNode h : r.path("headers")) {
                        record.headers().add(new RecordHeader(h.get(0).asText(), bytes(h.get(1))));
                    }
                    sent.add(producer.send(record));
                }
                producer.flush();  // every record has its offset, also those of a transaction to abort
                ArrayNode acked = groups.addArray();
                for (Future<RecordMetadata> f : sent) {
                    RecordMetadata m = f.get();
                    ObjectNode o = acked.addObject();
                    o.put("partition", m.partition());
                    o.put("offset", m.offset());
                    o.put("timestamp", m.timestamp());
                }
                if (mode.equals("transactional")) {
                    if (end.equals("abort")) producer.abortTransaction();
                    else producer.commitTransaction();
                }
                if (group.has("signal")) {  // written whole, then renamed: the reader never sees half
                    File signal = new File(group.get("signal").asText());
                    File partial = new File(signal.getPath() + ".partial");
                    JSON.writeValue(partial, result);
                    if (!partial.renameTo(signal)) throw new IllegalStateException("cannot write " + signal);
                }
            }
        }
        return result;
    }

    static void waitFor(File file) throws InterruptedException {
        long deadline = System.currentTimeMillis() + 600_000;
        while (!file.exists()) {
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("no " + file + " in time");
            Thread.sleep(100);
        }
    }

    static byte[] value(JsonNode record) {
        JsonNode encoded = record.get("value_base64");
        return encoded != null && !encoded.isNull() ? Base64.getDecoder().decode(encoded.asText()) : bytes(record.get("value"));
    }

    static byte[] bytes(JsonNode node) {
        return node == null || node.isNull() ? null : node.asText().getBytes(StandardCharsets.UTF_8);
    }
}
