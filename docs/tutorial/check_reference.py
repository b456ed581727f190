#!/usr/bin/env python3
"""Checks that the reference pages (docs/reference/, with docs/policies.md for the policies)
name every strata type and free function the tutorial's programs use: a name declared in
include/strata (struct, class, enum, alias, concept, or a function at namespace scope) and
written in a step's code, not after '.', '->' or a std:: qualifier."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2])
headers = "\n".join(p.read_text() for p in (root / "include/strata").rglob("*.hpp"))
types = set(re.findall(r"\b(?:struct|class|enum class|enum|using|concept)\s+([A-Za-z_]\w*)", headers))
functions = set(re.findall(r"^(?:template <.*>\n)?(?:inline |constexpr |STRATA_DECL )*(?:auto|int|void|std::[\w:<>]+|[a-z_]+)\s+([a-z_]\w*)\(",
                           headers, re.M))
declared = {n for n in types | functions if len(n) > 2}
reference = "\n".join(p.read_text() for p in (root / "docs/reference").glob("*.md"))
reference += (root / "docs/policies.md").read_text()

failures = 0
for program in sorted((root / "docs/tutorial").glob("[0-9][0-9]_*.cpp")):
    code = re.sub(r"//.*", "", program.read_text())
    used = set(re.findall(r"(?<![.>\w])(?<!std::)(?<!ranges::)([A-Za-z_]\w*)\b", code))
    for name in sorted(used & declared):
        if not re.search(rf"\b{re.escape(name)}\b", reference):
            print(f"{program.name}: uses {name}, which no reference page names")
            failures += 1
sys.exit(1 if failures else 0)
