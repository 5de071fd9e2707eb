/*
 * A fast bulk producer for the benchmarks against Kafka itself (benchmarks/kafka_cleaner.py,
 * benchmarks/kafka_source.py): keyed updates through a real broker with Apache Kafka's own Java client,
 * which kafka-producer-perf-test (ProducerPerformance) cannot make, as it sends no keys. Run with Java's
 * single-source launcher, the Kafka jars on the class path:
 *
 *   java -cp '<libs>/*' benchmarks/BulkProducer.java --bootstrap 127.0.0.1:9092 --topic t \
 *       [--partitions 4] [--config cleanup.policy=compact ...] [--bytes N | --records N] [--keys 1000000] \
 *       [--value-min 100] [--value-max 400] [--tombstone-ratio 0] [--compression lz4] \
 *       [--batch-size 65536] [--linger-ms 10] [--acks all] [--seed 1]
 *
 * Creates the topic (replication factor 1, each --config a topic config) unless it exists, then sends
 * records until --records are sent or, with --bytes, until the client's producer-topic-metrics
 * "byte-total" (the record batches sent for the topic, compressed: what the broker appends) reaches N.
 * Keys are "user-%08d" drawn uniformly from --keys with a seeded generator, so every key is updated
 * about records/keys times; partitions come from the client's default partitioner (murmur2 of the key).
 * Values are JSON-like text of --value-min..--value-max bytes (a few fields and words from a fixed
 * vocabulary), which compresses as such text does; --tombstone-ratio of the records have a null value.
 * The producer is Kafka 4.x's default: idempotent, acks=all.
 *
 * Prints one JSON object to stdout: {"records": n, "tombstones": n, "uncompressed_bytes": n,
 * "batch_bytes": n, "seconds": s}. Any send error fails the program (exit 1).
 */
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.SplittableRandom;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class BulkProducer {
    static final String[] STATUS = {"ACTIVE", "PENDING", "SUSPENDED", "CLOSED", "REVIEW"};

    public static void main(String[] args) throws Exception {
        Map<String, String> opt = new HashMap<>();
        Map<String, String> topicConfigs = new HashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) usage("bad argument " + args[i]);
            String name = args[i].substring(2), value = args[i + 1];
            if (name.equals("config")) {
                String[] kv = value.split("=", 2);
                if (kv.length != 2) usage("--config wants KEY=VALUE, not " + value);
                topicConfigs.put(kv[0], kv[1]);
            } else {
                opt.put(name, value);
            }
        }
        String bootstrap = need(opt, "bootstrap"), topic = need(opt, "topic");
        long maxRecords = Long.parseLong(opt.getOrDefault("records", "0"));
        long maxBytes = Long.parseLong(opt.getOrDefault("bytes", "0"));
        if ((maxRecords > 0) == (maxBytes > 0)) usage("give exactly one of --records and --bytes");
        int keys = Integer.parseInt(opt.getOrDefault("keys", "1000000"));
        int valueMin = Integer.parseInt(opt.getOrDefault("value-min", "100"));
        int valueMax = Integer.parseInt(opt.getOrDefault("value-max", "400"));
        double tombstones = Double.parseDouble(opt.getOrDefault("tombstone-ratio", "0"));
        SplittableRandom random = new SplittableRandom(Long.parseLong(opt.getOrDefault("seed", "1")));

        createTopic(bootstrap, topic, Integer.parseInt(opt.getOrDefault("partitions", "4")), topicConfigs);

        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, opt.getOrDefault("compression", "lz4"));
        props.put(ProducerConfig.BATCH_SIZE_CONFIG, opt.getOrDefault("batch-size", "65536"));
        props.put(ProducerConfig.LINGER_MS_CONFIG, opt.getOrDefault("linger-ms", "10"));
        props.put(ProducerConfig.ACKS_CONFIG, opt.getOrDefault("acks", "all"));
        // small, so that --bytes is overshot little: what is buffered is not counted in byte-total yet
        props.put(ProducerConfig.BUFFER_MEMORY_CONFIG, String.valueOf(16L << 20));
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "300000");

        String[] words = vocabulary(new SplittableRandom(7), 2048);
        AtomicLong acked = new AtomicLong();
        AtomicReference<Exception> failure = new AtomicReference<>();
        long records = 0, tombstoneCount = 0, uncompressed = 0;
        long start = System.nanoTime();
        double batchBytes;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            Metric byteTotal = null;
            StringBuilder text = new StringBuilder(valueMax + 64);
            while (true) {
                if (maxRecords > 0 && records >= maxRecords) break;
                if (maxBytes > 0 && records % 1000 == 0) {  // the metric appears with the topic's first batch
                    if (byteTotal == null) byteTotal = topicByteTotal(producer, topic);
                    if (byteTotal != null && ((Number) byteTotal.metricValue()).doubleValue() >= maxBytes) break;
                }
                if (failure.get() != null) throw failure.get();
                int k = random.nextInt(keys);
                byte[] key = key(k);
                byte[] value = null;
                if (tombstones > 0 && random.nextDouble() < tombstones) {
                    tombstoneCount++;
                } else {
                    value = value(text, random, words, k, records, random.nextInt(valueMin, valueMax + 1));
                    uncompressed += value.length;
                }
                uncompressed += key.length;
                producer.send(new ProducerRecord<>(topic, key, value), (metadata, err) -> {
                    if (err != null) failure.compareAndSet(null, err);
                    else acked.incrementAndGet();
                });
                records++;
            }
            producer.flush();
            if (failure.get() != null) throw failure.get();
            Metric sent = topicByteTotal(producer, topic);
            batchBytes = sent == null ? -1 : ((Number) sent.metricValue()).doubleValue();
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        if (acked.get() != records) throw new IllegalStateException(acked.get() + " of " + records + " records acked");
        System.out.printf("{\"records\": %d, \"tombstones\": %d, \"uncompressed_bytes\": %d, \"batch_bytes\": %.0f, "
                          + "\"seconds\": %.3f}%n", records, tombstoneCount, uncompressed, batchBytes, seconds);
        System.out.flush();
        System.exit(0);
    }

    /** "user-%08d" without String.format. */
    static byte[] key(int k) {
        byte[] key = {'u', 's', 'e', 'r', '-', '0', '0', '0', '0', '0', '0', '0', '0'};
        for (int i = key.length - 1; k > 0 && i >= 5; i--, k /= 10) key[i] = (byte) ('0' + k % 10);
        return key;
    }

    /** JSON-like text of exactly `length` bytes: a few fields, then words of the vocabulary. */
    static byte[] value(StringBuilder text, SplittableRandom random, String[] words, int key, long seq, int length) {
        text.setLength(0);
        text.append("{\"user\":").append(key).append(",\"seq\":").append(seq)
            .append(",\"status\":\"").append(STATUS[random.nextInt(STATUS.length)])
            .append("\",\"amount\":").append(random.nextInt(1_000_000) / 100.0)
            .append(",\"note\":\"");
        while (text.length() < length - 2) text.append(words[random.nextInt(words.length)]).append(' ');
        text.setLength(Math.max(0, length - 2));
        text.append("\"}");
        return text.toString().getBytes(StandardCharsets.US_ASCII);
    }

    static String[] vocabulary(SplittableRandom random, int n) {
        String[] words = new String[n];
        for (int i = 0; i < n; i++) {
            char[] w = new char[random.nextInt(3, 11)];
            for (int j = 0; j < w.length; j++) w[j] = (char) ('a' + random.nextInt(26));
            words[i] = new String(w);
        }
        return words;
    }

    static Metric topicByteTotal(KafkaProducer<?, ?> producer, String topic) {
        for (Map.Entry<MetricName, ? extends Metric> e : producer.metrics().entrySet()) {
            MetricName name = e.getKey();
            if (name.group().equals("producer-topic-metrics") && name.name().equals("byte-total")
                    && topic.equals(name.tags().get("topic"))) {
                return e.getValue();
            }
        }
        return null;  // registered with the topic's first batch
    }

    static void createTopic(String bootstrap, String topic, int partitions, Map<String, String> configs) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(props)) {
            List<NewTopic> requests = new ArrayList<>();
            requests.add(new NewTopic(topic, partitions, (short) 1).configs(configs));
            try {
                admin.createTopics(requests).all().get();
            } catch (ExecutionException err) {
                if (!(err.getCause() instanceof TopicExistsException)) throw err;
            }
        }
    }

    static String need(Map<String, String> opt, String name) {
        String value = opt.get(name);
        if (value == null) usage("--" + name + " is required");
        return value;
    }

    static void usage(String why) {
        System.err.println(why + "\nusage: java -cp '<kafka libs>/*' BulkProducer.java --bootstrap HOST:PORT --topic T "
                           + "[--bytes N | --records N] [options: see the file's header]");
        System.exit(2);
    }
}
