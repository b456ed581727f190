#!/usr/bin/env python3
"""Every numeric flag of a program, at and past its range's edges, as overflow and as text.

    every_flag.py PROGRAM [NAME]

Reads the program's --help, where every numeric flag shows its type and range
("--batch INT:[1, 60000]"), and tries:
  - every flag at its low edge, in one command line, and every flag at its high edge, in
    another: each must be accepted (STRATA_CHECK_FLAGS=1 stops the program once its command
    line is found good, so nothing runs);
  - for each flag, just below the low edge and just above the high edge (unless the edge is
    the type's limit), an overflowing number, and a word; for FLOAT also nan.
Each bad value must end the program with exit status 64 and one line on standard error
that names the flag and the value, with nothing that looks like a crash. The table in
bad_flags.txt holds the cases that need more than a range (contradicting flags, values the
data cannot meet); this covers every range, so a flag added later is covered too.
"""
import concurrent.futures
import os
import re
import subprocess
import sys

OPTION = re.compile(r"^\s+(?:-\w,)?(--[\w-]+)\s+(INT|UINT|FLOAT):\[([^,\]]+), ([^\]]+)\]")
CRASH = re.compile(r"Segmentation|core dumped|Aborted|terminate called|double free|corrupted|std::bad_alloc")
LIMITS = {"INT": (-(2**63), 2**63 - 1), "UINT": (0, 2**64 - 1)}


def numeric_options(program):
    out = subprocess.run([program, "--help"], capture_output=True, text=True, timeout=60)
    options = []
    for line in out.stdout.splitlines():
        m = OPTION.match(line)
        if m:
            options.append((m.group(1), m.group(2), m.group(3).strip(), m.group(4).strip()))
    return options


def bad_values(kind, low, high):
    values = ["ten", "99999999999999999999999999999999" if kind != "FLOAT" else "1e999"]
    if kind == "FLOAT":
        lo, hi = float(low), float(high)
        values += ["nan", repr(lo - max(1.0, abs(lo))), repr(hi + max(1.0, abs(hi)))]
    else:
        lo, hi = int(low), int(high)
        limit_lo, limit_hi = LIMITS[kind]
        if lo > limit_lo:
            values.append(str(lo - 1))
        if hi < limit_hi:
            values.append(str(hi + 1))
        if kind == "UINT":
            values.append("-1")
    return values


def run(program, *arguments):
    env = dict(os.environ, STRATA_CHECK_FLAGS="1")
    try:
        p = subprocess.run([program, *arguments], capture_output=True, text=True, timeout=120, env=env)
    except subprocess.TimeoutExpired:
        return None, "", ""
    return p.returncode, p.stdout, p.stderr


def main():
    program = sys.argv[1]
    name = sys.argv[2] if len(sys.argv) > 2 else os.path.basename(program)
    options = numeric_options(program)
    if not options:
        print(f"FAIL {name}: --help shows no numeric flag with a range")
        return 1
    # A run mostly waits for MPI's start-up, not for a core: four at a time.
    jobs = [(flag, value) for flag, kind, low, high in options for value in bad_values(kind, low, high)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda job: run(program, *job), jobs))
    failures = 0
    cases = len(jobs)
    for (flag, value), (status, out, err) in zip(jobs, results):
        lines = [l for l in err.splitlines() if l.strip()]
        problem = None
        if status is None:
            problem = "did not end within 120 s"
        elif status != 64:
            problem = f"exit status {status}, not 64"
        elif len(lines) != 1:
            problem = f"{len(lines)} lines on standard error, not 1"
        elif flag not in lines[0] or value not in lines[0]:
            problem = "the line does not name the flag and the value"
        elif CRASH.search(out + err):
            problem = "looks like a crash"
        if problem:
            failures += 1
            print(f"FAIL {name} {flag} {value}: {problem}\n  stderr: {err.strip()[:400]}")
    for edge in (2, 3):  # every flag at its low edge, then at its high edge
        arguments = [a for option in options for a in (option[0], option[edge])]
        cases += 1
        status, out, err = run(program, *arguments)
        if status != 0 or CRASH.search(out + err):
            failures += 1
            print(f"FAIL {name}: the ranges' own {'low' if edge == 2 else 'high'} edges were refused (status {status})\n"
                  f"  {' '.join(arguments)}\n  stderr: {err.strip()[:400]}")
    print(f"{name}: {len(options)} numeric flags, {cases} cases, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
