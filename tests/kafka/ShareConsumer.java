/*
 * A share group (KIP-932) consuming from a real Kafka 4.x broker with Apache Kafka's own
 * KafkaShareConsumer, for tests/kafka. Run with Java's single-source launcher:
 *
 *   java -cp '<libs>/*' tests/kafka/ShareConsumer.java BOOTSTRAP GROUP TOPIC RECORDS
 *
 * Sets the group's share.auto.offset.reset to earliest, subscribes to TOPIC, accepts (explicit
 * acknowledgement) exactly RECORDS records in the order they are delivered and releases none, commits
 * the acknowledgements and leaves. Then prints one JSON object: {"acknowledged": [[partition, offset],
 * ...], "startOffsets": {partition: start offset}} where the start offsets are what the share
 * coordinator reports (Admin.listShareGroupOffsets). A run longer than 60 s fails (exit 1).
 */
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class ShareConsumer {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], topic = args[2];
        int wanted = Integer.parseInt(args[3]);
        Properties adminProps = new Properties();
        adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        ObjectMapper json = new ObjectMapper();
        ObjectNode out = json.createObjectNode();
        ArrayNode acknowledged = out.putArray("acknowledged");
        try (Admin admin = Admin.create(adminProps)) {
            ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
            AlterConfigOp earliest = new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET);
            admin.incrementalAlterConfigs(Map.of(resource, List.of(earliest))).all().get();

            Properties props = new Properties();
            props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            props.put("share.acknowledgement.mode", "explicit");
            long deadline = System.currentTimeMillis() + 60_000;
            try (KafkaShareConsumer<byte[], byte[]> consumer =
                     new KafkaShareConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
                consumer.subscribe(List.of(topic));
                int done = 0;
                while (done < wanted) {
                    if (System.currentTimeMillis() > deadline) {
                        throw new RuntimeException("share consumer: only " + done + " of " + wanted + " records in 60 s");
                    }
                    for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
                        // beyond the wanted count: released, so the share partition keeps them available
                        consumer.acknowledge(record, done < wanted ? AcknowledgeType.ACCEPT : AcknowledgeType.RELEASE);
                        if (done < wanted) {
                            acknowledged.addArray().add(record.partition()).add(record.offset());
                        }
                        done++;
                    }
                    consumer.commitSync();
                }
            }
            Map<TopicPartition, SharePartitionOffsetInfo> offsets =
                admin.listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec())).partitionsToOffsetInfo(group).get();
            ObjectNode starts = out.putObject("startOffsets");
            offsets.forEach((tp, info) -> starts.put(String.valueOf(tp.partition()), info.startOffset()));
        }
        System.out.println(json.writeValueAsString(out));
    }
}
