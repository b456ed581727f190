#!/usr/bin/env python3
"""The Python twin of libtorch_fashion_mnist on one process: the peer program's model, seed,
inputs, data order and SGD (peers/ddp_fashion_mnist.py), trained for --steps updates. With
--compare it checks that the parameters the C++ program saved after as many updates agree
with the twin's, max|a - b| <= tolerance * max|twin|, and exits 1 when they do not; 77 (skipped)
where PyTorch is not installed.

  /usr/bin/python3 python_twin.py --steps 50 --compare params.np1.bin --tolerance 1e-5

With --evaluate it loads weights exported by strata-ckpt (safetensors, the C++ module's names
fc1.weight ... fc3.bias) into the twin's module with load_state_dict, and checks that its test
accuracy is --expect-accuracy, what the C++ program printed.

  /usr/bin/python3 python_twin.py --evaluate model.safetensors --expect-accuracy 0.7712
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
p.add_argument("--evaluate", help="safetensors weights (strata-ckpt export) to load and evaluate")
p.add_argument("--expect-accuracy", type=float, help="with --evaluate: the test accuracy the C++ program reported")
a = p.parse_args()

def idx(path, offset):
    with gzip.open(path) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)
torch.set_num_threads(1)

if a.evaluate:
    try:
        from safetensors.torch import load_file
    except ImportError:
        print("python_twin: skipped: the safetensors package is not installed (pip install safetensors)")
        sys.exit(77)

    class Mlp(torch.nn.Module):  # the C++ module's names: fc1, fc2, fc3
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2, self.fc3 = torch.nn.Linear(784, 256), torch.nn.Linear(256, 128), torch.nn.Linear(128, 10)

        def forward(self, x):
            return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))

    net = Mlp()
    net.load_state_dict(load_file(a.evaluate))  # strict: every name and shape must match
    x = torch.tensor(idx(f"{a.data}/t10k-images-idx3-ubyte.gz", 16).reshape(-1, 784), dtype=torch.float32) / 255
    y = torch.tensor(idx(f"{a.data}/t10k-labels-idx1-ubyte.gz", 8), dtype=torch.long)
    with torch.no_grad():
        accuracy = float((net(x).argmax(1) == y).double().mean())
    same = a.expect_accuracy is None or abs(accuracy - a.expect_accuracy) < 0.5 / len(y)
    print(f"python_twin: {a.evaluate} loaded with load_state_dict: test accuracy {accuracy:.4f}"
          + (f" (the C++ program: {a.expect_accuracy:.4f})" if a.expect_accuracy is not None else ""))
    sys.exit(0 if same else 1)

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
