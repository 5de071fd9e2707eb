/*
 * The Java client's own partitioner, for tests/kafka: BuiltInPartitioner.partitionForKey of each key.
 * Run with Java's single-source launcher (Java 11+), the Kafka jars on the class path:
 *
 *   java -cp '<libs>/*' tests/kafka/Partitioner.java KEYS.txt N
 *
 * KEYS.txt holds one key a line, in hex (an empty line is the empty key). Prints one partition a line.
 */
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;

public class Partitioner {
    public static void main(String[] args) throws Exception {
        int partitions = Integer.parseInt(args[1]);
        StringBuilder out = new StringBuilder();
        for (String line : Files.readAllLines(Path.of(args[0]))) {
            out.append(BuiltInPartitioner.partitionForKey(HexFormat.of().parseHex(line), partitions)).append('\n');
        }
        System.out.print(out);
    }
}
