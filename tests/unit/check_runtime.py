#!/usr/bin/env python3
"""check_runtime.py - structural checks of libhora (suite unit).

    check_runtime.py exports LIBHORA_SO HORA_H
        libhora.so's dynamic symbol table defines every function hora.h
        declares with HORA_API and nothing else: no k_*, coord_*, tp_*,
        coll_* or data symbols of the runtime's internals.

    check_runtime.py layers LIBHORA_CORE_A RUNTIME_DIR
        runtime/ is one folder per layer, calls going down only:
        api -> coord -> coll -> tp -> mem -> base. From the object files of
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

LAYERS = ["base", "mem", "tp", "coll", "coord", "api"]  # bottom to top


def nm(args):
    return subprocess.run(["nm"] + args, check=True, capture_output=True, text=True).stdout


def check_exports(so, header):
    declared = set(re.findall(r"^HORA_API\s+[^;]*?\b(hora_\w+)\s*\(", open(header).read(), re.M))
    if not declared:
        print(f"FAIL: no HORA_API declarations found in {header}")
        return 1
    exported = {}
    for line in nm(["-D", "--defined-only", so]).splitlines():
        parts = line.split()
        if len(parts) >= 3:
            exported[parts[2]] = parts[1]
    # The linker's own markers are not the library's API.
    linker = {"_init", "_fini", "_edata", "_end", "__bss_start"}
    extra = sorted(s for s in exported if s not in declared and s not in linker)
    missing = sorted(declared - set(exported))
    for s in extra:
        print(f"FAIL: libhora.so exports {s} ({exported[s]}), which hora.h does not declare")
    for s in missing:
        print(f"FAIL: hora.h declares {s} but libhora.so does not export it")
    print(f"exports: {len(exported) - len(linker & set(exported))} symbols, {len(declared)} declared in hora.h, "
          f"{len(extra)} extra, {len(missing)} missing")
    return 1 if extra or missing else 0


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
    if len(sys.argv) != 4 or sys.argv[1] not in ("exports", "layers"):
        print(__doc__)
        return 2
    if sys.argv[1] == "exports":
        return check_exports(sys.argv[2], sys.argv[3])
    return check_layers(sys.argv[2], sys.argv[3])


if __name__ == "__main__":
    sys.exit(main())
