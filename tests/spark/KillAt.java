import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Iterator;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.util.Progressable;

/**
 * For tests/spark/test_export_kill.py only: a kill -9 of a Spark process at one point of a table write,
 * where Python cannot reach (delta-spark writes in the JVM). KAFKALOG_KILL_AT names the point:
 * "data" (a data file of the table opened for writing, nothing in it yet), "before-commit" or
 * "after-commit" (around the write of the Delta commit KAFKALOG_KILL_PATH names). There the Python
 * process that started this JVM gets SIGKILL and the JVM halts: no handler of either runs. Before
 * that, the point and path are written to KAFKALOG_KILL_MARK, so that the test knows where it fell.
 */
public final class KillAt {
    private static final String POINT = System.getenv("KAFKALOG_KILL_AT");
    private static final String PATH = System.getenv("KAFKALOG_KILL_PATH");

    private KillAt() {}

    static void at(String point, Path path) throws IOException {
        String p = path.toUri().getPath();
        boolean here = point.equals("data")
                ? p.startsWith(PATH + "/") && p.endsWith(".parquet") && !p.contains("/_delta_log/")
                : p.equals(PATH);
        if (!point.equals(POINT) || !here) {
            return;
        }
        Files.write(Paths.get(System.getenv("KAFKALOG_KILL_MARK")), (point + " " + p).getBytes(StandardCharsets.UTF_8));
        ProcessHandle.current().parent().ifPresent(ProcessHandle::destroyForcibly);
        Runtime.getRuntime().halt(137);
    }

    /** fs.file.impl: the local file system, which kills at the opening of the table's first new data file. */
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

    /** spark.delta.logStore.file.impl: Delta's own store for local paths, which kills around the commit's write. */
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
