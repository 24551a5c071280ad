#!/usr/bin/env python3
"""check_symbols.py LIBRARY HEADER [NM] - checks libhora-kernels.so's ABI.

The library is built with hidden visibility and exports what k_cpu.h marks
K_API. This fails (exit 1) when the dynamic symbol table defines anything
else - a k_* internal whose hidden attribute got lost, or a non-k_ name - or
lacks a function the header declares; it also fails when it finds no K_API
declaration at all, so a header it can no longer parse cannot pass. The
symbols the linker itself defines in every shared object are not ours and
are ignored.
"""
import re
import subprocess
import sys

LINKER_SYMBOLS = {"_init", "_fini", "_edata", "_end", "_etext", "__bss_start", "__end__"}


def declared(header):
    """Names of the functions the header declares with K_API."""
    text = open(header, encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)  # the macro's own comment
    return set(re.findall(r"^K_API\b[^;(]*?\b(k_\w+)\s*\(", text, flags=re.M))


def exported(library, nm):
    """Defined dynamic symbols, without symbol versions."""
    out = subprocess.run([nm, "-D", "--defined-only", library], check=True,
                         capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 3:
            names.add(fields[2].split("@")[0])
    return names - LINKER_SYMBOLS


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__.strip().splitlines()[0])
        return 2
    library, header = sys.argv[1], sys.argv[2]
    nm = sys.argv[3] if len(sys.argv) == 4 else "nm"
    want = declared(header)
    have = exported(library, nm)
    failed = False
    if not want:
        print(f"FAIL no K_API declarations found in {header}")
        failed = True
    for name in sorted(have - want):
        kind = "internal k_ symbol" if name.startswith("k_") else "not a k_ symbol"
        print(f"FAIL exported but not declared K_API ({kind}): {name}")
        failed = True
    for name in sorted(want - have):
        print(f"FAIL declared K_API but not exported: {name}")
        failed = True
    print(f"{'FAIL' if failed else 'ok  '} {library}: {len(have)} exported, "
          f"{len(want)} declared in {header}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
