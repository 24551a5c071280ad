"""hvd.SyncBatchNorm: batch normalisation over the global batch.

In training, each rank normalises its own slice of the batch with the mean
and variance of the whole batch (every rank's slice, whatever its size), and
the running estimates move as torch.nn.BatchNorm*d's would on the
concatenated batch. Backward gives each rank its input's share of the global
batch's gradient; the weight and bias gradients stay local (each rank's part
of the sum), as in Horovod: the DistributedOptimizer reduces them with every
other parameter's gradient.

The statistics travel by all-reduce, not allgather: one Sum of a fixed-size
float64 vector (count, then per channel the sum and the sum of squares, both
rebuilt from the rank's own mean and biased variance) in forward, one Sum of
the two per-channel gradient sums in backward. An all-reduce is as long
whatever the number of ranks, and it is the one collective that runs while
ranks have joined (hvd.join): a joined rank contributes zeros, that is no
samples. Squares summed in float64 from local moments lose accuracy only
where |mean| / std passes about 1e4, beyond what float32 inputs resolve.
"""
import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from .mpi_ops import Sum, allreduce_async, size, synchronize


def _allreduce_sum(tensor, name):
    return synchronize(allreduce_async(tensor, op=Sum, name=name))


def _per_channel(t, dim):
    """A (C,) tensor shaped to broadcast against an (N, C, ...) one of dim dimensions."""
    return t.reshape([1, -1] + [1] * (dim - 2))


class _SyncBatchNormFunction(torch.autograd.Function):
    """Training-mode batch norm with global statistics; see the module's docstring."""

    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_var, factor, eps):
        c = input.size(1)
        count = input.numel() // c if c else 0
        dims = [0] + list(range(2, input.dim()))
        # The rank's moments in float32 (float64 for float64 input), summed in float64.
        acc = torch.float64 if input.dtype == torch.float64 else torch.float32
        x = input.to(acc)
        if count:
            # Two passes (a sum, then squares about the mean): as accurate as
            # torch.var_mean, which over several dimensions is 6x slower on the CPU.
            mean = x.sum(dim=dims) / count
            var = (x - _per_channel(mean, input.dim())).square_().sum(dim=dims) / count
            mean, var = mean.double(), var.double()
        else:  # an empty slice: no samples to add
            mean = var = torch.zeros(c, dtype=torch.float64, device=input.device)
        local = torch.cat([torch.full((1,), float(count), dtype=torch.float64, device=input.device),
                           count * mean, count * (var + mean * mean)])
        total = _allreduce_sum(local, "hora.sync_batch_norm.stats.%d" % c)
        n = int(total[0].item())
        if n <= 1:
            # torch's refusal for one value per channel (and none), on every rank alike.
            raise ValueError("hora.torch.SyncBatchNorm: expected more than 1 value per channel when training, "
                             "got %d over all ranks (input size %s on this rank)" % (n, list(input.shape)))
        g_mean = total[1:c + 1] / n
        g_var = (total[c + 1:] / n - g_mean * g_mean).clamp_(min=0.0)
        if running_mean is not None:
            running_mean.copy_(factor * g_mean + (1.0 - factor) * running_mean.double())
        if running_var is not None:
            running_var.copy_(factor * g_var * (n / (n - 1)) + (1.0 - factor) * running_var.double())
        # torch's own kernel normalises, given the global statistics as estimates.
        out = F.batch_norm(input, g_mean.to(acc), g_var.to(acc), weight, bias, False, 0.0, eps)
        mean = _per_channel(g_mean.to(acc), input.dim())
        invstd = _per_channel(torch.rsqrt(g_var + eps).to(acc), input.dim())
        ctx.save_for_backward(input, weight, mean, invstd)
        ctx.n = n
        ctx.bias_dtype = bias.dtype if bias is not None else acc
        return out

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, mean, invstd = ctx.saved_tensors
        need_input, need_weight, need_bias = ctx.needs_input_grad[:3]
        c = input.size(1)
        dims = [0] + list(range(2, input.dim()))
        acc = mean.dtype
        dy = grad_output.to(acc)
        xmu = input.to(acc) - mean
        sum_dy = dy.sum(dim=dims)
        sum_dy_xmu = (dy * xmu).sum(dim=dims)
        grad_input = grad_weight = grad_bias = None
        if need_weight and weight is not None:
            grad_weight = (sum_dy_xmu * invstd.reshape(-1)).to(weight.dtype)
        if need_bias:
            grad_bias = sum_dy.to(ctx.bias_dtype)
        if need_input:
            # Every rank's outputs depend on every rank's input through the mean
            # and variance: the two sums over the global batch.
            total = _allreduce_sum(torch.cat([sum_dy, sum_dy_xmu]).double(), "hora.sync_batch_norm.grads.%d" % c)
            mean_dy = _per_channel((total[:c] / ctx.n).to(acc), input.dim())
            mean_dy_xmu = _per_channel((total[c:] / ctx.n).to(acc), input.dim())
            scale = invstd if weight is None else invstd * _per_channel(weight.to(acc), input.dim())
            # (dy - mean_dy - xmu * invstd^2 * mean_dy_xmu) * scale, in three passes over one new tensor.
            grad_input = torch.addcmul(dy, xmu, invstd * invstd * mean_dy_xmu, value=-1.0)
            grad_input = grad_input.sub_(mean_dy).mul_(scale).to(input.dtype)
        return grad_input, grad_weight, grad_bias, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    """Batch normalisation whose training-mode statistics are those of the
    batch over all ranks (Horovod's hvd.SyncBatchNorm). Inputs are (N, C, ...)
    with any number of trailing dimensions (BatchNorm1d, 2d and 3d shapes);
    the ranks' N may differ, 0 included. Eval mode with running statistics,
    and a world of one rank, are plain batch norm. Every rank must call it
    the same number of times, as any collective."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError("hora.torch.SyncBatchNorm: expected at least 2D input (N, C, ...), got %dD input "
                             "of size %s" % (input.dim(), list(input.shape)))
        if input.size(1) != self.num_features and (self.affine or self.track_running_stats):
            raise ValueError("hora.torch.SyncBatchNorm: input has %d channels (size %s), the module %d" %
                             (input.size(1), list(input.shape), self.num_features))

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # the cumulative average
                factor = 1.0 / float(self.num_batches_tracked)
        # As _BatchNorm: batch statistics in training, and in eval without running
        # estimates; the estimates move only in training when tracked.
        batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        running_mean = self.running_mean if keep else None
        running_var = self.running_var if keep else None
        if not batch_stats or size() == 1:
            return F.batch_norm(input, running_mean, running_var, self.weight, self.bias, batch_stats, factor,
                                self.eps)
        return _SyncBatchNormFunction.apply(input, self.weight, self.bias, running_mean, running_var, factor,
                                            self.eps)
