#!/usr/bin/env python3
"""check_timeline.py - what a stopped timeline holds (async_timeline.c).

Usage: check_timeline.py FILE [+TENSOR:PHASE | -TENSOR | ~INSTANT | !INSTANT]...

FILE must parse as JSON (a list of Chrome-trace events) and every row's
spans must be closed, in order ("B" and "E" of the same name nested), as a
stopped timeline's are. Then each argument:
  +TENSOR:PHASE  the row named TENSOR has at least one PHASE span;
  -TENSOR        no row is named TENSOR;
  ~INSTANT       some instant event is named INSTANT;
  !INSTANT       no instant event is named INSTANT.
Exit 0 when all hold; else 1, with one line per failure on stderr.
"""
import json
import sys


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    path = argv[1]
    try:
        with open(path, encoding="utf-8") as f:
            events = json.load(f)
    except (OSError, ValueError) as e:
        print(f"{path}: not a readable JSON file: {e}", file=sys.stderr)
        return 1
    if not isinstance(events, list):
        print(f"{path}: not a JSON array of events", file=sys.stderr)
        return 1
    problems = []
    rows = {}  # tid -> tensor name
    spans = {}  # tensor name -> set of phases with a complete span
    open_spans = {}  # tid -> stack of open phase names
    instants = set()
    for e in events:
        ph, tid, name = e.get("ph"), e.get("tid"), e.get("name")
        if ph == "M" and name == "thread_name":
            rows[tid] = e["args"]["name"]
        elif ph == "B":
            open_spans.setdefault(tid, []).append(name)
        elif ph == "E":
            stack = open_spans.get(tid, [])
            if not stack or stack[-1] != name:
                problems.append(f"row {rows.get(tid, tid)!r}: end of {name!r} without its begin")
                continue
            stack.pop()
            spans.setdefault(rows.get(tid), set()).add(name)
        elif ph == "i":
            instants.add(name)
    for tid, stack in open_spans.items():
        if stack:
            problems.append(f"row {rows.get(tid, tid)!r}: {stack} begun and never ended")
    names = set(rows.values())
    for arg in argv[2:]:
        kind, what = arg[0], arg[1:]
        if kind == "+":
            tensor, _, phase = what.rpartition(":")
            if phase not in spans.get(tensor, set()):
                problems.append(f"no {phase} span on the row {tensor!r} (its spans: {sorted(spans.get(tensor, []))})")
        elif kind == "-":
            if what in names:
                problems.append(f"a row {what!r} that should not be there")
        elif kind == "~":
            if what not in instants:
                problems.append(f"no {what!r} instant")
        elif kind == "!":
            if what in instants:
                problems.append(f"a {what!r} instant that should not be there")
        else:
            print(f"bad argument {arg!r}", file=sys.stderr)
            return 2
    for p in problems:
        print(f"{path}: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
