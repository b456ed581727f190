#!/usr/bin/env python3
"""Checks a strata-ckpt export against the parameters the ranks held, with the real safetensors
package: every tensor of the export equals, bit for bit, the whole tensor assembled from the
slices the ranks wrote with --save-state (PREFIX.rank-K.safetensors: "<name>@<first element>",
the whole shape in the metadata), and the export has exactly those tensors.

  compare_export.py model.safetensors state.rank-0.safetensors state.rank-1.safetensors

Exit 0 when equal, 1 when not, 77 (skipped) where numpy or safetensors is missing.
"""
import sys

try:
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import load_file
except ImportError as e:
    print(f"compare_export: skipped: {e} (pip install safetensors)")
    sys.exit(77)

export_path, state_paths = sys.argv[1], sys.argv[2:]
exported = load_file(export_path)
whole, filled = {}, {}
for path in state_paths:
    with safe_open(path, "np") as f:
        shapes = f.metadata() or {}
        for key in f.keys():
            name, first = key.rsplit("@", 1)
            first = int(first)
            shape = tuple(int(d) for d in shapes[name].split(",") if d)
            if name not in whole:
                whole[name] = np.zeros(int(np.prod(shape)), np.float32)
                filled[name] = np.zeros(whole[name].size, bool)
            part = f.get_tensor(key)
            span = slice(first, first + part.size)
            held = filled[name][span]
            if not np.array_equal(whole[name][span][held].view(np.uint32), part[held].view(np.uint32)):
                print(f"compare_export: ranks disagree on {name} at elements {first}..{first + part.size}")
                sys.exit(1)
            whole[name][span] = part
            filled[name][span] = True
            whole[name + "#shape"] = shape

failures = []
names = sorted(k for k in whole if not k.endswith("#shape"))
if sorted(exported) != names:
    failures.append(f"the export holds {sorted(exported)}, the ranks {names}")
for name in names:
    if not filled[name].all():
        failures.append(f"{name}: the ranks' slices leave elements uncovered")
        continue
    mine = whole[name].reshape(whole[name + "#shape"])
    theirs = exported.get(name)
    if theirs is None:
        continue
    if theirs.dtype != np.float32 or theirs.shape != mine.shape:
        failures.append(f"{name}: exported as {theirs.dtype} {theirs.shape}, held as float32 {mine.shape}")
    elif not np.array_equal(theirs.view(np.uint32), mine.view(np.uint32)):
        failures.append(f"{name}: {int((theirs != mine).sum())} of {mine.size} values differ")
for f in failures:
    print("compare_export:", f)
print(f"compare_export: {len(names)} tensors from {len(state_paths)} ranks: "
      + ("bitwise equal to the export" if not failures else f"{len(failures)} differences"))
sys.exit(1 if failures else 0)
