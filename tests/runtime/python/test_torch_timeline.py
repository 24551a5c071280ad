"""hora.torch's dynamic timeline: hvd.start_timeline / hvd.stop_timeline on
every rank, rank 0 writes; after each stop the file is a Chrome trace (JSON)
whose rows hold complete spans of the collectives run while it was started
and nothing else; mark_cycles adds CYCLE_START instants; starting again
(the same file too) and the refusals."""
import json
import os
import pathlib
import shutil
import tempfile

from common import check, equal, hvd, raises, run
import torch


def _dir():
    """A directory rank 0 made, its name the same on every rank."""
    return hvd.broadcast_object(tempfile.mkdtemp(prefix="hora-timeline-") if hvd.rank() == 0 else None,
                                name="timeline.dir")


def _allreduce(name, salt):
    r, n = hvd.rank(), hvd.size()
    x = torch.arange(7, dtype=torch.float32) * (r + 1) + salt
    want = torch.arange(7, dtype=torch.float32) * (n * (n + 1) / 2) + salt * n
    equal(hvd.allreduce(x, name=name, op=hvd.Sum), want, "allreduce %s" % name)


def _read(path, what):
    """Rows (tensor -> set of complete span names) and instant names of a
    stopped timeline; checks it parses and every span is closed."""
    with open(path) as f:
        events = json.load(f)  # a ValueError fails the case
    rows, spans, open_spans, instants = {}, {}, {}, set()
    for e in events:
        ph, tid = e["ph"], e.get("tid")
        if ph == "M":
            rows[tid] = e["args"]["name"]
        elif ph == "B":
            open_spans.setdefault(tid, []).append(e["name"])
        elif ph == "E":
            stack = open_spans.get(tid, [])
            check(stack and stack[-1] == e["name"], "%s: end of %s without its begin" % (what, e["name"]))
            if stack:
                spans.setdefault(rows[tid], set()).add(stack.pop())
        elif ph == "i":
            instants.add(e["name"])
    check(not any(open_spans.values()), "%s: spans never ended: %s" % (what, open_spans))
    return spans, instants


def test_start_stop():
    d = _dir()
    a, b = os.path.join(d, "a.json"), os.path.join(d, "b.json")
    _allreduce("tl.before", 1)
    hvd.start_timeline(a, mark_cycles=True)
    _allreduce("tl.a", 2)
    hvd.stop_timeline()
    _allreduce("tl.between", 3)
    if hvd.rank() == 0:
        spans, instants = _read(a, "a.json")
        check("ALLREDUCE" in spans.get("tl.a", ()), "a.json: no ALLREDUCE span on tl.a: %s" % spans)
        check("tl.before" not in spans and "tl.between" not in spans, "a.json: rows outside start..stop: %s" % spans)
        check("CYCLE_START" in instants, "a.json: mark_cycles=True left no CYCLE_START")
        size = os.path.getsize(a)
    # Another file, no cycle marks; a pathlib path.
    hvd.start_timeline(pathlib.Path(b))
    _allreduce("tl.b", 4)
    hvd.stop_timeline()
    if hvd.rank() == 0:
        spans, instants = _read(b, "b.json")
        check("ALLREDUCE" in spans.get("tl.b", ()), "b.json: no ALLREDUCE span on tl.b: %s" % spans)
        check("tl.a" not in spans, "b.json holds a.json's rows: %s" % spans)
        check("CYCLE_START" not in instants, "b.json: CYCLE_START without mark_cycles")
        check(os.path.getsize(a) == size, "a.json changed after its stop")
    # Started twice on one file (Horovod's test does it), then the first again.
    hvd.start_timeline(b)
    hvd.start_timeline(b)
    _allreduce("tl.twice.0", 5)
    _allreduce("tl.twice.1", 6)
    hvd.stop_timeline()
    hvd.start_timeline(a)
    _allreduce("tl.again", 7)
    hvd.stop_timeline()
    if hvd.rank() == 0:
        spans, _ = _read(b, "b.json started twice")
        check(all("ALLREDUCE" in spans.get(t, ()) for t in ("tl.twice.0", "tl.twice.1")) and "tl.b" not in spans,
              "b.json started twice: %s" % spans)
        spans, instants = _read(a, "a.json again")
        check("ALLREDUCE" in spans.get("tl.again", ()) and "tl.a" not in spans, "a.json again: %s" % spans)
        check("CYCLE_START" not in instants, "a.json again: CYCLE_START without mark_cycles")
        shutil.rmtree(d)


def test_refusals():
    d = _dir()
    hvd.stop_timeline()  # none runs: nothing happens
    raises(ValueError, lambda: hvd.start_timeline(""), "start_timeline('')", contains="no path")
    missing = os.path.join(d, "no-such-dir", "t.json")
    if hvd.rank() == 0:
        raises(OSError, lambda: hvd.start_timeline(missing), "start_timeline in a missing directory",
               contains=missing)
    else:
        hvd.start_timeline(missing)  # only rank 0 writes
    hvd.stop_timeline()
    _allreduce("tl.after.refusals", 8)
    if hvd.rank() == 0:
        check(not os.path.exists(os.path.dirname(missing)), "a directory was created")
        shutil.rmtree(d)


if __name__ == "__main__":
    run([test_start_stop, test_refusals])
