"""`kafkalog repartition` as a Spark application: a topic moved into N partitions by its keys.

    spark-submit [Spark options] jobs/repartition.py LOG_DIR [the options of `kafkalog repartition --help`]

See jobs/README.md of the repository; `python -m kafkalog.jobs --path NAME` prints where this file is installed.
"""

import sys

from kafkalog.jobs import main

if __name__ == "__main__":
    sys.exit(main("repartition"))
