"""`kafkalog retain` as a Spark application: Kafka's retention, deleteRecords, consumed retention.

    spark-submit [Spark options] jobs/retain.py LOG_DIR [the options of `kafkalog retain --help`]

See jobs/README.md of the repository; `python -m kafkalog.jobs --path NAME` prints where this file is installed.
"""

import sys

from kafkalog.jobs import main

if __name__ == "__main__":
    sys.exit(main("retain"))
