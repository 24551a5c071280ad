"""hvd.elastic: Horovod's elastic training API over libhora's elastic worlds.

    import hora.torch as hvd
    hvd.init()
    state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0)
    state.register_reset_callbacks([rescale_lr])

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            ...; optimizer.step(); state.commit()

    train(state)

Under `hora-run --elastic` (libhora's store bootstrap, HORA_ELASTIC=1) the
world re-forms when a worker is lost or a host arrives (runtime/README.md,
"Elastic worlds"). A lost peer makes every pending and later collective fail
with HORA_ERR_PEER_LOST, which hora.torch raises as HorovodInternalError;
run() then rolls the state back to its last commit, ends the runtime, joins
the next generation (hvd.init), runs the reset callbacks, syncs the state
from a rank that has it and calls the function again. commit() asks libhora
whether hosts wait to join (hora_elastic_check, the same answer on every
rank) and raises HostsUpdatedInterrupt if so; run() then ends this
generation on purpose (hora_elastic_reform), joins the next one and syncs
without rolling back.

Under mpirun the world cannot re-form (hora_elastic() is 0): commit() never
raises HostsUpdatedInterrupt, and after a HorovodInternalError run() does
what Horovod's does, restore, shutdown, init (the same world again: libhora
keeps MPI up between them), callbacks, sync and a new call, so an error that
every rank saw (a mismatch) is retried from the last commit. A rank that
dies under mpirun ends the job as before (mpirun stops the others).
"""
import copy
import ctypes
import functools
import os
import random
import sys

import torch

import hora as _h
from hora import lib as _lib
from . import mpi_ops as _ops
from . import functions as _fn
from .mpi_ops import HorovodInternalError

__all__ = ["run", "State", "ObjectState", "TorchState", "ElasticSampler", "HostsUpdatedInterrupt",
           "HorovodInternalError"]


class HostsUpdatedInterrupt(RuntimeError):
    """Hosts wait to join the job (or were removed): raised by
    State.commit() on every rank at the same commit, and taken by run() as a
    reset without a rollback. skip_sync: whether run() may skip the sync
    after the reset (Horovod sets it when hosts were only removed; hora's
    commit raises it for arrivals, so False)."""

    def __init__(self, skip_sync=False, message="hosts updated"):
        super().__init__(message)
        self.skip_sync = skip_sync


# ---- libhora's elastic functions -------------------------------------------

def _elastic_function(name):
    """libhora's function name, or None where the loaded libhora predates
    elastic worlds; a job that hora-run started elastic (HORA_ELASTIC=1)
    cannot run on such a libhora: NotImplementedError, at the first use."""
    if name not in _h.missing:
        return getattr(_lib, name)
    if os.environ.get("HORA_ELASTIC") == "1":
        raise NotImplementedError("hora.torch.elastic: HORA_ELASTIC=1 (hora-run --elastic) but the loaded libhora "
                                  "(%s) has no %s; rebuild it from this tree" % (_h.library_path, name))
    return None


def _can_reform():
    """Whether this world can re-form (hora_elastic(): hora-run --elastic)."""
    f = _elastic_function("hora_elastic")
    return f is not None and _lib.hora_initialized() and f() == 1


def _can_reform_after_init():
    """Whether hora_init joins a next generation after a failed one: under
    hora-run --elastic (HORA_ELASTIC=1), libhora's elastic functions there."""
    return os.environ.get("HORA_ELASTIC") == "1" and _elastic_function("hora_elastic") is not None


def _hosts_waiting():
    """hora_elastic_check: the hosts waiting to be taken in, the same number
    on every rank (a collective in an elastic world; under mpirun 0, with
    no communication)."""
    f = _elastic_function("hora_elastic_check")
    if f is None:
        return 0
    _ops._need_init()
    n = ctypes.c_int(0)
    st = f(ctypes.byref(n))
    if st != _h.OK:
        raise HorovodInternalError("hora_elastic_check: %s: %s" % (_h.status_string(st), _h.last_error()))
    return n.value


def _sync_root(has_state):
    """The lowest rank whose state has been committed or synced before (a
    survivor, not a newcomer), by one all-reduce (Min) of the ranks that
    have one; rank 0 when none has (a job's first world)."""
    size = _ops.size()
    mine = torch.tensor([_ops.rank() if has_state else size], dtype=torch.int64)
    low = int(_ops.allreduce(mine, op=_ops.Min, name="hora.elastic.sync.root").item())
    return low if low < size else 0


# ---- run ---------------------------------------------------------------------

