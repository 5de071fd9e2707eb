/*
 * Kafka's own log loading, for tests/kafka: each partition directory opened as a broker opens it
 * (UnifiedLog.create, after a clean shutdown: no recovery), printing one line per directory:
 *
 *   <dir> <logStartOffset> <logEndOffset>
 *
 *   java -cp '<libs>/*' tests/kafka/LogEnd.java DIR...
 *
 * The directories are read and left as they were found, apart from what loading writes itself
 * (a missing index rebuilt, a producer snapshot at the log end): run it on copies.
 */
import java.io.File;
import java.util.Map;
import java.util.Optional;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.server.util.KafkaScheduler;
import org.apache.kafka.storage.internals.log.LogConfig;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;
import org.apache.kafka.storage.internals.log.ProducerStateManagerConfig;
import org.apache.kafka.storage.internals.log.UnifiedLog;
import org.apache.kafka.storage.log.metrics.BrokerTopicStats;

public class LogEnd {
    public static void main(String[] args) throws Exception {
        KafkaScheduler scheduler = new KafkaScheduler(1);
        scheduler.startup();
        StringBuilder out = new StringBuilder();
        try {
            for (String dir : args) {
                UnifiedLog log = UnifiedLog.create(new File(dir), new LogConfig(Map.of()), 0L, 0L, scheduler,
                    new BrokerTopicStats(), Time.SYSTEM, 900000, new ProducerStateManagerConfig(86400000, false),
                    600000, new LogDirFailureChannel(1), true, Optional.empty());
                out.append(dir).append(' ').append(log.logStartOffset()).append(' ').append(log.logEndOffset()).append('\n');
                log.close();
            }
        } finally {
            scheduler.shutdown();
        }
        System.out.print(out);
    }
}
