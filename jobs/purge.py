"""`kafkalog purge` as a Spark application: every record of the given keys removed, offsets preserved.

    spark-submit [Spark options] jobs/purge.py LOG_DIR [the options of `kafkalog purge --help`]

See jobs/README.md.
"""

import sys

from kafkalog.job import main

if __name__ == "__main__":
    sys.exit(main("purge"))