def run(func):
    """Decorator of the training function func(state, ...): every rank calls
    it, and it returns what func returns once func finished on every rank.

    Before the first call, and after each reset, the state is synced from a
    rank that has it (state.sync()). A HorovodInternalError (a collective
    failed: a peer was lost, or the ranks disagreed) rolls the state back
    to its last commit (state.restore()); a HostsUpdatedInterrupt (commit()
    found hosts waiting) keeps it. Both end this world (hora_elastic_reform
    where it can re-form, else hvd.shutdown()), start the next one
    (hvd.init(): the survivors, and the newcomers), run the state's reset
    callbacks and call func again. As in Horovod, func itself must not be
    called inside a collective, and the ranks of a world call collectives in
    the same order. Any other exception leaves run() unchanged."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        need_sync = True
        while True:
            try:
                if need_sync:
                    state.sync()
                return func(state, *args, **kwargs)
            except HorovodInternalError as e:
                state.restore()
                need_sync = True
                _reset(e)
            except HostsUpdatedInterrupt as e:
                need_sync = not e.skip_sync
                _reset(e)
            state.on_reset()

    return wrapper


def _reset(why):
    """End this world and join the next one. In a world that can re-form,
    with hora_elastic_reform: it takes waiting hosts in, ends a generation
    that had no loss (a failure every rank saw, or one rank's own error,
    whose shutdown fails the others' pending requests so that they come
    here too; libhora joins no next generation after a plain shutdown), and
    after a loss it is the plain shutdown (hora-run's failure was posted
    first). Else hora_shutdown, and init forms the same MPI world again.
    Statuses are no news here: init says whether a world formed. Rank 0 of
    the new world says what changed."""
    before = _ops.size() if _lib.hora_initialized() else 0
    _ops._end(_lib.hora_elastic_reform if _can_reform() else _lib.hora_shutdown)
    if _lib.hora_initialized():  # a re-form that failed (a peer lost meanwhile) left it running
        _ops._end(_lib.hora_shutdown)
    while True:
        try:
            _ops.init()
            break
        except HorovodInternalError as e:
            # A member lost while the next world formed (hora_init's
            # HORA_ERR_PEER_LOST): the generation after it. hora-run's
            # --max-restarts bounds how often.
            if _h.status_string(_h.ERR_PEER_LOST) not in str(e) or not _can_reform_after_init():
                raise
    if _ops.rank() == 0:
        generation = _elastic_function("hora_generation")
        print("hora.torch.elastic: world %d -> %d%s (%s)" %
              (before, _ops.size(), "" if generation is None else " in generation %d" % generation(), why),
              file=sys.stderr, flush=True)


# ---- states ------------------------------------------------------------------

class State:
    """What run() keeps across worlds: save() copies it to host memory
    (commit() also asks whether hosts wait), restore() goes back to the last
    copy, sync() makes every rank's equal to one rank's. reset() (subclasses)
    and the registered callbacks run after each reset, before the sync."""

    def __init__(self):
        object.__setattr__(self, "_reset_callbacks", [])
        object.__setattr__(self, "_has_state", False)  # committed or synced in some world (not a newcomer)

    def register_reset_callbacks(self, callbacks):
        """Functions to call (no arguments) after each reset: a world that
        lost or gained ranks (e.g. to scale the learning rate by hvd.size())."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Save the state in memory, then raise HostsUpdatedInterrupt on every
        rank when hosts wait to join (one small collective: every rank
        commits at the same points). A commit costs a copy of the state:
        commit every few steps where a step is short."""
        self.save()
        object.__setattr__(self, "_has_state", True)
        self.check_host_updates()

    def check_host_updates(self):
        """Raise HostsUpdatedInterrupt on every rank when hosts wait to join
        (collective; never under mpirun)."""
        waiting = _hosts_waiting()
        if waiting > 0:
            raise HostsUpdatedInterrupt(False, "%d host(s) waiting to join" % waiting)

    # What a state keeps is its subclass's to say (ObjectState, TorchState,
    # or the user's own, as in Horovod): State itself keeps nothing.
    def save(self):
        raise NotImplementedError("%s.save: a State subclass saves what it keeps (ObjectState, TorchState)" %
                                  type(self).__name__)

    def restore(self):
        raise NotImplementedError("%s.restore: a State subclass restores what it keeps (ObjectState, TorchState)" %
                                  type(self).__name__)

    def sync(self):
        raise NotImplementedError("%s.sync: a State subclass syncs what it keeps (ObjectState, TorchState)" %
                                  type(self).__name__)

    def reset(self):
        pass


class ObjectState(State):
    """Plain Python values given as keyword arguments, kept as attributes.
    save() and restore() copy them (copy.deepcopy), so that a later change
    in place (a list appended to) is undone by restore() too; Horovod keeps
    references there. sync() sends the root's values pickled."""

    def __init__(self, **kwargs):
        super().__init__()
        object.__setattr__(self, "_saved_state", copy.deepcopy(kwargs))
        for name, value in kwargs.items():
            object.__setattr__(self, name, value)

    def save(self):
        object.__setattr__(self, "_saved_state",
                           {name: copy.deepcopy(getattr(self, name)) for name in self._saved_state})

    def restore(self):
        for name, value in self._saved_state.items():
            object.__setattr__(self, name, copy.deepcopy(value))

    def sync(self):
        self._sync_from(_sync_root(self._has_state))
        self.save()
        object.__setattr__(self, "_has_state", True)

    def _sync_from(self, root):
        if self._saved_state:
            values = {name: getattr(self, name) for name in self._saved_state}
            values = _fn.broadcast_object(values, root_rank=root, name="hora.elastic.attributes")
            for name, value in values.items():
                object.__setattr__(self, name, value)


