"""`kafkalog validate` as a Spark application: CRCs, structure, offsets, indexes, snapshots, checkpoints.

    spark-submit [Spark options] jobs/validate.py PATH... [the options of `kafkalog validate --help`]

See jobs/README.md.
"""

import sys

from kafkalog.job import main

if __name__ == "__main__":
    sys.exit(main("validate"))
