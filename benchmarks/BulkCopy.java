/*
 * What users do today to repartition a topic: consume it and produce it again through the cluster, with
 * Apache Kafka's own Java clients (benchmarks/repartition.py). Run with Java's single-source launcher,
 * the Kafka jars on the class path:
 *
 *   java -cp '<libs>/*' benchmarks/BulkCopy.java --bootstrap 127.0.0.1:9092 --from t --to t12 \
 *       [--compression lz4] [--batch-size 65536] [--linger-ms 10]
 *
 * A read_committed consumer (no group: every partition assigned, from the earliest offset to the end
 * offsets it sees at the start) hands each record's key, value, headers and timestamp to a producer
 * (Kafka 4.x's default: idempotent, acks=all; the default partitioner, murmur2 of the key), which is
 * flushed at the end. Prints one JSON object: {"records": n, "seconds": s}.
 */
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class BulkCopy {
    public static void main(String[] args) throws Exception {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) opts.put(args[i].substring(2), args[i + 1]);
        String bootstrap = opts.get("bootstrap"), from = opts.get("from"), to = opts.get("to");
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "5000");
        c.put(ConsumerConfig.FETCH_MAX_BYTES_CONFIG, String.valueOf(64 << 20));
        c.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, String.valueOf(8 << 20));
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, opts.getOrDefault("compression", "lz4"));
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, opts.getOrDefault("batch-size", "65536"));
        p.put(ProducerConfig.LINGER_MS_CONFIG, opts.getOrDefault("linger-ms", "10"));
        p.put(ProducerConfig.BUFFER_MEMORY_CONFIG, String.valueOf(128L << 20));
        long records = 0;
        long start = System.nanoTime();
        try (KafkaConsumer<byte[], byte[]> consumer =
                 new KafkaConsumer<>(c, new ByteArrayDeserializer(), new ByteArrayDeserializer());
             KafkaProducer<byte[], byte[]> producer =
                 new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            List<TopicPartition> parts = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(from)) parts.add(new TopicPartition(from, info.partition()));
            consumer.assign(parts);
            consumer.seekToBeginning(parts);
            Map<TopicPartition, Long> ends = consumer.endOffsets(parts);
            while (true) {
                boolean done = true;
                for (TopicPartition tp : parts) done &= consumer.position(tp) >= ends.get(tp);
                if (done) break;
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    producer.send(new ProducerRecord<>(to, null, r.timestamp(), r.key(), r.value(), r.headers()));
                    records++;
                }
            }
            producer.flush();
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        System.out.println("{\"records\": " + records + ", \"seconds\": " + seconds + "}");
    }
}
