#!/usr/bin/env python3
"""The Python twin of libtorch_fashion_mnist on one process: the peer program's model, seed,
inputs, data order and SGD (peers/ddp_fashion_mnist.py), trained for --steps updates. With
--compare it checks that the parameters the C++ program saved after as many updates agree
with the twin's, max|a - b| <= tolerance * max|twin|, and exits 1 when they do not; 77 (skipped)
where PyTorch is not installed.

  /usr/bin/python3 python_twin.py --steps 50 --compare params.np1.bin --tolerance 1e-5
"""
import argparse, gzip, sys

try:
    import numpy as np
    import torch
except ImportError:
    print("python_twin: skipped: PyTorch is not installed (apt-get install python3-torch)")
    sys.exit(77)

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=50)
p.add_argument("--batch", type=int, default=128, help="global batch (the C++ program's --batch)")
p.add_argument("--lr", type=float, default=0.05)
p.add_argument("--momentum", type=float, default=0.9)
p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
p.add_argument("--compare", help="raw float32 parameters written by libtorch_fashion_mnist --save-params")
p.add_argument("--tolerance", type=float, default=1e-5)
a = p.parse_args()

def idx(path, offset):
    with gzip.open(path) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)
torch.set_num_threads(1)
x = torch.tensor(idx(f"{a.data}/train-images-idx3-ubyte.gz", 16).reshape(-1, 784), dtype=torch.float32) / 255
y = torch.tensor(idx(f"{a.data}/train-labels-idx1-ubyte.gz", 8), dtype=torch.long)

torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128),
                          torch.nn.ReLU(), torch.nn.Linear(128, 10))
opt = torch.optim.SGD(net.parameters(), lr=a.lr, momentum=a.momentum)
g = torch.Generator().manual_seed(1)
steps_per_epoch = len(x) // a.batch
for s in range(a.steps):
    if s % steps_per_epoch == 0:
        perm = torch.randperm(len(x), generator=g)
    b = perm[(s % steps_per_epoch) * a.batch:(s % steps_per_epoch + 1) * a.batch]
    opt.zero_grad()
    torch.nn.functional.cross_entropy(net(x[b]), y[b]).backward()
    opt.step()

twin = torch.cat([q.detach().flatten() for q in net.parameters()]).numpy()
if a.compare:
    other = np.fromfile(a.compare, dtype=np.float32)
    if other.size != twin.size:
        print(f"python_twin: {a.compare} holds {other.size} values, the twin has {twin.size}")
        sys.exit(1)
    relative = float(np.max(np.abs(other - twin)) / np.max(np.abs(twin)))
    print(f"python_twin: after {a.steps} updates, {a.compare} vs the twin: max relative difference {relative:.3g} "
          f"(tolerance {a.tolerance:.3g}){', bitwise identical' if relative == 0 else ''}")
    sys.exit(0 if relative <= a.tolerance else 1)
