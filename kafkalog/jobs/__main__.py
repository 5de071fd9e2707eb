"""`python -m kafkalog.jobs`: run a job here, or say where its file and the configuration templates are.

python -m kafkalog.jobs compact LOG_DIR [options]   the job in this Python (as spark-submit would run it)
python -m kafkalog.jobs --path compact              the job's file, for spark-submit
python -m kafkalog.jobs --conf-dir                  the directory of conf templates (kafkalog.properties,
                                                    topics/, spark-defaults.conf, log4j2.properties)
"""

import sys

from . import CONF_DIR, JOBS, job_path, main

USAGE = f"""usage: python -m kafkalog.jobs {{{",".join(JOBS)}}} ARGS...   run the job in this Python
       python -m kafkalog.jobs --path {{{",".join(JOBS)}}}      print the job's file, for spark-submit
       python -m kafkalog.jobs --conf-dir                        print the conf templates' directory"""


def run(argv: list[str]) -> int:
    if argv[:1] == ["--conf-dir"] and len(argv) == 1:
        print(CONF_DIR)
        return 0
    if argv[:1] == ["--path"] and len(argv) == 2 and argv[1] in JOBS:
        print(job_path(argv[1]))
        return 0
    if argv[:1] and argv[0] in JOBS:
        return main(argv[0], argv[1:])
    print(USAGE, file=sys.stderr)
    return 0 if argv[:1] in (["-h"], ["--help"]) else 2


sys.exit(run(sys.argv[1:]))
