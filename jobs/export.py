"""`kafkalog export` as a Spark application: a topic as a Delta, Iceberg or Parquet table.

    spark-submit [Spark options] jobs/export.py LOG_DIR --topic T --output PATH [options of `kafkalog export`]

See jobs/README.md.
"""

import sys

from kafkalog.job import main

if __name__ == "__main__":
    sys.exit(main("export"))
