#!/usr/bin/env python3
"""hora-train --reproducible: bit-identical parameters across algorithms,
transports and fusion thresholds.

usage: reproducible_train.py HORA_TRAIN HORA_CKPT

A tiny synthetic training (ResNet-8, fp32, 8 steps) at np 3 (at np 2 every
order of two addends gives the same sum, so nothing could differ) runs with
--reproducible under the one-shot algorithm over shm, the ring over shm
without fusion, and the mpi transport with a 64 KiB fusion threshold; the
final checkpoints must be equal (hora-ckpt diff). The same one-shot and
ring runs without the flag must differ, which shows that the comparison can
fail. --overlap off keeps the checkpoints free of measured timings;
--reproducible-exact runs once more and must be equal between one shot and
mpi too.
"""
import os, subprocess, sys, tempfile

HORA_TRAIN, HORA_CKPT = sys.argv[1], sys.argv[2]
BASE = ["--model", "resnet8", "--synthetic", "--image", "1x16x16", "--batch", "8", "--threads", "1",
        "--overlap", "off", "--precision", "fp32", "--progress", "lines", "--print-every", "1000",
        "--steps-per-epoch", "8", "--epochs", "1", "--lr", "0.4", "--checkpoint-every-epochs", "1"]
SETTINGS = {
    "oneshot": {"HORA_ALGORITHM": "oneshot"},
    "ring-nofusion": {"HORA_ALGORITHM": "ring", "HORA_FUSION_THRESHOLD": "0"},
    "mpi-64k": {"HORA_DISABLE_SHM": "1", "HORA_DISABLE_UCX": "1", "HORA_FUSION_THRESHOLD": "64K"},
}


def train(work, name, settings, flags):
    d = os.path.join(work, name)
    env = dict(os.environ)
    env["OMPI_MCA_btl_vader_backing_directory"] = tempfile.gettempdir()
    env.update(settings)
    cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", "3", HORA_TRAIN] + BASE + flags + [
        "--checkpoint-dir", d]
    print("$", " ".join(f"{k}={v}" for k, v in settings.items()), " ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300, env=env)
    if p.returncode != 0:
        print(p.stdout)
        return None
    with open(os.path.join(d, "latest")) as f:
        return os.path.join(d, f.read().strip())


def diff(a, b):
    p = subprocess.run([HORA_CKPT, "diff", a, b], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = p.stdout.strip().splitlines()
    print(f"hora-ckpt diff: {lines[-1] if lines else '(no output)'} (exit {p.returncode})")
    if p.returncode not in (0, 1):
        print(p.stdout)
    return p.returncode


def main():
    failures = []
    with tempfile.TemporaryDirectory() as work:
        ck = {}
        for flag_name, flags in (("repro", ["--reproducible"]), ("plain", []), ("exact", ["--reproducible-exact"])):
            for name, settings in SETTINGS.items():
                if flag_name == "plain" and name == "mpi-64k":
                    continue
                if flag_name == "exact" and name == "ring-nofusion":
                    continue
                ck[flag_name, name] = train(work, f"{flag_name}-{name}", settings, flags)
                if ck[flag_name, name] is None:
                    failures.append(f"hora-train {flag_name} {name} failed")
        if failures:
            print("\n".join("FAIL " + f for f in failures))
            return 1
        for other in ("ring-nofusion", "mpi-64k"):
            if diff(ck["repro", "oneshot"], ck["repro", other]) != 0:
                failures.append(f"--reproducible: oneshot and {other} give different parameters")
        if diff(ck["exact", "oneshot"], ck["exact", "mpi-64k"]) != 0:
            failures.append("--reproducible-exact: oneshot and mpi-64k give different parameters")
        if diff(ck["plain", "oneshot"], ck["plain", "ring-nofusion"]) != 1:
            failures.append("without --reproducible, oneshot and ring gave equal parameters: the test cannot fail")
    for f in failures:
        print("FAIL", f)
    print("reproducible_train:", "FAIL" if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
