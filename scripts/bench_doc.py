"""Run every benchmark of benchmarks/ and rewrite their results in docs/benchmarks.md (see scripts/bench.sh).

A result in docs/benchmarks.md sits between `<!-- bench: COMMAND -->` and `<!-- /bench -->`: the
command runs from the repository root and its standard output replaces what is between the two.
A benchmark that no block runs gets a new section at the end of the file, run without arguments.
The text between `<!-- machine -->` and `<!-- /machine -->` is rewritten with this machine and
today's date. Everything else is prose written by hand and is kept: read it again after a run, as
new numbers may need new words. The file is written only once every benchmark has succeeded.
"""

from __future__ import annotations

import ast
import datetime
import os
import platform
import re
import shlex
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "benchmarks.md"
BLOCK = re.compile(r"<!-- bench: (?P<command>.+?) -->\n.*?<!-- /bench -->", re.S)
MACHINE = re.compile(r"<!-- machine -->.*?<!-- /machine -->", re.S)


def main() -> None:
    text = DOC.read_text(encoding="utf-8")
    commands = [m["command"] for m in BLOCK.finditer(text)]
    for script in sorted((REPO / "benchmarks").glob("*.py")):
        relative = str(script.relative_to(REPO))
        if not any(relative in shlex.split(c) for c in commands):
            command = f".venv/bin/python {relative}"
            text = text.rstrip("\n") + "\n\n" + new_section(script, command)
            commands.append(command)
    results = {}
    for command in commands:
        print(f"== {command}", flush=True)
        results[command] = subprocess.run(
            shlex.split(command), cwd=REPO, stdout=subprocess.PIPE, text=True, check=True
        ).stdout.strip()
    text = BLOCK.sub(lambda m: block(m["command"], results[m["command"]]), text)
    text = MACHINE.sub(lambda m: f"<!-- machine -->{machine()}<!-- /machine -->", text)
    DOC.write_text(text, encoding="utf-8")
    print(f"rewrote {DOC.relative_to(REPO)}")


def block(command: str, output: str) -> str:
    return f"<!-- bench: {command} -->\n`{command}`\n\n{output}\n<!-- /bench -->"


def new_section(script: Path, command: str) -> str:
    """A heading, the first paragraph of the benchmark's docstring, and an empty result block."""
    doc = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
    about = doc.split("\n\n")[0].replace("\n", " ")
    return f"## `benchmarks/{script.name}`\n\n{about}\n\n<!-- bench: {command} -->\n<!-- /bench -->\n"


def machine() -> str:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"Measured on a {os.cpu_count()}-core, {memory:.0f} GiB machine (Python {platform.python_version()}), "
        f"{datetime.date.today().isoformat()}."
    )


if __name__ == "__main__":
    main()
