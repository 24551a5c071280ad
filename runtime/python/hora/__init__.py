"""hora - Python face of libhora, hora's communication runtime.

The package holds no collective logic: it loads libhora.so with ctypes and
declares the C signatures of runtime/include/hora.h. `hora.torch` builds the
horovod.torch API on top of it.

libhora.so is looked up, in this order:
  1. $HORA_LIBRARY (a path to libhora.so; when set, the only place tried);
  2. the installed package: libhora.so inside this folder, where a wheel
     (pyproject.toml, tools/wheel) puts it with libhora-kernels.so;
  3. the build tree next to this package: <repo>/build/runtime/libhora.so
     (this file lives in <repo>/runtime/python/hora/ there);
  4. the system loader ("libhora.so", e.g. after `meson install`).
It is loaded with RTLD_GLOBAL so that Open MPI's plugins, which libmpi dlopens,
resolve MPI's symbols.
"""
import ctypes
import os

__all__ = ["lib", "library_path", "library_source", "HoraError", "Opts", "status_string", "last_error",
           "build_info", "missing"]

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.normpath(os.path.join(_HERE, "..", "..", ".."))


def _candidates(env=None):
    """(what, path) for each place to look, in order; `env` defaults to os.environ."""
    env = os.environ if env is None else env
    hora_library = env.get("HORA_LIBRARY")
    if hora_library:
        return [("$HORA_LIBRARY", hora_library)]
    return [("installed package", os.path.join(_HERE, "libhora.so")),
            ("build tree", os.path.join(_REPO, "build", "runtime", "libhora.so")),
            ("system loader", "libhora.so")]


def _load(env=None):
    """Loads the first libhora.so found; returns (CDLL, path, what)."""
    tried = []
    for what, path in _candidates(env):
        if os.sep in path and not os.path.exists(path):
            tried.append("%s %s: no such file" % (what, path))
            continue
        try:
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL), path, what
        except OSError as e:
            tried.append("%s %s: %s" % (what, path, e))
    raise ImportError("hora: cannot load libhora.so; tried " + "; ".join(tried) +
                      " (places: $HORA_LIBRARY=/path/to/libhora.so, else libhora.so inside the installed"
                      " hora package (pip install . or tools/wheel), else the build tree's"
                      " build/runtime/libhora.so (tools/setup or meson+ninja))")


lib, library_path, library_source = _load()

# Copies of hora.h's statuses, enums, constants and hora_opts_t, each named
# as in hora.h without its HORA_ prefix. tests/runtime/python/check_binding.py (test
# 'python binding') checks them, and the functions declared below, against
# what the C compiler makes of hora.h.

# hora_status_t
OK = 0
IN_PROGRESS = 1
ERR_INVALID_ARG = -1
ERR_NO_MEMORY = -2
ERR_NOT_INITIALIZED = -3
ERR_UNSUPPORTED = -4
ERR_MPI = -5
ERR_TRANSPORT = -6
ERR_CONFIG = -7
ERR_SYSTEM = -8
ERR_MISMATCH = -9
ERR_DUPLICATE = -10
ERR_SHUTDOWN = -11
ERR_TIMEOUT = -12
ERR_ALREADY_INITIALIZED = -13
ERR_CORRUPT = -14
ERR_INTERNAL = -15
ERR_PEER_LOST = -16  # elastic: a member of this world was lost; re-form (hora.torch: HorovodInternalError)

# hora_compression_t, hora_memory_t, hora_reproducible_t
COMPRESSION_NONE, COMPRESSION_FP16, COMPRESSION_BF16 = 0, 1, 2
MEMORY_HOST, MEMORY_CUDA = 0, 1
REPRODUCIBLE_DEFAULT, REPRODUCIBLE_RANKS, REPRODUCIBLE_EXACT = 0, 1, 2
ALIGN_BYTES = 64  # tensors of a fused buffer (and hora.torch.shared_tensors) start at multiples of it
MAX_DIMS = 8
PROCESS_SET_WORLD = 0  # hora_opts_t.process_set: every rank
# Preemption (hora.h): hora_preempt_watch's flag, hora_preempt_agree's causes.
PREEMPT_WATCH_SIGTERM = 1
PREEMPT_CAUSE_SIGTERM, PREEMPT_CAUSE_FILE, PREEMPT_CAUSE_REQUEST = 1, 2, 4

# hora_dtype_t names; their values come from the loaded libhora
# (hora_dtype_parse). A name it does not know is left out of `dtypes`, so the
# torch mapping refuses it with a clear error.
_DTYPE_NAMES = ("f32", "f16", "bf16", "f64", "i32", "i64", "u8", "i8", "i16", "u16", "bool")


