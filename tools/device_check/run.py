"""--run (on the lent GPU machine, $OUT set): the stages, each a step with its
own time limit and log under $OUT/logs, and the table they fill."""
import contextlib
import json
import os
import re
import subprocess
import sys
import time

from . import figures, horovod, loader, proc, replay, settings as S
from .prepare import find_nvcc, note

# The PyTorch peer runs where this says python3 has torch with CUDA.
TORCH_CHECK = ('import sys, torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available()); '
               'sys.exit(0 if torch.cuda.is_available() else 3)')
HERE = os.path.dirname(os.path.abspath(__file__))


def secs(t0):
    return '%.1f' % (time.time() - t0)


def without(env, name):
    env = dict(env)
    env.pop(name, None)
    return env


def path_prepend(name, value):
    """export NAME=VALUE${NAME:+:$NAME}"""
    old = os.environ.get(name)
    os.environ[name] = value + (':' + old if old else '')


class Run:
    """What the stages share: the settings, the probe's findings, the build
    chosen, the rows of the table."""

    def __init__(self, top, cfg, force_source):
        self.top = top
        self.cfg = cfg
        self.stage = cfg.stage
        self.force_source = force_source
        self.out = ''
        self.rows = []
        self.deadline = 0
        self.gpu_count = 0
        self.cudart_rc = -1
        self.gpu_smi = ''
        self.staged_ok = False
        self.mode = ''
        self.tests_json = ''
        self.build_root = ''
        self.mpi_root = ''
        self.mpirun = ''
        self.machine_lib_path = ''
        self.torch_check = None

    def row(self, stage, result, seconds, key, counted=True):
        """A row of the table (a stage's; counted=False: a line of detail
        under it, not counted in the summary)."""
        self.rows.append((stage, result, seconds, key, counted))
        print('== %-9s %-8s %6s s  %s' % (stage, result, seconds, key), flush=True)

    def log(self, name):
        return os.path.join(self.out, 'logs', name)

    def stage_timeout(self, stage):
        """Seconds for a stage: its own, and after the build at most what is
        left before the deadline."""
        t = self.cfg.timeout[stage]
        if stage not in ('probe', 'build'):
            t = min(t, self.deadline - int(time.time()))
        return t

    def not_run(self, stage):
        self.row(stage, 'FAILED', '0.0', 'not run: the %d s budget is spent' % self.cfg.deadline_s)

    def have_gpu(self):
        return self.gpu_count > 0 or (self.cudart_rc == 35 and self.gpu_smi != '') or self.cfg.assume_gpu

    def tests(self):
        return replay.load(self.tests_json)

    def select(self, suite, kind, path_contains=''):
        try:
            return replay.select(self.tests(), suite, kind, path_contains)
        except replay.ReplayError:
            return []

    # ---- probe: nvidia-smi, a device query through cudart, the stage's loader ----

    def probe(self):
        t0, t = time.time(), self.stage_timeout('probe')
        with open(self.log('probe.log'), 'w') as log:
            self.probe_machine(log)
            self.gpu_smi = self.probe_smi(log, t)
            found = self.probe_cudart(log, t)
            self.staged_ok = self.probe_loader(log)
        dev, mem, drv = found.get('device0', ''), found.get('memory0', ''), found.get('driver', '')
        if self.gpu_count > 0:
            smi_driver = ''
            if self.gpu_smi:
                field = self.gpu_smi.split(',')[1] if ',' in self.gpu_smi else self.gpu_smi
                smi_driver = ' '.join(field.split()) + ' '
            self.row('probe', 'ok', secs(t0), '%s, %s; driver %s(CUDA %s)' % (dev, mem or '?', smi_driver, drv or '?'))
        elif self.cudart_rc == 35 and self.gpu_smi:
            self.row('probe', 'ok', secs(t0), '%s; the driver (CUDA %s) is older than the staged cudart: source build'
                     % (self.gpu_smi, drv))
        else:
            self.row('probe', 'FAILED', secs(t0), 'no usable GPU: %s%s' % (
                found.get('error', ''), '; nvidia-smi: ' + self.gpu_smi if self.gpu_smi else ''))

    def probe_machine(self, log):
        """The machine and its tools, for the log."""
        cuda_sanitizer = os.path.join(self.cfg.cuda_root, 'bin/compute-sanitizer')
        sanitizer = proc.which('compute-sanitizer') or (
            cuda_sanitizer if os.path.exists(cuda_sanitizer) else 'none on the machine')
        memory = ''.join(line.split()[1] + ' GiB memory' for line in proc.output(['free', '-g']).split('\n')
                         if 'Mem:' in line and len(line.split()) > 1)
        nvcc = proc.which('nvcc')
        log.write('# %s %s\n' % (proc.output(['date', '-u']), proc.output(['uname', '-a'])))
        log.write('# %s; %s cores; %s\n' % (
            proc.first_line(proc.output(['ldd', '--version'], stderr=subprocess.STDOUT)), proc.output(['nproc']),
            memory))
        log.write('# nvcc: %s %s\n' % (nvcc or 'none', proc.version_line(nvcc) if nvcc else ''))
        log.write('# python3: %s; meson: %s; ninja: %s\n' % (
            proc.output(['python3', '--version'], stderr=subprocess.STDOUT),
            proc.output(['meson', '--version']) if proc.which('meson') else 'none',
            proc.output(['ninja', '--version']) if proc.which('ninja') else 'none'))
        log.write('# compute-sanitizer: %s\n' % sanitizer)
        log.write('# %s: %s\n' % (' '.join(S.MACHINE_LIBS),
                                  self.machine_lib_path or 'not found (no hora-train --backend cuda here)'))
        try:
            with open('/proc/driver/nvidia/version') as f:
                log.write(f.read())
        except OSError:
            pass
        log.flush()

    @staticmethod
    def probe_smi(log, t):
        """nvidia-smi into the log; its query line (name, driver, memory,
        compute capability), '' without nvidia-smi."""
        smi = proc.which('nvidia-smi')
        if not smi:
            log.write('# no nvidia-smi\n')
            return ''
        proc.run_group([smi], t, stdout=log, kill_after=3)
        query = proc.run_group([smi, '--query-gpu=name,driver_version,memory.total,compute_cap',
                                '--format=csv,noheader'], t, stdout=subprocess.PIPE, stderr=log, kill_after=3)[2]
        line = proc.first_line((query or '').rstrip('\n'))
        log.write('# nvidia-smi --query-gpu: %s\n' % line)
        log.flush()
        return line

    def probe_cudart(self, log, t):
        """The device query (cudart_query.py) through the cudart the programs
        will use: the staged one, else the toolkit's. Sets cudart_rc and
        gpu_count; returns the query's key=value pairs."""
        lib = os.path.join(self.stage, 'lib', 'libcudart.so.13')
        if not os.path.isfile(lib):
            lib64 = os.path.join(self.cfg.cuda_root, 'lib64')
            libs = sorted(f for f in os.listdir(lib64) if f.startswith('libcudart.so')) if os.path.isdir(lib64) else []
            lib = os.path.join(lib64, libs[0]) if libs else 'libcudart.so'
        q = proc.run_group([sys.executable, os.path.join(HERE, 'cudart_query.py'), lib], t, stdout=subprocess.PIPE,
                           kill_after=3)[2] or ''
        q = q.rstrip('\n')
        log.write('# cudart device query (%s)\n%s\n' % (lib, q))
        found = {}
        for line in q.split('\n'):
            key, eq, value = line.partition('=')
            if eq and key not in found:
                found[key] = value
        self.cudart_rc = int(found['count_rc']) if re.fullmatch(r'[0-9]+', found.get('count_rc', '')) else -1
        try:
            self.gpu_count = int(found.get('count') or 0)
        except ValueError:
            self.gpu_count = 0
        return found

    def probe_loader(self, log):
        """Do the staged programs start here (check_loader, its lines in
        logs/probe-loader.log)? False without a staged build."""
        if not os.path.isdir(os.path.join(self.stage, 'build')):
            return False
        stage = os.path.realpath(self.stage)
        old = os.environ.get('LD_LIBRARY_PATH')
        env = dict(os.environ, LD_LIBRARY_PATH='%s/lib:%s/lib%s' % (stage, self.mpi_root, ':' + old if old else ''))
        ok, lines = loader.check_loader(os.path.join(stage, 'build'), env)
        with open(self.log('probe-loader.log'), 'w') as f:
            f.write(''.join(line + '\n' for line in lines))
        if not ok:
            log.write(''.join([line + '\n' for line in lines if line.startswith('MISSING')][:5]))
        return ok

    # ---- build: the staged build, or the source built here ----------------------

    def build(self):
        """The staged build where its programs start and the driver runs its
        cudart; else the source built here. Returns False without a build."""
        t0 = time.time()
        if not self.force_source and self.staged_ok and (self.cudart_rc != 35 or not self.gpu_smi):
            self.use_stage(t0)
            return True
        if self.force_source:
            why = '--source'
        elif not os.path.isdir(os.path.join(self.stage, 'build')):
            why = 'no staged build'
        elif not self.staged_ok:
            why = 'staged programs do not start (%s)' % self.loader_complaint()
        else:
            why = 'driver older than the staged cudart'
        self.mode = 'source'
        return self.build_source(t0, why)

    def use_stage(self, t0):
        self.mode = 'staged'
        stage = os.path.realpath(self.stage)
        self.build_root = os.path.join(stage, 'build')
        self.tests_json = os.path.join(self.stage, 'tests.json')
        path_prepend('LD_LIBRARY_PATH', '%s/lib:%s/lib' % (stage, self.mpi_root))
        manifest = read_manifest(self.stage)
        self.row('build', 'ok', secs(t0), 'staged: %s, built %s' % (manifest.get('commit', '')[:12],
                                                                   manifest.get('date', '')))

    def build_source(self, t0, why):
        """meson setup + ninja of LOCAL_BUILD with the machine's nvcc, the
        staged Open MPI's mpicc, cuDNN and cuBLASLt; its tests.json."""
        nvcc = find_nvcc(self.cfg.cuda_root)
        if not nvcc or not proc.which('meson') or not proc.which('ninja'):
            self.row('build', 'FAILED', secs(t0), '%s, and no nvcc/meson/ninja to build the source' % why)
            return False
        if self.mpi_root:
            path_prepend('PATH', self.mpi_root + '/bin')   # meson finds MPI through mpicc
        self.machine_libs_for_compiler()
        local = self.cfg.local_build
        t = self.stage_timeout('build')
        start = int(time.time())
        log_path = self.log('build.log')
        with open(log_path, 'w') as log:
            log.write('# %s: building the source with %s (%s), mpicc %s\n'
                      % (why, nvcc, proc.version_line('nvcc'), proc.which('mpicc')))
            log.flush()
            reconfigure = ['--reconfigure'] if os.path.isfile(os.path.join(local, 'build.ninja')) else []
            rc = proc.run_group(['meson', 'setup'] + reconfigure + [local] + S.MESON_OPTS, t, stdout=log)[0]
            if rc == 0:
                rc = proc.run_group(['ninja', '-C', local], t - (int(time.time()) - start), stdout=log)[0]
        rc = proc.shell_status(rc)
        if rc != 0:
            proc.tail(log_path, 15, prefix='   ')
            self.row('build', 'FAILED', secs(t0), '%s; the source build failed (exit %d, logs/build.log)' % (why, rc))
            return False
        self.build_root = os.path.realpath(local)
        self.tests_json = os.path.join(self.out, 'tests-local.json')
        try:
            replay.write_tests_json(local, self.tests_json, self.top)
        except replay.ReplayError as e:
            print(e, file=sys.stderr)
        if self.mpi_root:
            path_prepend('LD_LIBRARY_PATH', self.mpi_root + '/lib')
        self.row('build', 'ok', secs(t0), 'source build (%s), nvcc %s'
                 % (why, '\n'.join(re.findall(r'V[0-9.]*', proc.version_line('nvcc')))))
        return True

    def machine_libs_for_compiler(self):
        """cuDNN and cuBLASLt where the machine has them: trainer/backends/cuda looks in
        a toolkit's lib64, then on the compiler's search path (LIBRARY_PATH,
        CPATH). The wheels have no libcudnn.so link for -lcudnn (made here, in
        LOCAL_BUILD-links) and keep their headers in ../include."""
        links = os.path.join(self.top, self.cfg.local_build + '-links')
        os.makedirs(links, exist_ok=True)
        cpath = os.environ.get('CPATH', '')
        for d in [d for d in self.machine_lib_path.split(':') if d]:
            for lib in S.MACHINE_LIBS:
                if os.path.exists(os.path.join(d, lib)):
                    link = os.path.join(links, lib.split('.so')[0] + '.so')
                    if os.path.lexists(link):
                        os.remove(link)
                    os.symlink(os.path.join(d, lib), link)
            if os.path.isdir(os.path.join(d, '..', 'include')):
                cpath = (cpath + ':' if cpath else '') + os.path.realpath(os.path.join(d, '..', 'include'))
        if cpath:
            os.environ['CPATH'] = cpath
        path_prepend('LIBRARY_PATH', links)

    def loader_complaint(self):
        try:
            with open(self.log('probe-loader.log'), errors='replace') as f:
                m = re.search(r'not found.*', f.read())
        except OSError:
            m = None
        return m.group(0)[:60] if m else ''

    # ---- the stages that replay the build's tests ---------------------------------

    def tests_stage(self, stage, names, wrap=()):
        t0 = time.time()
        if not names:
            self.row(stage, 'none', '0.0', "no such tests in the build's suite gpu")
            return
        t = self.stage_timeout(stage)
        if t < 3:
            self.not_run(stage)
            return
        with open(self.log(stage + '.log'), 'w') as log:
            def emit(line):
                log.write(line + '\n')
                log.flush()
                if line.startswith(('FAIL', 'SKIP')):
                    print('   ' + line, flush=True)
            try:
                passed, failed, skipped = replay.run_tests(
                    self.tests(), names, self.build_root, self.top, self.mpirun, self.log(stage),
                    int(time.time()) + t, wrap=wrap, emit=emit)
                summary = '%d passed, %d failed, %d skipped' % (passed, failed, skipped)
            except replay.ReplayError as e:
                emit(str(e))
                passed, failed, skipped, summary = 0, 1, 0, str(e)
        res = 'ok'
        if failed:
            res = 'FAILED'
        elif passed == 0:
            res, summary = 'FAILED', summary + ' (all skipped although a GPU was found)'
        elif stage != 'mpi' and skipped:
            # With a GPU nothing in suite gpu may skip (the no-GPU checks hide
            # it themselves and pass).
            res, summary = 'FAILED', summary + ' (skipped although a GPU was found)'
        self.row(stage, res, secs(t0), summary)

    def mpi(self):
        self.tests_stage('mpi', [S.MPI_CHECK_TEST])

    def gpu(self):
        self.tests_stage('gpu', self.select('gpu', 'single'))

    def ipc(self):
        # (Not the meson test of test_torch_cuda.py: it runs the preparing
        # machine's .venv python; the torch stage runs the file itself.)
        self.tests_stage('ipc', [n for n in self.select('gpu', 'mpi') if n != S.TORCH_MESON_TEST])

    def memcheck(self):
        """compute-sanitizer on gpu kernels: the toolkit's where the source
        was built here, else the staged one."""
        san = loader.stage_sanitizer(os.path.realpath(self.stage))
        if self.mode == 'source' or not san:
            machine = os.path.join(self.cfg.cuda_root, 'bin/compute-sanitizer')
            san = proc.which('compute-sanitizer') or (machine if os.path.exists(machine) else san)
        if not san:
            self.row('memcheck', 'skipped', '0.0', 'no compute-sanitizer (machine or stage)')
            return
        names = self.select('gpu', 'single', '/tests/kernels/cuda/test_gpu_kernels') or self.select('gpu', 'single')
        self.tests_stage('memcheck', names,
                         wrap=[san, '--tool', 'memcheck', '--error-exitcode', '99', '--print-limit', '20'])

    # ---- torch: hora.torch's CUDA test, Horovod's GPU tests against hora.torch ----

    def libhora(self):
        """The build's libhora (the stage has no libhora.so link), or ''."""
        for name in ('libhora.so', 'libhora.so.0'):
            path = os.path.join(self.build_root, 'runtime', name)
            if os.path.exists(path):
                return path
        return ''

    def torch_env(self, libhora):
        """python3 with the tree's hora package, the build's libhora, CUDA
        required; of LD_LIBRARY_PATH what libhora needs (the staged cudart,
        Open MPI), not the machine's cuDNN and cuBLASLt (torch has its own)."""
        machine = [d for d in self.machine_lib_path.split(':') if d]
        lib_path = [d for d in os.environ.get('LD_LIBRARY_PATH', '').split(':') if d and d not in machine]
        old = os.environ.get('PYTHONPATH')
        env = dict(os.environ, PYTHONPATH=os.path.join(self.top, 'runtime/python') + (':' + old if old else ''),
                   HORA_LIBRARY=libhora, HORA_CUDA='1', HORA_TIMEOUT_S=os.environ.get('HORA_TIMEOUT_S') or '60',
                   OMPI_MCA_btl=os.environ.get('OMPI_MCA_btl') or 'self,vader,tcp', LD_LIBRARY_PATH=':'.join(lib_path))
        if not lib_path:
            del env['LD_LIBRARY_PATH']
        return env

    def torch(self):
        """test_torch_cuda.py at np 2, then Horovod's test_torch.py (its GPU
        tests) through tools/horovod-test-torch; both into logs/torch.log, a
        row per Horovod test family under the stage's."""
        t0, t = time.time(), self.stage_timeout('torch')
        if t < 3:
            self.not_run('torch')
            return
        end = int(time.time()) + t
        log_path = self.log('torch.log')
        with open(log_path, 'w') as log:
            has_torch = self.cuda_torch(log, self.part_timeout('check', end, S.TORCH_TIMEOUT))
        if not has_torch:
            self.row('torch', 'skipped', secs(t0), 'no torch with CUDA on this machine (logs/torch.log)')
            return
        libhora = self.libhora()
        if not libhora:
            self.row('torch', 'FAILED', secs(t0), 'no runtime/libhora.so in the %s build' % self.mode)
            return
        env = self.torch_env(libhora)
        ok, test_fig = self.torch_test(log_path, env, self.part_timeout('test', end, S.TORCH_TIMEOUT))
        horovod_ok, horovod_fig, rows = self.torch_horovod(log_path, libhora, env,
                                                           self.part_timeout('horovod', end, S.TORCH_TIMEOUT))
        self.row('torch', 'ok' if ok and horovod_ok else 'FAILED', secs(t0), '%s; %s' % (test_fig, horovod_fig))
        for name, counts in rows:
            self.row('torch/' + name, 'FAILED' if counts['failed'] or counts['no outcome'] else 'ok', '-',
                     horovod.counts_text(counts), counted=False)

    def torch_test(self, log_path, env, timeout):
        """test_torch_cuda.py under mpirun: (passed, figure) from rank 0's
        summary line."""
        with open(log_path, 'a') as log:
            log.write('\n# 1. %s, np %d\n' % (S.TORCH_TEST, S.TORCH_NP))
        test = os.path.join(self.top, S.TORCH_TEST)
        rc = proc.run_logged(log_path, timeout, [self.mpirun] + S.MPIRUN_ARGS + [
            '--bind-to', 'none', '-np', str(S.TORCH_NP), 'python3', test], env, cwd=os.path.dirname(test))
        with open(log_path, errors='replace') as f:
            text = f.read().split('# 1. ', 1)[-1]
        said = re.findall(r'^test_torch_cuda\.py: [0-9]+ failure\(s\) over [0-9]+ ranks, [0-9]+ cases$', text, re.M)
        device = re.findall(r'^rank 0: libhora device (-?[0-9]+)', text, re.M)
        fig = said[-1] if said else 'test_torch_cuda.py: no summary'
        if device:
            fig += ' (libhora device %s)' % device[-1]
        if rc == 0 and said:
            return True, fig
        if rc == 77:
            return False, 'test_torch_cuda.py: skipped although torch sees a GPU'
        return False, '%s: %s' % (fig, 'timeout %d s' % timeout if rc == proc.TIMED_OUT else 'exit %d' % rc)

    def torch_horovod(self, log_path, libhora, env, timeout):
        """tools/horovod-test-torch --gpu-only at np 2 on the staged Horovod
        files: (passed, figure, [(family, counts)]). Files not staged: passed
        (nothing ran), the figure says why."""
        src = os.path.join(self.stage, 'horovod')
        if not os.path.isfile(os.path.join(src, S.HOROVOD_FILES[0])):
            why = read_manifest(self.stage).get('horovod', '') or 'not staged (no %s)' % src
            return True, "Horovod's test_torch.py absent: %s" % why, []
        if timeout < 3:
            return False, 'Horovod test_torch.py: not run, the stage ran out of time', []
        # The file imports numpy, which torch does not need: without it, say so.
        rc, _, said = proc.run_group(['python3', '-c', 'import numpy'], min(timeout, 15), stdout=subprocess.PIPE,
                                     env=env, kill_after=3)
        if rc != 0:
            with open(log_path, 'a') as log:
                log.write('\n# 2. python3 -c "import numpy": exit %d\n%s\n' % (rc, (said or '').rstrip('\n')))
            return True, "Horovod's test_torch.py not run: python3 has no numpy (the file imports it)", []
        out_json = os.path.join(self.out, 'torch-horovod.json')
        if os.path.exists(out_json):
            os.remove(out_json)
        with open(log_path, 'a') as log:
            log.write("\n# 2. Horovod %s's test_torch.py (its GPU tests) against hora.torch, np %d\n"
                      % (S.HOROVOD_TAG, S.TORCH_NP))
        # The tool's own job limit comes first, leaving it time to end the job
        # and say which tests finished (a SIGTERM from run_group ends its job too).
        job_s = max(timeout - 15, timeout // 2)
        rc = proc.run_logged(log_path, timeout, [
            os.path.join(self.top, 'tools/horovod-test-torch'), '--horovod-src', src, '-np', str(S.TORCH_NP),
            '--python', 'python3', '--library', libhora, '--gpu-only', '--timeout', str(job_s),
            '--mpirun-arg=--bind-to', '--mpirun-arg=none', '--log-dir', self.log('torch-horovod'),
            '--json', out_json], env)
        try:
            with open(out_json) as f:
                doc = json.load(f)
            rows, total = horovod.families(doc)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return False, 'Horovod test_torch.py: %s' % ('timeout %d s' % timeout if rc == proc.TIMED_OUT else
                                                         self.train_why(rc, log_path, 'horovod-test-torch:')), []
        fig = 'Horovod test_torch.py np %d, %d GPU tests of %d: %s' % (
            S.TORCH_NP, len(doc.get('selected', [])), doc.get('in_file', 0), horovod.counts_text(total))
        problems = [p for job in doc.get('jobs', []) for p in job.get('problems', [])]
        if problems:
            fig += ' (%s)' % '; '.join(problems)
        return rc == 0 and not total['failed'] and not total['no outcome'], fig, rows

    # ---- bench2, bench4: hora-bench-allreduce on device memory --------------------

    def bench(self, stage, np):
        t0, t = time.time(), self.stage_timeout(stage)
        if t < 3:
            self.not_run(stage)
            return
        json_path = os.path.join(self.out, stage + '.json')
        if os.path.exists(json_path):
            os.remove(json_path)
        env = dict(os.environ, HORA_TIMEOUT_S=os.environ.get('HORA_TIMEOUT_S') or '60',
                   OMPI_MCA_btl=os.environ.get('OMPI_MCA_btl') or 'self,vader,tcp')
        rc = proc.run_logged(self.log(stage + '.log'), t, [self.mpirun] + S.MPIRUN_ARGS + [
            '-np', str(np), os.path.join(self.build_root, 'bench/hora-bench-allreduce')] + S.BENCH_ARGS + [
            '--json', json_path], env)
        fig = figures.bench_figure(json_path, self.log(stage + '.log'))
        if rc == 0:
            self.row(stage, 'ok', secs(t0), 'np %d: %s' % (np, fig))
        elif rc == proc.TIMED_OUT:
            self.row(stage, 'FAILED', secs(t0), 'np %d: timeout %d s; %s' % (np, t, fig))
        else:
            self.row(stage, 'FAILED', secs(t0), 'np %d: exit %d; %s' % (np, rc, fig))

    def bench2(self):
        self.bench('bench2', 2)

    def bench4(self):
        self.bench('bench4', 4)

    # ---- train: hora-train against the PyTorch peer, 2 ranks, a profile -----------

    def train_hora(self, name, np, steps, timeout, flags):
        """hora-train on np ranks sharing the GPU: its output in
        logs/train-NAME.log, its JSON log in logs/train-NAME.jsonl."""
        jsonl = self.log('train-%s.jsonl' % name)
        if os.path.exists(jsonl):
            os.remove(jsonl)
        env = dict(os.environ, HORA_CUDA='1', HORA_TIMEOUT_S=os.environ.get('HORA_TIMEOUT_S') or '30',
                   OMPI_MCA_btl=os.environ.get('OMPI_MCA_btl') or 'self,vader,tcp')
        return proc.run_logged(self.log('train-%s.log' % name), timeout, [self.mpirun] + S.MPIRUN_ARGS + [
            '--bind-to', 'none', '-np', str(np), os.path.join(self.build_root, 'trainer/hora-train')] + S.TRAIN_ARGS + [
            '--steps-per-epoch', str(steps), '--print-every', str(S.TRAIN_PRINT_EVERY), '--log', jsonl] + flags, env)

    @staticmethod
    def part_timeout(part, end, table=S.TRAIN_TIMEOUT):
        """Seconds for one part of a stage (the train stage's by default):
        its own, at most what is left of the stage."""
        return min(table[part], end - int(time.time()))

    def cuda_torch(self, log, timeout):
        """Has python3 torch with CUDA (TORCH_CHECK, run without the stage's
        LD_LIBRARY_PATH: torch brings its own CUDA libraries)? Asked once;
        what it said goes into log each time."""
        if self.torch_check is None:
            rc, _, said = proc.run_group(['python3', '-c', TORCH_CHECK], timeout, stdout=subprocess.PIPE,
                                         env=without(os.environ, 'LD_LIBRARY_PATH'), kill_after=3)
            self.torch_check = rc == 0, (said or '').rstrip('\n')
        log.write('# python3 -c TORCH_CHECK (torch with CUDA?)\n%s\n' % self.torch_check[1])
        log.flush()
        return self.torch_check[0]

    @staticmethod
    def train_why(rc, log_path, marker='hora-train:'):
        """Why a part failed: the timeout, or the exit status and the log's last
        line saying marker or "error"."""
        if rc == proc.TIMED_OUT:
            return 'timeout'
        last = ''
        try:
            with open(log_path, errors='replace') as f:
                said = [line.rstrip('\n') for line in f if marker in line or 'error' in line]
            last = said[-1][:120] if said else ''
        except OSError:
            pass
        return 'exit %d%s' % (rc, ': ' + last if last else '')

    def train(self):
        t0, t = time.time(), self.stage_timeout('train')
        if t < 3:
            self.not_run('train')
            return
        exe = os.path.join(self.build_root, 'trainer/hora-train')
        if not os.access(exe, os.X_OK):
            self.row('train', 'FAILED', '0.0', 'no trainer/hora-train in the %s build (its cuda backend needs cuDNN '
                     'and cuBLASLt: %s)' % (self.mode, self.machine_lib_path or 'none found'))
            return
        end = int(time.time()) + t
        res, figs, hora_ips = 'ok', [], ''
        # 1. hora-train: one process, then 2 ranks sharing the GPU (cudaipc).
        for r in S.TRAIN_RUNS:
            rc = self.train_hora(r.name, r.ranks, r.warmup + r.timed, self.part_timeout(r.name, end),
                                 ['--batch', str(r.batch)])
            ips = figures.train_figure(self.log('train-%s.jsonl' % r.name), r.warmup, r.ranks * r.batch)
            if rc == 0 and ips:
                if r.name == 'hora':
                    hora_ips = ips
                    figs.append('hora %s img/s (batch %d)' % (ips, r.batch))
                else:
                    figs.append('np %d cudaipc %s img/s (batch %d each)' % (r.ranks, ips, r.batch))
            else:
                res = 'FAILED'
                figs.append('%s (np %d): %s' % (r.name, r.ranks, self.train_why(rc, self.log('train-%s.log' % r.name))))
        # 2. the PyTorch peer, where python3 has torch with CUDA (without the
        #    stage's LD_LIBRARY_PATH: torch brings its own CUDA libraries).
        plog, pjson = self.log('train-peer.log'), self.log('train-peer.json')
        if os.path.exists(pjson):
            os.remove(pjson)
        env = without(os.environ, 'LD_LIBRARY_PATH')
        with open(plog, 'w') as log:
            has_torch = self.cuda_torch(log, self.part_timeout('peer', end))
        if not has_torch:
            figs.append('peer: no torch with CUDA on this machine')
        else:
            rc = proc.run_logged(plog, self.part_timeout('peer', end), ['python3', os.path.join(
                self.top, 'bench/peers/torch_train.py')] + S.PEER_ARGS + ['--json', pjson], env)
            try:
                with open(pjson) as f:
                    peer = '%.0f' % json.load(f)['img_per_s']
            except (OSError, ValueError, KeyError, TypeError):
                peer = ''
            if rc == 0 and peer:
                figs.append('peer torch %s img/s%s' % (peer, ', hora/peer %.2f' % (float(hora_ips) / float(peer))
                                                        if hora_ips else ''))
            else:
                res = 'FAILED'
                figs.append('peer: %s' % self.train_why(rc, plog))
        # 3. a short --profile run: the per-unit table.
        prof = os.path.join(self.out, 'train-profile.txt')
        if os.path.exists(prof):
            os.remove(prof)
        first = S.TRAIN_RUNS[0]
        rc = self.train_hora('profile', 1, S.TRAIN_PROFILE_STEPS, self.part_timeout('profile', end),
                             ['--batch', str(first.batch), '--profile'])
        with open(self.log('train-profile.log'), errors='replace') as f:
            lines = f.read().splitlines()
        start = next((i for i, line in enumerate(lines) if line.startswith('profile:')), None)
        if rc == 0 and start is not None:
            with open(prof, 'w') as f:
                f.write(''.join(line + '\n' for line in lines[start:] if not line.startswith('# exit')))
            figs.append('profile in train-profile.txt')
        else:
            res = 'FAILED'
            figs.append('profile: %s' % self.train_why(rc, self.log('train-profile.log')))
        self.row('train', res, secs(t0), 'resnet50 fp16: %s' % '; '.join(figs))

    def build_stage(self):
        """The build stage: build(); a source build's minutes do not come out
        of the later stages' budget."""
        b0 = int(time.time())
        self.build()
        if self.mode == 'source':
            self.deadline += int(time.time()) - b0

    def table(self, t0_all):
        """The table (markdown), with the summary line and the profile's;
        and how many stages failed."""
        lines = ['| stage | result | seconds | key figure |', '|---|---|---|---|']
        count = {'ok': 0, 'FAILED': 0}
        skipped = 0
        for stage, res, seconds, key, counted in self.rows:
            lines.append('| %s | %s | %s | %s |' % (stage, res, seconds, key.replace('|', '\\|')))
            if not counted:
                continue
            if res in count:
                count[res] += 1
            else:
                skipped += 1
        text = '\n'.join(lines)
        text += '\n\ndevice-check: %d passed, %d failed, %d skipped (%s s; mode %s; logs in %s/logs)' % (
            count['ok'], count['FAILED'], skipped, secs(t0_all), self.mode or 'none', self.out)
        prof = os.path.join(self.out, 'train-profile.txt')
        if os.path.exists(prof) and os.path.getsize(prof) > 0:
            text += '\n\nwhere the time goes (train-profile.txt): %s' % figures.profile_note(prof)
        return text, count['FAILED']


# --run's steps in order: (stage, step, needs a GPU). Without a GPU (the
# probe's, or DC_ASSUME_GPU) those that need one say skipped; without a
# build every stage after it fails.
STEPS = [
    ('probe', Run.probe, False),
    ('build', Run.build_stage, False),
    ('mpi', Run.mpi, False),
    ('gpu', Run.gpu, True),
    ('ipc', Run.ipc, True),
    ('torch', Run.torch, True),
    ('bench2', Run.bench2, True),
    ('bench4', Run.bench4, True),
    ('train', Run.train, True),
    ('memcheck', Run.memcheck, True),
]
STAGES = [name for name, _, _ in STEPS]


def read_manifest(stage):
    """STAGE/manifest.txt's lines as {first word: the rest} (the first of
    each), {} without one."""
    manifest = {}
    try:
        with open(os.path.join(stage, 'manifest.txt')) as f:
            for line in f:
                key, _, value = line.rstrip('\n').partition(' ')
                manifest.setdefault(key, value.lstrip(' '))
    except OSError:
        pass
    return manifest


def setup_environment(r):
    """$OUT, Open MPI's settings for root on one host, the staged mpirun, the
    toolkit's bin/ and the machine's cuDNN and cuBLASLt (after everything
    else: the staged cudart comes first)."""
    r.out = os.environ.get('OUT') or '/tmp/device-check-out'
    os.makedirs(os.path.join(r.out, 'logs'), exist_ok=True)
    r.out = os.path.realpath(r.out)
    os.environ['HOME'] = os.environ.get('HOME') or r.out
    os.environ['TMPDIR'] = os.environ.get('TMPDIR') or '/tmp'
    os.environ['OMPI_ALLOW_RUN_AS_ROOT'] = os.environ['OMPI_ALLOW_RUN_AS_ROOT_CONFIRM'] = '1'
    os.environ['OMPI_MCA_pml'] = os.environ.get('OMPI_MCA_pml') or 'ob1'   # no UCX probing: shm/tcp on one host
    stage = r.stage
    if not os.path.isfile(os.path.join(stage, 'manifest.txt')):
        note('no %s/manifest.txt (carry=["%s"]?): building the source' % (stage, stage))
    if os.path.isdir(os.path.join(stage, 'wheels')):
        loader.unpack_stage(stage)
        r.mpi_root = loader.stage_mpi_root(os.path.realpath(stage))
    if r.mpi_root:
        r.mpirun = os.path.join(r.mpi_root, 'bin/mpirun')
        path_prepend('PATH', r.mpi_root + '/bin')
    else:
        r.mpirun = proc.which('mpirun')
    if os.path.isdir(os.path.join(r.cfg.cuda_root, 'bin')):
        os.environ['PATH'] = os.environ.get('PATH', '') + ':' + os.path.join(r.cfg.cuda_root, 'bin')
    r.machine_lib_path = loader.machine_lib_dirs(S.MACHINE_LIBS, r.cfg.cuda_root)
    if r.machine_lib_path:
        old = os.environ.get('LD_LIBRARY_PATH')
        os.environ['LD_LIBRARY_PATH'] = (old + ':' if old else '') + r.machine_lib_path


def run(top, cfg, only, force_source):
    """Runs --run's steps (all, or only one); prints the table and writes it
    to $OUT/table.md; returns the exit status (1 when a stage failed)."""
    r = Run(top, cfg, force_source)
    t0_all = time.time()
    setup_environment(r)
    r.deadline = int(time.time()) + cfg.deadline_s
    # The probe and the build choice come first even for --only (quietly).
    if only and only != 'probe':
        with open(os.devnull, 'w') as quiet, contextlib.redirect_stdout(quiet):
            r.probe()
            if only != 'build':
                r.build()
        r.rows = []
    for name, step, needs_gpu in STEPS:
        if only and name != only:
            continue
        if name in ('probe', 'build'):
            step(r)
        elif needs_gpu and not r.have_gpu():
            r.row(name, 'skipped', '0.0', 'no GPU')
        elif not r.tests_json:
            r.row(name, 'FAILED', '0.0', 'no build')
        else:
            step(r)
    text, failed = r.table(t0_all)
    with open(os.path.join(r.out, 'table.md'), 'w') as f:
        f.write(text + '\n')
    print()
    print(text)
    return 1 if failed else 0
