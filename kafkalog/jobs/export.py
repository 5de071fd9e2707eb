"""`kafkalog export` as a Spark application: a topic as a Delta, Iceberg or Parquet table.

    spark-submit [Spark options] jobs/export.py LOG_DIR --topic T --output PATH [options of `kafkalog export`]

See jobs/README.md of the repository; `python -m kafkalog.jobs --path NAME` prints where this file is installed.
"""

import sys

from kafkalog.jobs import main

if __name__ == "__main__":
    sys.exit(main("export"))