class Opts(ctypes.Structure):
    """hora_opts_t (initialise through Opts.make(), the HORA_OPTS_INIT values,
    which sets struct_bytes: libhora refuses 0)."""
    _fields_ = [
        ("struct_bytes", ctypes.c_size_t),  # sizeof(hora_opts_t) as this binding declares it
        ("prescale", ctypes.c_double),
        ("postscale", ctypes.c_double),
        ("compression", ctypes.c_int),
        ("memory", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("dims", ctypes.c_int64 * MAX_DIMS),
        ("device", ctypes.c_int),
        ("stream", ctypes.c_void_p),
        ("ready_event", ctypes.c_void_p),
        ("process_set", ctypes.c_int),
        ("reproducible", ctypes.c_int),  # hora_reproducible_t; 0 follows HORA_REPRODUCIBLE
    ]

    @classmethod
    def make(cls, prescale=1.0, postscale=1.0, shape=None, compression=COMPRESSION_NONE,
             process_set=PROCESS_SET_WORLD):
        o = cls()
        o.struct_bytes = ctypes.sizeof(cls)
        o.prescale = float(prescale)
        o.postscale = float(postscale)
        o.compression = compression
        o.memory = MEMORY_HOST
        o.device = -1
        o.process_set = process_set
        o.ndim = 0
        if shape is not None and 0 < len(shape) <= MAX_DIMS:
            o.ndim = len(shape)
            for i, d in enumerate(shape):
                o.dims[i] = int(d)
        return o


def _declare(name, restype, argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = argtypes
    return f


_c = ctypes
_vp = _c.c_void_p
_st = _c.c_int
_declare("hora_status_string", _c.c_char_p, [_st])
_declare("hora_dtype_name", _c.c_char_p, [_c.c_int])
_declare("hora_op_name", _c.c_char_p, [_c.c_int])
_declare("hora_dtype_size", _c.c_size_t, [_c.c_int])
_declare("hora_dtype_parse", _c.c_int, [_c.c_char_p])
_declare("hora_op_parse", _c.c_int, [_c.c_char_p])
_declare("hora_last_error", _c.c_char_p, [])
_declare("hora_init", _st, [])
_declare("hora_shutdown", _st, [])
_declare("hora_initialized", _c.c_int, [])
_declare("hora_abort", _st, [_st, _c.c_char_p])
for _n in ("hora_rank", "hora_size", "hora_local_rank", "hora_local_size", "hora_node_rank",
           "hora_node_count", "hora_cuda_device"):
    _declare(_n, _c.c_int, [])
_declare("hora_transport_name", _c.c_char_p, [])
_declare("hora_allreduce", _st, [_vp, _vp, _c.c_size_t, _c.c_int, _c.c_int])
_declare("hora_shard", None, [_c.c_size_t, _c.c_int, _c.c_int, _c.POINTER(_c.c_size_t),
                              _c.POINTER(_c.c_size_t)])
_declare("hora_reduce_scatter", _st, [_vp, _vp, _c.c_size_t, _c.c_int, _c.c_int])
_declare("hora_allgatherv", _st, [_vp, _vp, _c.POINTER(_c.c_size_t), _c.c_int])
_declare("hora_broadcast", _st, [_vp, _c.c_size_t, _c.c_int, _c.c_int])
_OptsP = _c.POINTER(Opts)
_declare("hora_allreduce_async", _st, [_c.c_char_p, _vp, _vp, _c.c_size_t, _c.c_int, _c.c_int, _OptsP,
                                       _c.POINTER(_vp)])
_declare("hora_grouped_allreduce_async", _st, [_c.c_int, _c.POINTER(_c.c_char_p), _c.POINTER(_vp),
                                               _c.POINTER(_vp), _c.POINTER(_c.c_size_t), _c.c_int, _c.c_int,
                                               _OptsP, _c.POINTER(_vp)])
_declare("hora_broadcast_async", _st, [_c.c_char_p, _vp, _c.c_size_t, _c.c_int, _c.c_int, _OptsP,
                                       _c.POINTER(_vp)])
_declare("hora_allgather_async", _st, [_c.c_char_p, _vp, _c.c_size_t, _c.c_int, _OptsP, _c.POINTER(_vp)])
_declare("hora_request_result", _st, [_vp, _c.POINTER(_vp), _c.POINTER(_c.c_size_t),
                                      _c.POINTER(_c.POINTER(_c.c_size_t))])
_declare("hora_join", _st, [_c.POINTER(_c.c_int)])
_declare("hora_mem_alloc", _st, [_c.c_size_t, _c.POINTER(_vp)])
_declare("hora_mem_free", _st, [_vp])
_declare("hora_mem_is_shared", _c.c_int, [_vp])

# hora_wait and hora_join block: ctypes releases the GIL around every CDLL call.
_declare("hora_wait", _st, [_vp])
_declare("hora_test", _st, [_vp, _c.POINTER(_c.c_int)])
_declare("hora_request_error", _c.c_char_p, [_vp])
_declare("hora_request_free", None, [_vp])


# Functions a libhora older than this binding may lack: their names go to
# `missing`, and hora.torch refuses those operations saying so (rebuild libhora).
missing = set()


def _declare_optional(name, restype, argtypes):
    try:
        return _declare(name, restype, argtypes)
    except AttributeError:
        missing.add(name)
        return None


_declare_optional("hora_reducescatter_async", _st, [_c.c_char_p, _vp, _vp, _c.c_size_t, _c.c_int, _c.c_int,
                                                    _OptsP, _c.POINTER(_vp)])
_declare_optional("hora_grouped_reducescatter_async", _st, [_c.c_int, _c.POINTER(_c.c_char_p), _c.POINTER(_vp),
                                                            _c.POINTER(_vp), _c.POINTER(_c.c_size_t), _c.c_int,
                                                            _c.c_int, _OptsP, _c.POINTER(_vp)])
_declare_optional("hora_alltoall_async", _st, [_c.c_char_p, _vp, _c.c_size_t, _c.c_int, _c.POINTER(_c.c_size_t),
                                               _OptsP, _c.POINTER(_vp)])
_declare_optional("hora_barrier_async", _st, [_c.c_char_p, _OptsP, _c.POINTER(_vp)])
_declare_optional("hora_process_set_create", _st, [_c.POINTER(_c.c_int), _c.c_int, _c.POINTER(_c.c_int)])
_declare_optional("hora_process_set_free", _st, [_c.c_int])
from hora import stacks as _stacks  # noqa: E402 (its provider's type)
_declare_optional("hora_set_stack_provider", _st, [_stacks.PROVIDER_T, _vp])
_declare_optional("hora_process_set_info", _st, [_c.c_int, _c.POINTER(_c.c_int), _c.POINTER(_c.c_int),
                                                 _c.POINTER(_c.c_int), _c.c_int])
_declare_optional("hora_timeline_start", _st, [_c.c_char_p])
_declare_optional("hora_timeline_stop", _st, [])
_declare_optional("hora_timeline_mark_cycles", _st, [_c.c_int])
_declare_optional("hora_build_info", _c.c_char_p, [])
_declare_optional("hora_stream_wait", _st, [_vp, _vp])
_declare_optional("hora_preempt_watch", _st, [_c.c_int])
_declare_optional("hora_preempt_request", _st, [])
_declare_optional("hora_preempt_agree", _st, [_c.c_int64, _c.POINTER(_c.c_int64), _c.POINTER(_c.c_int),
                                              _c.POINTER(_c.c_int)])
# Elastic worlds (hora.torch.elastic): absent from a libhora older than them,
# which can then form no world but the first (elastic.py says so when asked).
_declare_optional("hora_bootstrap", _c.c_char_p, [])
_declare_optional("hora_generation", _c.c_int, [])
_declare_optional("hora_elastic", _c.c_int, [])
_declare_optional("hora_elastic_check", _st, [_c.POINTER(_c.c_int)])
_declare_optional("hora_elastic_reform", _st, [])

dtypes = {n: v for n in _DTYPE_NAMES for v in [lib.hora_dtype_parse(n.encode())] if v >= 0}
# hora_op_t, from the library too.
OP_SUM, OP_AVG, OP_MIN, OP_MAX, OP_PROD = (lib.hora_op_parse(n) for n in (b"sum", b"avg", b"min", b"max", b"prod"))
# Not element-wise (hora.h): -1 from a libhora older than Adasum.
OP_ADASUM = lib.hora_op_parse(b"adasum")


def status_string(status):
    s = lib.hora_status_string(status)
    return s.decode() if s else "HORA_STATUS_%d" % status


def last_error():
    s = lib.hora_last_error()
    return s.decode(errors="replace") if s else ""


def build_info():
    """What the loaded libhora was built with (hora_build_info): a dict of its
    "key=value" words, e.g. {"version": "0.1.0", "ucx": "1", ...}; None from a
    libhora older than hora_build_info."""
    if "hora_build_info" in missing:
        return None
    return dict(w.split("=", 1) for w in lib.hora_build_info().decode().split() if "=" in w)


class HoraError(RuntimeError):
    """A libhora call failed; .status is the hora_status_t."""

    def __init__(self, status, message):
        self.status = status
        super().__init__("%s: %s" % (status_string(status), message) if message else status_string(status))
