#!/usr/bin/env python3
"""A hora-train checkpoint in PyTorch: train a few steps with checkpoints,
`hora-ckpt export --npz`, load the arrays strictly into bench/peers/resnet.py's
ResNet (and torchvision's resnet18 / resnet50 when torchvision is there), and
compare the logits of a few inputs in eval mode with `hora-ckpt logits`.

usage: ckpt_torch.py HORA_TRAIN HORA_CKPT

Needs torch and numpy (Debian's python3-torch, python3-numpy; tools/setup
installs them, with python3-torchvision): run under a python3 without them,
it runs itself again under /usr/bin/python3.

Tolerance: |hora - torch| <= 1e-4 * max|torch logits| + 1e-6, elementwise.
Both sides are fp32 end to end, with the same weights and running statistics;
they differ only in the order of the sums (oneDNN's and PyTorch's convolution
algorithms, BN applied separately or folded), about 1e-7 relative per layer,
which the 8-50 layers here grow to ~1e-6..1e-5 of the largest logit. 1e-4
leaves that margin ten times over, while any wrong tensor moves the logits by
far more: the test shows it by corrupting the export on purpose (a transposed
conv kernel, a BN layer's running variance reset to 1, two BN layers' running
statistics swapped) and requiring each to miss the tolerance by at least 10x. Wrong names
or shapes fail load_state_dict(strict=True) before any logit is compared.
"""
import os, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

try:
    import numpy as np
    import torch
except ImportError:
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    print("FAIL: torch and numpy are needed (Debian: python3-torch python3-numpy; tools/setup installs them)")
    sys.exit(1)

sys.path.insert(0, os.path.join(TOP, "bench", "peers"))
sys.path.insert(0, HERE)
from resnet import ResNet  # noqa: E402
from ckpt_tool import parse_model, read_ckpt  # noqa: E402

REL_TOL, ABS_TOL = 1e-4, 1e-6
# The deep ImageNet-stem nets without zero-init: after a step or two the
# running statistics (momentum 0.1 from mean 0, var 1) are far from the
# activations', and eval-mode logits overflow. BN momentum 1 keeps the last
# batch's statistics, so inference sees normalised activations.
LAST_BATCH = ["--bn-momentum", "1"]


def run(args, timeout=300):
    print("$", " ".join(args), flush=True)
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    print(p.stdout, end="")
    if p.returncode != 0:
        raise AssertionError(f"{args[0]} exited {p.returncode}")
    return p


def train(hora_train, d, model, image, extra):
    """A few steps with a checkpoint at the end; the checkpoint's path."""
    ckpt = os.path.join(d, model)
    run(["mpirun", "--oversubscribe", "--bind-to", "none", "-np", "1", hora_train, "--model", model, "--synthetic",
         "--image", image, "--steps-per-epoch", "4", "--epochs", "1", "--no-zero-init", "--lr", "0.4",
         "--checkpoint-dir", ckpt, "--threads", "2", "--progress", "lines", "--overlap", "off", "--precision", "fp32"] + extra)
    with open(os.path.join(ckpt, "latest")) as f:
        name = f.read().strip()
    return os.path.join(ckpt, name)


def describe(path):
    s, _ = read_ckpt(path, check_crc=False)  # hora-ckpt verify checks them
    keys, params, bns = parse_model(s["model"].decode())
    return keys, params, bns


def peer_model(keys):
    return ResNet(keys["stem"][0], keys["block"][0], tuple(int(b) for b in keys["blocks"]), int(keys["width"][0]),
                  int(keys["input"][0]), int(keys["classes"][0]))


def torch_logits(model, state, x):
    model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=True)
    model.eval()
    with torch.no_grad():
        return model(torch.from_numpy(x)).numpy()


def miss(hora, ref):
    """How far past the tolerance hora is from ref (<= 1: within)."""
    bound = REL_TOL * float(np.abs(ref).max()) + ABS_TOL
    return float(np.abs(hora - ref).max()) / bound


