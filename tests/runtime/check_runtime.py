#!/usr/bin/env python3
"""check_runtime.py - the layering of libhora (suite unit; what libhora.so
exports is check_symbols.py's test 'runtime exports').

    check_runtime.py layers LIBHORA_CORE_A RUNTIME_DIR
        runtime/ is one folder per layer, calls going down only:
        api -> coord -> coll -> tp -> mem -> boot -> base. From the object files of
        the static core (nm: each undefined symbol is resolved to the folder
        whose object defines it) and from the sources' #include "folder/..."
        lines, every edge between folders must point down the list, so the
        graph between the folders has no cycle.

Exit status 0 when the check holds, 1 (with every offending symbol, call or
include listed) when it does not.
"""
import os
import re
import subprocess
import sys

LAYERS = ["base", "boot", "mem", "tp", "coll", "coord", "api"]  # bottom to top


def nm(args):
    return subprocess.run(["nm"] + args, check=True, capture_output=True, text=True).stdout


def layer_of_member(member):
    # meson names the object of runtime/<folder>/<file>.c "<folder>_<file>.c.o"
    base = os.path.basename(member)
    for layer in LAYERS:
        if base.startswith(layer + "_"):
            return layer
    return None


def check_layers(archive, runtime_dir):
    defined, undefined = {}, []
    for line in nm(["-A", archive]).splitlines():
        m = re.match(r"^(.*?):(\S+\.o):\s*(?:[0-9a-fA-F]+)?\s+([A-Za-z])\s+(\S+)$", line)
        if not m:
            continue
        member, kind, sym = m.group(2), m.group(3), m.group(4)
        layer = layer_of_member(member)
        if layer is None:
            print(f"FAIL: object {member} is not in a layer folder ({', '.join(LAYERS)})")
            return 1
        if kind == "U":
            undefined.append((layer, member, sym))
        elif kind.isupper():
            defined[sym] = (layer, member)
    failures = 0
    edges = set()
    for layer, member, sym in undefined:
        if sym not in defined:
            continue  # libc, MPI, UCX, kernels
        target = defined[sym][0]
        if target != layer:
            edges.add((layer, target))
            if LAYERS.index(target) > LAYERS.index(layer):
                print(f"FAIL: {member} ({layer}/) calls {sym}, defined in {defined[sym][1]} ({target}/): a call up")
                failures += 1
    include_re = re.compile(r'^\s*#\s*include\s+"([a-z]+)/[^"]+"', re.M)
    for layer in LAYERS:
        folder = os.path.join(runtime_dir, layer)
        for name in sorted(os.listdir(folder)):
            if not name.endswith((".c", ".h")):
                continue
            for target in include_re.findall(open(os.path.join(folder, name)).read()):
                if target not in LAYERS:
                    print(f"FAIL: {layer}/{name} includes from {target}/, which is not a layer")
                    failures += 1
                    continue
                if target != layer:
                    edges.add((layer, target))
                if LAYERS.index(target) > LAYERS.index(layer):
                    print(f"FAIL: {layer}/{name} includes a header of {target}/: an include up")
                    failures += 1
    for name in sorted(os.listdir(runtime_dir)):
        if name.endswith(".c"):
            print(f"FAIL: runtime/{name} lies outside the layer folders")
            failures += 1
    order = " -> ".join(reversed(LAYERS))
    print(f"layers: {order}; {len(edges)} edges between folders: "
          + ", ".join(f"{a}->{b}" for a, b in sorted(edges, key=lambda e: (-LAYERS.index(e[0]), -LAYERS.index(e[1])))))
    return 1 if failures else 0


def main():
    if len(sys.argv) != 4 or sys.argv[1] != "layers":
        print(__doc__)
        return 2
    return check_layers(sys.argv[2], sys.argv[3])


if __name__ == "__main__":
    sys.exit(main())
