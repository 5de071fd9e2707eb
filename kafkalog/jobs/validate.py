"""`kafkalog validate` as a Spark application: CRCs, structure, offsets, indexes, snapshots, checkpoints.

    spark-submit [Spark options] jobs/validate.py PATH... [the options of `kafkalog validate --help`]

See jobs/README.md of the repository; `python -m kafkalog.jobs --path NAME` prints where this file is installed.
"""

import sys

from kafkalog.jobs import main

if __name__ == "__main__":
    sys.exit(main("validate"))