def check(hora_ckpt, d, path, model, label, controls):
    keys, params, bns = describe(path)
    run([hora_ckpt, "verify", path])
    npz = path + ".npz"
    run([hora_ckpt, "export", path, "--npz", npz])
    state = dict(np.load(npz))
    c, h, w = (int(v) for v in keys["input"])
    x = np.random.RandomState(7).randn(5, c, h, w).astype(np.float32)
    xin, out = os.path.join(d, "x.npy"), os.path.join(d, "y.npy")
    np.save(xin, x)
    run([hora_ckpt, "logits", path, "--input", xin, "--out", out, "--threads", "2"])
    hora = np.load(out)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.eps = float(keys["bn_epsilon"][0])  # what hora-train used (PyTorch's default 1e-5 too)
    ref = torch_logits(model, state, x)
    if hora.shape != ref.shape:
        raise AssertionError(f"{label}: hora logits {hora.shape}, torch {ref.shape}")
    r = miss(hora, ref)
    print(f"{label}: max |hora - torch| {np.abs(hora - ref).max():.3g}, max |logit| {np.abs(ref).max():.3g}, "
          f"{r:.3g} of the tolerance")
    if not r <= 1.0:
        raise AssertionError(f"{label}: logits differ beyond the tolerance ({r:.3g}x)")
    if (hora.argmax(1) != ref.argmax(1)).any():
        raise AssertionError(f"{label}: predictions differ")
    if not controls:
        return
    # The comparison must catch a wrong tensor: each corruption misses by 10x.
    bn_a, bn_b = bns[1][0], bns[2][0]
    assert bns[1][1] == bns[2][1], "two BN layers of one width"
    cases = {
        "conv1.weight transposed (H<->W)": {"conv1.weight": state["conv1.weight"].transpose(0, 1, 3, 2).copy()},
        f"{bn_a}.running_var reset to 1": {f"{bn_a}.running_var": np.ones_like(state[f"{bn_a}.running_var"])},
        f"{bn_a} and {bn_b}'s running statistics swapped":
            {f"{x}.{k}": state[f"{y}.{k}"] for x, y in ((bn_a, bn_b), (bn_b, bn_a))
             for k in ("running_mean", "running_var")},
    }
    for what, change in cases.items():
        bad = dict(state)
        bad.update(change)
        r = miss(hora, torch_logits(model, bad, x))
        print(f"{label}, control '{what}': {r:.3g}x the tolerance")
        if not r >= 10.0:
            raise AssertionError(f"{label}: the comparison does not see '{what}' ({r:.3g}x the tolerance)")


def main():
    hora_train, hora_ckpt = sys.argv[1], sys.argv[2]
    failed = []
    with tempfile.TemporaryDirectory(prefix="ckpt_torch.") as d:
        tests = [("resnet8 / bench/peers ResNet", "resnet8", "3x16x16",
                  ["--batch", "8", "--steps", "3", "--checkpoint-every-steps", "3"], None, True),
                 ("resnet20 (1x28x28) / bench/peers ResNet", "resnet20", "1x28x28",
                  ["--batch", "4", "--steps", "2", "--checkpoint-every-steps", "2"], None, False)]
        try:
            import torchvision
            tests += [("resnet18 / torchvision", "resnet18", "3x64x64",
                       ["--batch", "4", "--classes", "10", "--steps", "2", "--checkpoint-every-steps", "2"]
                       + LAST_BATCH,
                       lambda: torchvision.models.resnet18(num_classes=10), False),
                      ("resnet50 / torchvision", "resnet50", "3x64x64",
                       ["--batch", "4", "--classes", "10", "--steps", "1", "--checkpoint-every-steps", "1"]
                       + LAST_BATCH,
                       lambda: torchvision.models.resnet50(num_classes=10), True)]
        except ImportError:
            print("torchvision not importable: its resnet18 / resnet50 checks are not run")
        for label, arch, image, extra, make, controls in tests:
            try:
                path = train(hora_train, d, arch, image, extra)
                keys, _, _ = describe(path)
                model = make() if make else peer_model(keys)
                if make:
                    # The peer builds the same network under the same names.
                    peer = set(peer_model(keys).state_dict())
                    if peer != set(model.state_dict()):
                        raise AssertionError(f"{label}: bench/peers ResNet and torchvision differ in keys: "
                                             f"{sorted(peer ^ set(model.state_dict()))[:5]}")
                check(hora_ckpt, d, path, model, label, controls)
                print(f"--- {label}: PASS")
            except (AssertionError, RuntimeError, KeyError) as e:
                print(f"--- {label}: FAIL: {e}")
                failed.append(label)
    print("FAIL: " + ", ".join(failed) if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
