import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.util.Progressable;

/**
 * For tests/spark/test_export_kill.py only: what a kill -9 of a Spark process leaves at points of a table
 * write where no Python hook reaches (delta-spark writes in the JVM). KAFKALOG_KILL_POINTS holds entries
 * "point|path|action" separated by ";". The points: "data" (a data file of the table at path opened for
 * writing, nothing in it yet), "before-commit" and "after-commit" (around the write of the Delta commit
 * file at path). The actions: "copy:DIR" copies the table's directory to DIR there (the disk a kill at
 * that instant leaves: the writing thread waits meanwhile) and goes on; "kill" sends SIGKILL to the Python
 * process that started this JVM and halts the JVM: no handler of either runs. Each entry acts once, and
 * appends "point path action" to the file KAFKALOG_KILL_MARK first.
 */
public final class KillAt {
    private static final List<String[]> ENTRIES = new ArrayList<>();

    static {
        for (String entry : System.getenv().getOrDefault("KAFKALOG_KILL_POINTS", "").split(";")) {
            if (!entry.isEmpty()) {
                ENTRIES.add(entry.split("\\|", 3));
            }
        }
    }

    private KillAt() {}

    static synchronized void at(String point, Path file) throws IOException {
        String p = file.toUri().getPath();
        for (String[] entry : ENTRIES) {
            String path = entry[1];
            boolean here = point.equals("data")
                    ? p.startsWith(path + "/") && p.endsWith(".parquet") && !p.contains("/_delta_log/")
                    : p.equals(path);
            if (!point.equals(entry[0]) || !here) {
                continue;
            }
            ENTRIES.remove(entry);
            String line = point + " " + p + " " + entry[2] + "\n";
            Files.write(Paths.get(System.getenv("KAFKALOG_KILL_MARK")), line.getBytes(StandardCharsets.UTF_8),
                    StandardOpenOption.CREATE, StandardOpenOption.APPEND);
            if (entry[2].equals("kill")) {
                ProcessHandle.current().parent().ifPresent(ProcessHandle::destroyForcibly);
                Runtime.getRuntime().halt(137);
            }
            copy(point.equals("data") ? path : new Path(p).getParent().getParent().toUri().getPath(),
                    entry[2].substring("copy:".length()));
            return;
        }
    }

    private static void copy(String table, String to) throws IOException {
        java.nio.file.Path from = Paths.get(table);
        try (Stream<java.nio.file.Path> walk = Files.walk(from)) {
            walk.forEach(source -> {
                try {
                    java.nio.file.Path target = Paths.get(to).resolve(from.relativize(source).toString());
                    if (Files.isDirectory(source)) {
                        Files.createDirectories(target);
                    } else {
                        Files.copy(source, target);
                    }
                } catch (IOException err) {
                    throw new UncheckedIOException(err);
                }
            });
        }
    }

    /** fs.file.impl: the local file system, with the point "data" at the opening of a file. */
    public static class FileSystem extends LocalFileSystem {
        @Override
        public FSDataOutputStream create(
                Path f,
                FsPermission permission,
                boolean overwrite,
                int bufferSize,
                short replication,
                long blockSize,
                Progressable progress)
                throws IOException {
            FSDataOutputStream out = super.create(f, permission, overwrite, bufferSize, replication, blockSize, progress);
            at("data", f);
            return out;
        }
    }

    /** spark.delta.logStore.file.impl: Delta's own store for local paths, with the points around a commit's write. */
    public static class LogStore extends io.delta.storage.HDFSLogStore {
        public LogStore(Configuration conf) {
            super(conf);
        }

        @Override
        public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration conf)
                throws IOException {
            at("before-commit", path);
            super.write(path, actions, overwrite, conf);
            at("after-commit", path);
        }
    }
}
