"""Preemption in hora.torch: a catchable exception at a step boundary, on
every rank at the same step, so that the script can save and exit 0 before
its machines go (libhora's hora_preempt_*, runtime/README.md "Preemption").

    hvd.init()
    hvd.preempt_watch()                    # SIGTERM now asks for a stop
    opt = hvd.DistributedOptimizer(...)
    try:
        for step in ...:
            ...; opt.step()                # raises hvd.Preempted after the step
    except hvd.Preempted as p:
        if hvd.rank() == 0: torch.save(..., "ckpt.pt")   # p.step: the agreed step
        sys.exit(0)

A rank asks for a stop when it receives SIGTERM (after preempt_watch), when
the file HORA_PREEMPT_FILE names exists, or with request_preempt(). Horovod
has no equivalent; Preempted is neither HorovodInternalError nor
HostsUpdatedInterrupt, so an elastic loop does not take it for a failure to
recover from.
"""
import ctypes

import hora as _h
from hora import lib as _lib
from . import mpi_ops as _ops

# Whether DistributedOptimizer.step() agrees after every step (preempt_watch).
_check_in_step = False


class Preempted(Exception):
    """Some rank asked for a stop; raised on every rank at the same step.
    .step: the agreed step (what check_preempted was given, or the
    optimizer's count of its completed steps); .rank: the lowest rank that
    asked; .causes: the words of its reasons ("SIGTERM", "HORA_PREEMPT_FILE",
    "request_preempt")."""

    def __init__(self, step, rank, cause):
        self.step, self.rank = step, rank
        self.causes = [w for bit, w in ((_h.PREEMPT_CAUSE_SIGTERM, "SIGTERM"),
                                        (_h.PREEMPT_CAUSE_FILE, "HORA_PREEMPT_FILE"),
                                        (_h.PREEMPT_CAUSE_REQUEST, "request_preempt")) if cause & bit]
        super().__init__("preempted at step %d (asked by rank %d: %s)" % (step, rank, ", ".join(self.causes)))


def preempt_watch(sigterm=True, check_in_step=True):
    """Watch for a stop: sigterm installs libhora's SIGTERM handler (it only
    sets a flag; sigterm=False puts SIGTERM's previous action back), and
    check_in_step makes every DistributedOptimizer.step() agree, after its
    update, whether some rank asked (one small all-reduce) and raise
    Preempted if so. A later signal.signal(SIGTERM, ...) replaces the
    handler."""
    global _check_in_step
    _ops._need_function("hora_preempt_watch", "preempt_watch")
    st = _lib.hora_preempt_watch(_h.PREEMPT_WATCH_SIGTERM if sigterm else 0)
    if st != _h.OK:
        raise _ops.HorovodInternalError("hora_preempt_watch: %s: %s" % (_h.status_string(st), _h.last_error()))
    _check_in_step = bool(check_in_step)


def request_preempt():
    """Ask for a stop from this rank (the next agreement stops every rank)."""
    _ops._need_function("hora_preempt_request", "request_preempt")
    _lib.hora_preempt_request()


def check_preempted(step):
    """Collective, at a step boundary, every rank with the same step: raise
    Preempted on every rank when some rank asked for a stop, else return.
    A failed agreement raises HorovodInternalError on every rank."""
    _ops._need_function("hora_preempt_agree", "check_preempted")
    stop, by, cause = ctypes.c_int64(-1), ctypes.c_int(-1), ctypes.c_int(0)
    st = _lib.hora_preempt_agree(int(step), ctypes.byref(stop), ctypes.byref(by), ctypes.byref(cause))
    if st != _h.OK:
        raise _ops.HorovodInternalError("hora_preempt_agree: %s: %s" % (_h.status_string(st), _h.last_error()))
    if stop.value >= 0:
        raise Preempted(stop.value, by.value, cause.value)


def after_step(optimizer):
    """DistributedOptimizer.step()'s last act: count the step, agree (when
    preempt_watch asked for it). The agreement is the world's: an optimizer
    of a process set (whose step the other ranks do not call) leaves it to
    the script's check_preempted."""
    optimizer._hora_preempt_steps = getattr(optimizer, "_hora_preempt_steps", 0) + 1
    process_set = getattr(optimizer, "process_set", None)
    if _check_in_step and (process_set is None or process_set.process_set_id == 0):
        check_preempted(optimizer._hora_preempt_steps)
