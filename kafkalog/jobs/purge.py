"""`kafkalog purge` as a Spark application: every record of the given keys removed, offsets preserved.

    spark-submit [Spark options] jobs/purge.py LOG_DIR [LOG_DIR ...] [the options of `kafkalog purge --help`]

See jobs/README.md of the repository; `python -m kafkalog.jobs --path NAME` prints where this file is installed.
"""

import sys

from kafkalog.jobs import main

if __name__ == "__main__":
    sys.exit(main("purge"))