class TorchState(ObjectState):
    """Horovod's TorchState: a model (torch.nn.Module), an optimizer
    (torch.optim.Optimizer, a DistributedOptimizer too), an ElasticSampler,
    given by any keyword, each kept by its state_dict(); every other keyword
    an ObjectState attribute. Assigning a new model, optimizer or sampler to
    its attribute saves it at once."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        kwargs.update(model=model, optimizer=optimizer)
        handlers, plain = {}, {}
        for name, value in kwargs.items():
            handler = _handler_for(name, value)
            if handler is None:
                plain[name] = value
            else:
                handlers[name] = handler
        object.__setattr__(self, "_handlers", handlers)
        for name, handler in handlers.items():
            object.__setattr__(self, name, handler.value)
        super().__init__(**plain)

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def _sync_from(self, root):
        for handler in self._handlers.values():
            handler.sync(root)
        super()._sync_from(root)

    def __setattr__(self, name, value):
        handler = self._handlers.get(name) if "_handlers" in self.__dict__ else None
        if handler is not None:
            handler.value = value
            handler.save()
        object.__setattr__(self, name, value)


def _copy_state(obj):
    """A copy of a state_dict: each tensor cloned (its data copied, on its
    device), the containers rebuilt (an OrderedDict's _metadata, which
    Module.load_state_dict reads, kept), anything else deep-copied.
    copy.deepcopy (Horovod's) takes about 8 times as long for a model's
    tensors."""
    if torch.is_tensor(obj):
        return obj.detach().clone()
    if isinstance(obj, dict):
        out = type(obj)((k, _copy_state(v)) for k, v in obj.items())
        if hasattr(obj, "_metadata"):
            out._metadata = copy.deepcopy(obj._metadata)
        return out
    if type(obj) in (list, tuple):
        return type(obj)(_copy_state(v) for v in obj)
    return copy.deepcopy(obj)


class _Handler:
    """One object a TorchState keeps by its state_dict(): a model, an
    optimizer, an ElasticSampler."""

    def __init__(self, name, value):
        self.name, self.value = name, value
        self.save()

    def save(self):
        self.saved = _copy_state(self.value.state_dict())

    def restore(self):
        # A copy: torch 2's Optimizer.load_state_dict keeps the tensors it need not cast.
        self.value.load_state_dict(_copy_state(self.saved))


class _ModelHandler(_Handler):
    def sync(self, root):
        # Parameters and buffers (BN statistics), in place.
        _fn.broadcast_parameters(self.value.state_dict(), root_rank=root, prefix="hora.elastic.%s." % self.name)


class _OptimizerHandler(_Handler):
    def sync(self, root):
        # broadcast_optimizer_state gives an optimizer without state one by a
        # step on zero gradients, which moves the parameters where weight
        # decay is set: they are put back.
        params = [p for group in self.value.param_groups for p in group["params"]]
        with torch.no_grad():
            kept = [p.detach().clone() for p in params]
            _fn.broadcast_optimizer_state(self.value, root_rank=root, prefix="hora.elastic.%s." % self.name)
            for p, k in zip(params, kept):
                p.copy_(k)


class _SamplerHandler(_Handler):
    def sync(self, root):
        # Loading repartitions the samples not yet processed for this world.
        self.value.load_state_dict(_fn.broadcast_object(self.value.state_dict(), root_rank=root,
                                                        name="hora.elastic.%s" % self.name))


def _handler_for(name, value):
    if isinstance(value, torch.nn.Module):
        return _ModelHandler(name, value)
    if isinstance(value, torch.optim.Optimizer):
        return _OptimizerHandler(name, value)
    if isinstance(value, ElasticSampler):
        return _SamplerHandler(name, value)
    return None


# ---- ElasticSampler ------------------------------------------------------------

class ElasticSampler(torch.utils.data.Sampler):
    """Horovod's ElasticSampler: splits a dataset's indices over the ranks of
    the current world, leaving out the samples already processed this epoch,
    so that a TorchState holding it repartitions the rest after a reset.
    Call record_batch(batch_idx, batch_size) after each batch (it counts
    batch_size samples on every rank) and set_epoch(epoch) at the end of an
    epoch. shuffle: the same permutation of the indices on every rank, from
    seed + epoch. Each rank gets ceil(remaining / size) samples, the last
    ones wrapping around to the first."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset, self.shuffle, self.seed = dataset, shuffle, seed
        self.epoch = 0
        self.processed_num = 0
        self.reset()

    def set_epoch(self, epoch):
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        self.processed_num += batch_size * self.num_replicas

    def state_dict(self):
        return {"epoch": self.epoch, "processed_num": self.processed_num}

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_num = state_dict["processed_num"]
        self.reset()

    def reset(self):
        """Split what is left of this epoch for the current world."""
        self.num_replicas, self.rank = _ops.size(), _ops.rank()
        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        self.remaining_indices = order[self.processed_num:]
        self.num_samples = -(-len(self.remaining_indices) // self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        left = self.remaining_indices
        padded = (left * (-(-self.total_size // len(left)) if left else 0))[:self.total_size]
        return iter(padded[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples
