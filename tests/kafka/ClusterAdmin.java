/*
 * Watches and moves partition leaders in a real Kafka cluster with Apache Kafka's own Admin client,
 * for tests/kafka (tests/kafka/cluster.py). Run with Java's single-source launcher (Java 11+), the
 * Kafka jars on the class path:
 *
 *   java -cp '<libs>/*' tests/kafka/ClusterAdmin.java SPEC.json
 *
 * SPEC.json: {"bootstrap": "127.0.0.1:9092", "tasks": [TASK, ...]}, each TASK one of
 *
 *   {"kind": "describe", "topics": ["t", ...]}
 *       the partitions as the cluster's metadata has them now.
 *   {"kind": "in_sync", "topics": ["t", ...]}
 *       waits until every partition has a leader and its ISR is all its replicas.
 *   {"kind": "lead", "broker": 2, "topics": ["t", ...],
 *    "ends": [{"topic": "t", "partition": 0, "offset": 42}, ...]}
 *       makes `broker` the leader of every partition of the topics, as kafka-reassign-partitions.sh
 *       and kafka-leader-election.sh would: a reassignment to the same replicas with `broker` first
 *       (its preferred leader), then a preferred leader election; waits until it leads them all with
 *       the ISR complete and, with "ends", until each partition's high watermark (ListOffsets
 *       latest, answered by the leader) is the given offset.
 *
 * Prints one JSON object to stdout: {"results": [RESULT, ...]} in the tasks' order, each RESULT
 * {"partitions": [{"topic", "partition", "leader" (-1: none), "replicas": [...], "isr": [...]}]} as
 * the task left them. "timeout_ms" (default 60000) bounds a task; running out of time fails the
 * program (exit 1).
 */
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.File;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Predicate;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.ElectionNotNeededException;

public class ClusterAdmin {
    static final ObjectMapper JSON = new ObjectMapper();

    /** One partition as the metadata has it. */
    record Placement(TopicPartition tp, int leader, List<Integer> replicas, List<Integer> isr) {
        boolean inSync() {
            return leader >= 0 && new HashSet<>(isr).equals(new HashSet<>(replicas));
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: java -cp '<kafka libs>/*' ClusterAdmin.java SPEC.json");
            System.exit(2);
        }
        JsonNode spec = JSON.readTree(new File(args[0]));
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, spec.get("bootstrap").asText());
        ObjectNode out = JSON.createObjectNode();
        ArrayNode results = out.putArray("results");
        try (Admin admin = Admin.create(props)) {
            for (JsonNode task : spec.path("tasks")) {
                long deadline = System.currentTimeMillis() + task.path("timeout_ms").asLong(60000);
                List<String> topics = new ArrayList<>();
                task.path("topics").forEach(t -> topics.add(t.asText()));
                String kind = task.get("kind").asText();
                Map<TopicPartition, Placement> now;
                switch (kind) {
                    case "describe": now = describe(admin, topics); break;
                    case "in_sync": now = waitFor(admin, topics, deadline, "in sync", Placement::inSync); break;
                    case "lead": now = lead(admin, topics, task.get("broker").asInt(), task.path("ends"), deadline); break;
                    default: throw new IllegalArgumentException("unknown task kind " + kind);
                }
                results.add(json(now));
            }
        }
        System.out.println(JSON.writeValueAsString(out));
        System.out.flush();
        System.exit(0);
    }

    static Map<TopicPartition, Placement> lead(Admin admin, List<String> topics, int broker, JsonNode ends,
                                               long deadline) throws Exception {
        Map<TopicPartition, Optional<NewPartitionReassignment>> reorder = new HashMap<>();
        for (Placement p : waitFor(admin, topics, deadline, "in sync", Placement::inSync).values()) {
            if (!p.replicas().contains(broker)) throw new IllegalStateException(p + " has no replica on " + broker);
            List<Integer> replicas = new ArrayList<>(List.of(broker));
            p.replicas().stream().filter(r -> r != broker).forEach(replicas::add);
            reorder.put(p.tp(), Optional.of(new NewPartitionReassignment(replicas)));
        }
        admin.alterPartitionReassignments(reorder).all().get();
        waitFor(admin, topics, deadline, "broker " + broker + " first in the replicas",
            p -> p.replicas().get(0) == broker);
        Map<TopicPartition, Optional<Throwable>> elected =
            admin.electLeaders(ElectionType.PREFERRED, reorder.keySet()).partitions().get();
        for (Map.Entry<TopicPartition, Optional<Throwable>> e : elected.entrySet()) {
            Throwable err = e.getValue().orElse(null);
            if (err != null && !(err instanceof ElectionNotNeededException)) {
                throw new IllegalStateException("preferred leader election of " + e.getKey() + " failed", err);
            }
        }
        Map<TopicPartition, Placement> led = waitFor(admin, topics, deadline, "led by broker " + broker + " in sync",
            p -> p.leader() == broker && p.inSync());
        Map<TopicPartition, Long> wanted = new HashMap<>();
        for (JsonNode e : ends) {
            wanted.put(new TopicPartition(e.get("topic").asText(), e.get("partition").asInt()), e.get("offset").asLong());
        }
        Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
        wanted.keySet().forEach(tp -> latest.put(tp, OffsetSpec.latest()));
        while (!wanted.isEmpty()) {
            Map<TopicPartition, Long> found = new HashMap<>();
            admin.listOffsets(latest).all().get().forEach((tp, info) -> found.put(tp, info.offset()));
            if (found.equals(wanted)) break;
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("high watermarks " + found + ", not " + wanted + ", in time");
            }
            Thread.sleep(100);
        }
        return led;
    }

    /** Waits until every partition of the topics satisfies `condition`; returns them as they are then. */
    static Map<TopicPartition, Placement> waitFor(Admin admin, List<String> topics, long deadline, String what,
                                                  Predicate<Placement> condition) throws Exception {
        while (true) {
            Map<TopicPartition, Placement> now = describe(admin, topics);
            if (now.values().stream().allMatch(condition)) return now;
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("the partitions were not " + what + " in time: " + now.values());
            }
            Thread.sleep(100);
        }
    }

    static Map<TopicPartition, Placement> describe(Admin admin, List<String> topics) throws Exception {
        Map<TopicPartition, Placement> out = new TreeMap<>((a, b) -> a.topic().equals(b.topic())
            ? Integer.compare(a.partition(), b.partition()) : a.topic().compareTo(b.topic()));
        for (TopicDescription d : admin.describeTopics(topics).allTopicNames().get().values()) {
            for (TopicPartitionInfo p : d.partitions()) {
                TopicPartition tp = new TopicPartition(d.name(), p.partition());
                Node leader = p.leader();
                out.put(tp, new Placement(tp, leader == null || leader.isEmpty() ? -1 : leader.id(),
                    p.replicas().stream().map(Node::id).toList(), p.isr().stream().map(Node::id).toList()));
            }
        }
        return out;
    }

    static ObjectNode json(Map<TopicPartition, Placement> placements) {
        ObjectNode result = JSON.createObjectNode();
        ArrayNode partitions = result.putArray("partitions");
        for (Placement p : placements.values()) {
            ObjectNode o = partitions.addObject();
            o.put("topic", p.tp().topic());
            o.put("partition", p.tp().partition());
            o.put("leader", p.leader());
            p.replicas().forEach(o.putArray("replicas")::add);
            p.isr().forEach(o.putArray("isr")::add);
        }
        return result;
    }
}
