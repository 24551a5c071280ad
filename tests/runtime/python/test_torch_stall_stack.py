"""hora.torch under a stall (HORA_STALL_STACKS): rank 0 prints the late rank's
Python stack under the stall warning, naming the function it sleeps in with
its file and line; a late rank that holds the GIL in C code (so that
hora.torch's stack provider cannot run) is reported as silent, and the job
goes on. Silent is either of the runtime's two reports: no answer within the
answer time, or, when the capture of an earlier request is still stuck (the
first case's, on a loaded machine), the late rank's answer that it has not
finished. Rank 0's stderr is read back from a file; an answer may come after
its case ended (it is printed as late), so each case looks only at the lines
that name its own tensor."""
import ctypes
import os
import sys
import tempfile
import time

os.environ["HORA_STALL_CHECK_S"] = "1"  # before hvd.init reads the settings
os.environ.pop("HORA_STALL_STACKS", None)

from common import check, equal, hvd, run  # noqa: E402
import torch  # noqa: E402


def late_rank_python_sleep():
    time.sleep(3.5)


def late_rank_holds_gil():
    # PyDLL keeps the GIL across the call: libc's sleep(4) with it held.
    ctypes.PyDLL(None).sleep(4)


def rank0_stderr_during(fn):
    """Run fn; on rank 0 return what went to fd 2 meanwhile (else None)."""
    if hvd.rank() != 0:
        fn()
        return None
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as f:
        os.dup2(f.fileno(), 2)
        try:
            fn()
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        text = f.read().decode(errors="replace")
    if os.environ.get("TEST_VERBOSE"):
        print("---- rank 0's stderr ----\n%s---- end ----" % text, flush=True)
    return text


def block_after(text, header):
    """The lines after the line holding header, up to the next log line."""
    at = text.find(header)
    if at < 0:
        return None
    rest = text[text.find("\n", at) + 1:]
    end = rest.find("\nhora[")
    return rest if end < 0 else rest[:end + 1]


def late_allreduce(name, late_fn):
    r, n = hvd.rank(), hvd.size()
    if r == n - 1:
        late_fn()
    got = hvd.allreduce(torch.full((5,), float(r + 1)), op=hvd.Sum, name=name)
    equal(got, torch.full((5,), float(n * (n + 1) // 2)), "%s after the stall" % name)


def stall_stderr(name, late_fn):
    """The last rank (returned first) stalls the all-reduce `name` in late_fn; rank 0's stderr meanwhile (None on
    the other ranks)."""
    return hvd.size() - 1, rank0_stderr_during(lambda: late_allreduce(name, late_fn))


def test_python_stack():
    late, text = stall_stderr("stall.sleep", late_rank_python_sleep)
    if text is None:
        return
    code = late_rank_python_sleep.__code__
    want = 'File "%s", line %d, in late_rank_python_sleep' % (code.co_filename, code.co_firstlineno + 1)
    header = "stall: rank %d missing for 'stall.sleep' (waited " % late
    block = block_after(text, header)
    check(block is not None, "rank 0's stderr has no %r line:\n%s" % (header, text))
    lines = [line for line in text.splitlines() if header in line]
    check(all(line.endswith("; rank %d is at:" % late) for line in lines),
          "a header does not end in 'rank %d is at:':\n%s" % (late, text))
    if block is not None:
        check("Python stack of the main thread (most recent call last):" in block,
              "the block under the warning is no Python stack:\n%s" % block)
        check(want in block, "the stack under the warning lacks %r:\n%s" % (want, block))
        check("time.sleep(3.5)" in block, "the stack does not show the sleeping line:\n%s" % block)


def test_silent_rank():
    late, text = stall_stderr("stall.gil", late_rank_holds_gil)
    if text is None:
        return
    want = "stall: rank %d missing for 'stall.gil' (waited " % late
    lines = text.splitlines()
    silent = [line for line in lines if want in line and "no answer to the stack request" in line]
    silent += [after for line, after in zip(lines, lines[1:]) if want in line and line.endswith("rank %d is at:" % late)
               and "has not finished: the stack provider has not returned" in after]
    check(len(silent) >= 1, "rank 0 did not report rank %d silent:\n%s" % (late, text))


if __name__ == "__main__":
    run([test_python_stack, test_silent_rank])
