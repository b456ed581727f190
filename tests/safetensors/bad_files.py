#!/usr/bin/env python3
"""Damaged safetensors files, one per row of the table below, each imported with
`strata-ckpt import FILE --into DIR`: each must end with exit status 65 and one line on
standard error naming the tensor or the byte offset at fault (the row's fragment), with no
crash and nothing written (DIR is not created).

  bad_files.py path/to/strata-ckpt
"""
import json, os, struct, subprocess, sys, tempfile

def safetensors(header, data=b"", raw_header=None):
    text = raw_header if raw_header is not None else json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data

def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}

three = struct.pack("<3f", 1.0, 2.0, 3.0)
good = safetensors({"w": entry("F32", [3], 0, 12)}, three)
cases = [  # name, file bytes (or None: a folder), fragment(s) of the one line
    ("shorter than its length field", b"\x10\x00\x00", "fewer than the 8"),
    ("header length over the limit", struct.pack("<Q", 200_000_000) + b"{}", "at byte 0 says 200000000 bytes, over the limit"),
    ("header past the end", struct.pack("<Q", 4096) + b'{"w": {}}', "runs past the end of the file at byte"),
    ("JSON that does not parse", safetensors(None, raw_header=b'{"w": {"dtype": "F32",'), "not valid JSON at byte"),
    ("a header that is no object", safetensors(None, raw_header=b"[1, 2]"), "at byte 8 does not start with '{'"),
    ("a header that starts with a space", safetensors(None, raw_header=b' {"w": {"dtype": "F32", "shape": [0], '
                                                                        b'"data_offsets": [0, 0]}}'),
     "at byte 8 does not start with '{'"),
    ("a name given twice", safetensors(None, three + three, raw_header=(
        b'{"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]}, '
        b'"w": {"dtype": "F32", "shape": [3], "data_offsets": [12, 24]}}')), 'tensor "w" twice'),
    ("an unknown dtype", safetensors({"w": entry("F12", [3], 0, 12)}, three), 'tensor "w" has unknown dtype "F12"'),
    ("an integer dtype", safetensors({"w": entry("I32", [3], 0, 12)}, three), 'tensor "w" has dtype I32'),
    ("no dtype", safetensors({"w": {"shape": [3], "data_offsets": [0, 12]}}, three), 'tensor "w" has no dtype'),
    ("a negative extent", safetensors({"w": entry("F32", [-3], 0, 12)}, three), 'tensor "w" has a shape of other'),
    ("a shape whose size overflows", safetensors({"w": entry("F32", [2**40, 2**40], 0, 12)}, three),
     'tensor "w" has a shape whose size overflows'),
    ("offsets that do not fit the shape", safetensors({"w": entry("F32", [2], 0, 12)}, three),
     'tensor "w" has shape [2] of F32, 8 bytes, but its data_offsets hold 12'),
    ("offsets that end before they begin", safetensors({"w": entry("F32", [0], 12, 0)}, three),
     'tensor "w" has data_offsets [12, 0]'),
    ("offsets past the data", safetensors({"w": entry("F32", [3], 0, 12)}, three[:8]), 'tensor "w" ends at byte'),
    ("data cut short", good[:-5], 'tensor "w" ends at byte'),
    ("tensors that overlap", safetensors({"a": entry("F32", [2], 0, 8), "b": entry("F32", [2], 4, 12)}, three),
     ('tensor "b" starts at byte', "before it overlaps it up to byte")),
    ("a gap between tensors", safetensors({"a": entry("F32", [1], 0, 4), "b": entry("F32", [1], 8, 12)}, three),
     ('tensor "b" starts at byte', "(a gap)")),
    ("bytes no tensor owns", safetensors({"w": entry("F32", [2], 0, 8)}, three), "bytes that no tensor owns"),
    ("metadata that is no string", safetensors({"__metadata__": {"k": 1}, "w": entry("F32", [3], 0, 12)}, three),
     '"__metadata__" entry "k" is not a string'),
    ("a NaN", safetensors({"w": entry("F32", [3], 0, 12)}, struct.pack("<3f", 1.0, float("nan"), 3.0)),
     'tensor "w" holds NaN at element 1'),
    ("a folder", None, "is not a regular file"),
]

tool = sys.argv[1]
failures = []
with tempfile.TemporaryDirectory() as scratch:
    for k, (name, content, fragment) in enumerate(cases):
        path = os.path.join(scratch, f"case{k}.safetensors")
        if content is None:
            os.mkdir(path)
        else:
            with open(path, "wb") as f:
                f.write(content)
        into = os.path.join(scratch, f"into{k}")
        run = subprocess.run([tool, "import", path, "--into", into], capture_output=True, text=True, timeout=60)
        lines = run.stderr.strip().splitlines()
        problems = []
        if run.returncode != 65:
            problems.append(f"exit {run.returncode}, not 65")
        if len(lines) != 1:
            problems.append(f"{len(lines)} lines on standard error")
        for part in (fragment,) if isinstance(fragment, str) else fragment:
            if part not in run.stderr:
                problems.append(f"no '{part}'")
        if os.path.exists(into):
            problems.append(f"{into} was written")
        print(f"{'ok  ' if not problems else 'FAIL'} {name}: {lines[0] if lines else '(nothing)'}")
        if problems:
            failures.append(f"{name}: {'; '.join(problems)}")
    # The good file imports, so that the refusals above are the damage's doing.
    with open(os.path.join(scratch, "good.safetensors"), "wb") as f:
        f.write(good)
    run = subprocess.run([tool, "import", os.path.join(scratch, "good.safetensors"), "--into",
                          os.path.join(scratch, "good")], capture_output=True, text=True, timeout=60)
    if run.returncode != 0:
        failures.append(f"the undamaged file was refused: {run.stderr.strip()}")
for f in failures:
    print("bad_files: FAIL", f)
print(f"bad_files: {len(cases)} damaged files, {len(cases) - len(failures)} refused as they should be")
sys.exit(1 if failures else 0)
