"""hora.stacks - the text libhora's stall inspector shows for this process.

When rank 0 warns that this rank is missing for a tensor (HORA_STALL_STACKS),
libhora asks this process for its stack on a helper thread of its own. By
default it takes a native backtrace; hora.torch registers `provider` here
instead (`hora_set_stack_provider`), which formats the Python stack of the
main thread: ctypes takes the GIL for the call, which it gets while the main
thread runs Python code or waits in a call that released it (time.sleep,
hora_wait, most of torch). A thread that holds the GIL inside C code keeps the
provider waiting; rank 0 then reports the rank as silent and goes on.
"""
import ctypes
import sys
import threading
import traceback

# size_t provider(char *buf, size_t buf_bytes, void *arg), as hora.h's hora_stack_provider_t.
PROVIDER_T = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)


def main_thread_stack(limit_bytes):
    """The main thread's stack as traceback prints it (most recent call
    last), without its outermost entries where it is longer than
    limit_bytes of UTF-8."""
    head = "Python stack of the main thread (most recent call last):\n"
    frame = sys._current_frames().get(threading.main_thread().ident)
    if frame is None:
        return "(the main thread has no Python frame: it has ended)\n"
    try:
        entries = traceback.format_stack(frame)
    finally:
        del frame
    cut = "  ... (%d outer calls left out)\n"
    used = len(head.encode()) + len((cut % len(entries)).encode())
    kept = []
    for entry in reversed(entries):
        n = len(entry.encode("utf-8", "replace"))
        if used + n > limit_bytes:
            break
        kept.append(entry)
        used += n
    left_out = len(entries) - len(kept)
    return head + (cut % left_out if left_out else "") + "".join(reversed(kept))


def _provide(buf, buf_bytes, arg):
    try:
        data = main_thread_stack(buf_bytes - 1).encode("utf-8", "replace")[:buf_bytes - 1]
        ctypes.memmove(buf, data, len(data))
        return len(data)
    except BaseException:  # never into libhora's thread
        return 0


# Module-level, so it lives as long as the interpreter: libhora may call it
# until it is unregistered.
provider = PROVIDER_T(_provide)


def register(lib):
    """Make libhora show the main thread's Python stack (hora.torch.init)."""
    if getattr(lib, "hora_set_stack_provider", None) is not None:
        lib.hora_set_stack_provider(provider, None)


def unregister(lib):
    """Back to the native backtrace (hora.torch.shutdown, before the
    interpreter goes away)."""
    if getattr(lib, "hora_set_stack_provider", None) is not None:
        lib.hora_set_stack_provider(PROVIDER_T(), None)
