"""The fake machine's Horovod test/parallel/test_torch.py: selftest.py commits
it, with a common.py beside it in test/utils/, into a fake git mirror of
Horovod under the tag v0.28.1, which --prepare stages and the torch stage
runs through the real tools/horovod-test-torch and rank_runner.py. Tests of
every family; those that mention the GPU in their name or source run (the
fake torch's _fake_horovod, from world.json, says which of them fail or
skip or hang), the others fail if they run at all (--gpu-only leaves them
out). Tests run in the order of their names (unittest's)."""
import time
import unittest

import torch
from common import rank_and_size


def outcome(test):
    """What the fake machine says of this test."""
    name = test._testMethodName
    if name in torch._fake_horovod.get('fail', []):
        test.fail('%s fails on rank %d (the fake machine says so)' % (name, rank_and_size()[0]))
    if name in torch._fake_horovod.get('skip', []):
        test.skipTest('No GPUs available')
    if name in torch._fake_horovod.get('hang', []):
        time.sleep(600)


class TorchTests(unittest.TestCase):
    # The GPU in the name, in a condition, in a dtype's name, in a decorator.
    def test_gpu_required(self):
        outcome(self)

    def test_horovod_rank(self):
        self.fail('a test for the host alone ran')

    def test_horovod_allreduce(self):
        if torch.cuda.is_available():
            outcome(self)

    def test_horovod_allreduce_error(self):
        self.fail('a test for the host alone ran')

    def test_horovod_allreduce_cpu_gpu_error(self):
        outcome(self)

    def test_horovod_grouped_allreduce(self):
        outcome(self) if torch.cuda.is_available() else None

    def test_horovod_allgather(self):
        for dtype in ['torch.FloatTensor', 'torch.cuda.FloatTensor']:
            if dtype.startswith('torch.cuda'):
                outcome(self)

    def test_horovod_grouped_allgather(self):
        devices = ['cuda'] if torch.cuda.is_available() else []
        for _ in devices:
            outcome(self)

    def test_horovod_broadcast(self):
        if torch.cuda.is_available():
            outcome(self)

    def test_broadcast_state_gpu(self):
        outcome(self)

    def test_horovod_alltoall(self):
        outcome(self) if torch.cuda.is_available() else None

    def test_horovod_reducescatter(self):
        dtypes = ['torch.IntTensor', 'torch.cuda.IntTensor']
        outcome(self) if any('cuda' in d for d in dtypes) else None

    @unittest.skipIf(not torch.cuda.is_available(), 'No GPUs available')
    def test_horovod_sync_batch_norm(self):
        outcome(self)
