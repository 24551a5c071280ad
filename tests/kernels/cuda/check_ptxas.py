#!/usr/bin/env python3
"""check_ptxas.py NVCC... --flags FLAG... --files FILE.cu... - kernels/cuda's register budget.

Compiles each .cu file for sm_90 with `-Xptxas -v` (a cubin in a scratch
directory, device code only) and reads ptxas's report of every kernel:
registers, stack frame, spill stores and spill loads. Prints one line per
kernel and fails (exit 1) when a reduction or copy kernel (k_reduce_kernel,
k_copy_kernel: the data engine's hot loops), a training-step kernel
(k_step_*kernel, k_step.cu), a layer kernel (k_nn_*kernel, k_nn.cu) or the
channels-last copy (k_layout_kernel, k_layout.cu) spills or has a stack
frame, when
compilation fails, or when the report names no reduction or no copy kernel
(a report this script no longer understands cannot pass). Spills of the
other kernels (scale, cast) are printed as warnings.

NVCC is the compiler command (meson's nvcc.cmd_array()); FLAG are the
library's device flags without the architecture (the numerics flags and
include directories), so the check compiles what the build compiles.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ARCH = ["-gencode", "arch=compute_90,code=sm_90"]
STRICT = re.compile(r"k_reduce_kernel|k_copy_kernel|k_step_\w*kernel|k_nn_\w*kernel|k_layout_kernel")
ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\d+a?)'")
PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
REGS = re.compile(r"Used (\d+) registers")


def split_args(argv):
    """NVCC..., --flags ..., --files ... -> (nvcc, flags, files)."""
    try:
        f = argv.index("--flags")
        g = argv.index("--files")
    except ValueError:
        return None
    if not (0 < f < g):
        return None
    return argv[:f], argv[f + 1:g], argv[g + 1:]


def demangle(names):
    """Readable names through c++filt when there is one, else the mangled ones."""
    cxxfilt = shutil.which("c++filt")
    if not cxxfilt or not names:
        return {n: n for n in names}
    out = subprocess.run([cxxfilt], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    return dict(zip(names, out)) if len(out) == len(names) else {n: n for n in names}


def parse(report):
    """[(mangled name, registers, stack, spill stores, spill loads)] from ptxas -v output."""
    kernels = []
    current = None
    for line in report.splitlines():
        m = ENTRY.search(line)
        if m:
            current = {"name": m.group(1)}
            kernels.append(current)
            continue
        if current is None:
            continue
        m = PROPS.search(line)
        if m and "stack" not in current:
            current["stack"], current["stores"], current["loads"] = (int(x) for x in m.groups())
        m = REGS.search(line)
        if m and "regs" not in current:
            current["regs"] = int(m.group(1))
    return kernels


def main():
    parsed = split_args(sys.argv[1:])
    if parsed is None or not parsed[0] or not parsed[2]:
        print(__doc__.strip().splitlines()[0])
        return 2
    nvcc, flags, files = parsed
    failed = False
    kernels = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, path in enumerate(files):
            cmd = nvcc + flags + ARCH + ["-cubin", "-Xptxas", "-v", "-o", os.path.join(tmp, f"{i}.cubin"), path]
            run = subprocess.run(cmd, capture_output=True, text=True)
            if run.returncode != 0:
                print(f"FAIL compiling {path} (exit {run.returncode}):\n  {' '.join(cmd)}\n{run.stdout}{run.stderr}")
                failed = True
                continue
            for k in parse(run.stdout + run.stderr):
                k["file"] = os.path.basename(path)
                kernels.append(k)
    names = demangle([k["name"] for k in kernels])
    strict = [k for k in kernels if STRICT.search(k["name"])]
    for label in ("k_reduce_kernel", "k_copy_kernel"):
        if not any(label in k["name"] for k in kernels):
            print(f"FAIL no {label} in ptxas's report")
            failed = True
    for k in kernels:
        if "regs" not in k or "stack" not in k:
            print(f"FAIL {names[k['name']]}: no register or spill figures in ptxas's report")
            failed = True
            continue
        bad = k["stores"] or k["loads"]
        is_strict = STRICT.search(k["name"]) is not None
        if is_strict and (bad or k["stack"]):
            tag = "FAIL"
            failed = True
        elif bad:
            tag = "warn"
        else:
            tag = "ok  "
        print(f"{tag} {k['file']}: {names[k['name']]}: {k['regs']} registers, {k['stack']} bytes stack, "
              f"{k['stores']} bytes spill stores, {k['loads']} bytes spill loads")
    print(f"{'FAIL' if failed else 'ok  '} {len(kernels)} kernels ({len(strict)} reduction/copy/step) in {len(files)} files")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
