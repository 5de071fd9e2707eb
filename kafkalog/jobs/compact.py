"""`kafkalog compact` as a Spark application: one Kafka cleaning pass per chosen partition.

    spark-submit [Spark options] jobs/compact.py LOG_DIR [the options of `kafkalog compact --help`]

See jobs/README.md of the repository; `python -m kafkalog.jobs --path NAME` prints where this file is installed.
"""

import sys

from kafkalog.jobs import main

if __name__ == "__main__":
    sys.exit(main("compact"))
