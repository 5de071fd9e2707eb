// Kafka's own MemoryRecords.filterTo, the step of its LogCleaner that rewrites batches, on a file of batches.
//
//     java -cp '<kafka libs>/*' FilterTo.java IN OUT REMOVED_OFFSETS NOW_MS DELETE_RETENTION_MS
//
// Every batch of IN is kept if a record survives (DELETE_EMPTY); the records whose offsets are in
// REMOVED_OFFSETS (comma-separated, may be empty) go, the others stay. What filterTo writes goes to OUT.
// tests/kafka/test_filter_to.py compares it with kafkalog's rewrite of the same batches.

import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Set;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.Record;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.utils.BufferSupplier;

public class FilterTo {
    public static void main(String[] args) throws Exception {
        MemoryRecords records = MemoryRecords.readableRecords(ByteBuffer.wrap(Files.readAllBytes(Path.of(args[0]))));
        Set<Long> removed = new HashSet<>();
        for (String offset : args[2].split(",")) {
            if (!offset.isEmpty()) removed.add(Long.parseLong(offset));
        }
        MemoryRecords.RecordFilter filter = new MemoryRecords.RecordFilter(Long.parseLong(args[3]), Long.parseLong(args[4])) {
            @Override
            protected BatchRetentionResult checkBatchRetention(RecordBatch batch) {
                return new BatchRetentionResult(BatchRetention.DELETE_EMPTY, false);
            }

            @Override
            protected boolean shouldRetainRecord(RecordBatch batch, Record record) {
                return !removed.contains(record.offset());
            }
        };
        ByteBuffer out = ByteBuffer.allocate(records.sizeInBytes() * 2 + 1024);
        MemoryRecords.FilterResult result = records.filterTo(filter, out, BufferSupplier.NO_CACHING);
        ByteBuffer written = result.outputBuffer();
        written.flip();
        byte[] bytes = new byte[written.remaining()];
        written.get(bytes);
        Files.write(Path.of(args[1]), bytes);
    }
}
