#!/usr/bin/env python3
"""check_symbols.py LIBRARY HEADER MACRO PREFIX [NM] - checks a library's ABI.

The library is built with hidden visibility and exports what HEADER marks
with MACRO (libhora.so: HORA_API, hora_*; libhora-kernels.so: K_API, k_*).
This fails (exit 1) when the dynamic symbol table defines anything else - an
internal whose hidden attribute got lost, or a name without PREFIX - or lacks
a function the header declares; it also fails when it finds no MACRO
declaration at all, so a header it can no longer parse cannot pass. The
symbols the linker itself defines in every shared object are not ours and
are ignored.
"""
import re
import subprocess
import sys

LINKER_SYMBOLS = {"_init", "_fini", "_edata", "_end", "_etext", "__bss_start", "__end__"}


def declared(header, macro, prefix):
    """Names of the functions the header declares with macro."""
    text = open(header, encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)  # comments (the macro's own)
    pattern = rf"^{re.escape(macro)}\b[^;(]*?\b({re.escape(prefix)}\w+)\s*\("
    return set(re.findall(pattern, text, flags=re.M))


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
    if len(sys.argv) not in (5, 6):
        print(__doc__.strip().splitlines()[0])
        return 2
    library, header, macro, prefix = sys.argv[1:5]
    nm = sys.argv[5] if len(sys.argv) == 6 else "nm"
    want = declared(header, macro, prefix)
    have = exported(library, nm)
    failed = False
    if not want:
        print(f"FAIL no {macro} declarations found in {header}")
        failed = True
    for name in sorted(have - want):
        kind = f"internal {prefix} symbol" if name.startswith(prefix) else f"not a {prefix} symbol"
        print(f"FAIL exported but not declared {macro} ({kind}): {name}")
        failed = True
    for name in sorted(want - have):
        print(f"FAIL declared {macro} but not exported: {name}")
        failed = True
    print(f"{'FAIL' if failed else 'ok  '} {library}: {len(have)} exported, "
          f"{len(want)} declared in {header}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
