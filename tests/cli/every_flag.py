#!/usr/bin/env python3
"""Every checked flag of a program, at and past its edges: numbers, choices and booleans.

    every_flag.py PROGRAM [NAME]

Reads the program's --help, where every checked flag shows what it takes: a numeric type and
range ("--batch INT:[1, 60000]"), a set of choices ("--builder TEXT:{parallax,ps}") or a
boolean ("--overlap BOOLEAN:true|false"). It tries:
  - every numeric flag at its low edge, the first choice of each choice flag and "true" for
    each boolean, in one command line; the high edges, last choices and "false" in another;
    every other choice in a line of its own: each must be accepted (STRATA_CHECK_FLAGS=1 stops
    the program once its command line is found good, so nothing runs);
  - for each numeric flag, just below the low edge and just above the high edge (unless the
    edge is the type's limit), an overflowing number, and a word; for FLOAT also nan; for each
    choice or boolean flag, a word that is none of its values.
Each bad value must end the program with exit status 64 and one line on standard error
that names the flag and the value, with nothing that looks like a crash. The table in
bad_flags.txt holds the cases that need more than this (contradicting flags, values the
data cannot meet); this covers every checked flag, so a flag added later is covered too.
"""
import concurrent.futures
import os
import re
import subprocess
import sys

OPTION = re.compile(r"^\s+(?:-\w,)?(--[\w-]+)\s+(INT|UINT|FLOAT):\[([^,\]]+), ([^\]]+)\]")
CRASH = re.compile(r"Segmentation|core dumped|Aborted|terminate called|double free|corrupted|std::bad_alloc")
CHOICE = re.compile(r"^\s+(?:-\w,)?(--[\w-]+)\s+(?:TEXT|BOOLEAN):(?:\{([^}]+)\}|(true\|false))(?:\s|$)")
LIMITS = {"INT": (-(2**63), 2**63 - 1), "UINT": (0, 2**64 - 1)}


def checked_options(program):
    """The numeric flags as (flag, kind, low, high); the choice and boolean flags as (flag, values)."""
    out = subprocess.run([program, "--help"], capture_output=True, text=True, timeout=60)
    numeric, choices = [], []
    for line in out.stdout.splitlines():
        if m := OPTION.match(line):
            numeric.append((m.group(1), m.group(2), m.group(3).strip(), m.group(4).strip()))
        elif m := CHOICE.match(line):
            choices.append((m.group(1), m.group(2).split(",") if m.group(2) else ["true", "false"]))
    return numeric, choices


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
    options, choices = checked_options(program)
    if not options and not choices:
        print(f"FAIL {name}: --help shows no numeric flag with a range, and no choices")
        return 1
    jobs = [(flag, value) for flag, kind, low, high in options for value in bad_values(kind, low, high)]
    jobs += [(flag, "no-such-value") for flag, values in choices]
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
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
    # Good lines: the low edges with the first choices, the high edges with the last ones,
    # then each choice between.
    good = [("low edges and first choices", [a for o in options for a in (o[0], o[2])] +
             [a for flag, values in choices for a in (flag, values[0])]),
            ("high edges and last choices", [a for o in options for a in (o[0], o[3])] +
             [a for flag, values in choices for a in (flag, values[-1])])]
    good += [(f"{flag} {value}", [flag, value]) for flag, values in choices for value in values[1:-1]]
    for what, arguments in good:
        cases += 1
        status, out, err = run(program, *arguments)
        if status != 0 or CRASH.search(out + err):
            failures += 1
            print(f"FAIL {name}: {what} refused (status {status})\n  {' '.join(arguments)}\n  stderr: {err.strip()[:400]}")
    print(f"{name}: {len(options)} numeric flags, {len(choices)} choice flags, {cases} cases, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
