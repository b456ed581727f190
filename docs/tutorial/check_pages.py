#!/usr/bin/env python3
"""Checks that every ```cpp block of a tutorial page NN_name.md is a verbatim run of lines of
its program NN_name.cpp, so that a page cannot show code its tested program does not run."""
import pathlib
import re
import sys

folder = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent)
failures = 0
pages = sorted(folder.glob("[0-9][0-9]_*.md"))
if not pages:
    sys.exit(f"no tutorial pages in {folder}")
for page in pages:
    program = page.with_suffix(".cpp")
    if not program.exists():
        print(f"{page.name}: no program {program.name} beside it")
        failures += 1
        continue
    source = program.read_text().splitlines()
    blocks = re.findall(r"^```cpp\n(.*?)^```", page.read_text(), flags=re.S | re.M)
    if not blocks:
        print(f"{page.name}: no ```cpp block")
        failures += 1
    for number, block in enumerate(blocks, 1):
        lines = block.rstrip("\n").split("\n")
        found = any(source[i:i + len(lines)] == lines for i in range(len(source) - len(lines) + 1))
        if not found:
            print(f"{page.name}: code block {number} (starting '{lines[0].strip()}') is not a run of lines of {program.name}")
            failures += 1
sys.exit(1 if failures else 0)
