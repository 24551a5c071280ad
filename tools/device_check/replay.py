"""The build's meson tests, replayed without meson: `meson introspect
--tests` recorded into a tests.json where the build was made, then run where
it was carried, its paths mapped to the build and source trees found there.

Also a program, for the one replay that must run in a process of its own
(prepare's check under unshare): replay.py run-tests --list ... NAME...
"""
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time

if __package__:
    from . import proc
else:                                  # run as a script
    sys.dont_write_bytecode = True
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from device_check import proc

MPI_LAUNCHERS = ('mpirun', 'mpiexec', 'orterun', 'prterun')
KEEP = ('name', 'suite', 'cmd', 'env', 'timeout', 'workdir', 'should_fail', 'protocol', 'is_parallel')


class ReplayError(Exception):
    """A tests.json that cannot be written or read."""


def write_tests_json(build, out, source):
    """meson introspect --tests of build -> out, with the roots to rewrite."""
    r = subprocess.run(['meson', 'introspect', '--tests', build], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if r.returncode != 0:
        raise ReplayError('meson introspect --tests %s failed: %s' % (build, r.stderr.strip()))
    try:
        tests = json.loads(r.stdout)
    except ValueError as e:
        raise ReplayError('meson introspect --tests %s: %s' % (build, e)) from None
    doc = {'build_root': os.path.realpath(build), 'source_root': os.path.realpath(source),
           'tests': [{k: t.get(k) for k in KEEP} for t in tests]}
    with open(out, 'w') as f:
        json.dump(doc, f, indent=1)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise ReplayError('cannot read %s: %s' % (path, e)) from None


def suites_of(t):
    return [s.split(':', 1)[-1] for s in t.get('suite') or []]


def launches_mpi(t):
    return any(os.path.basename(a) in MPI_LAUNCHERS for a in t['cmd'])


def select(doc, suite, kind, path_contains='', exclude=()):
    """The names of the tests of suite; kind 'single' (not under mpirun),
    'mpi' (under mpirun) or 'all'; with path_contains, those with an
    argument containing it; none named in exclude."""
    names = []
    for t in doc['tests']:
        if suite not in suites_of(t) or t['name'] in exclude:
            continue
        if kind == 'single' and launches_mpi(t):
            continue
        if kind == 'mpi' and not launches_mpi(t):
            continue
        if path_contains and not any(path_contains in a for a in t['cmd']):
            continue
        names.append(t['name'])
    return names


class Mapper:
    """Rewrites the recorded build and source roots to the ones here, any
    MPI launcher to the mpirun used here, a python to this PATH's python3
    and a program that is not here to the one of its name on PATH."""

    def __init__(self, doc, build_root, source_root, mpirun, path):
        self.pairs = [(os.path.normpath(doc['build_root']), os.path.realpath(build_root)),
                      (os.path.normpath(doc['source_root']), os.path.realpath(source_root))]
        self.mpirun = mpirun
        self.build_root = os.path.realpath(build_root)
        self.search = path

    def path(self, a):
        if not a.startswith('/'):
            return a
        n = os.path.normpath(a)
        if os.path.basename(n) in MPI_LAUNCHERS and self.mpirun:
            return self.mpirun
        for old, new in self.pairs:
            if n == old or n.startswith(old + '/'):
                return new + n[len(old):]
        return a

    def cmd(self, cmd):
        out = [self.path(a) for a in cmd]
        head = os.path.basename(out[0])
        if head.startswith('python'):
            out[0] = shutil.which('python3', path=self.search) or out[0]
        elif out[0].startswith('/') and not os.path.exists(out[0]):
            out[0] = shutil.which(head, path=self.search) or out[0]
        return out

    def env(self, env):
        return {k: ':'.join(self.path(p) for p in v.split(':')) if ':' in v else self.path(v)
                for k, v in (env or {}).items()}


def safe(name):
    return re.sub(r'[^A-Za-z0-9_.=-]+', '_', name)


def run_tests(doc, names, build_root, source_root, mpirun, logs, deadline, wrap=(), env=None, emit=print):
    """Runs the tests called names, in that order, each in its own process
    group with its meson timeout (at most what is left before deadline, an
    epoch time) and a log logs/NAME.log; env is the environment they start
    from (os.environ). Calls emit with a line per test and a summary line.
    Returns (passed, failed, skipped)."""
    base = dict(os.environ if env is None else env)
    m = Mapper(doc, build_root, source_root, mpirun, base.get('PATH', os.defpath))
    tests = sorted((t for t in doc['tests'] if t['name'] in names), key=lambda t: names.index(t['name']))
    os.makedirs(logs, exist_ok=True)
    passed = failed = skipped = 0
    for t in tests:
        left = deadline - time.time()
        if left < 3:
            emit('FAIL  %-40s not run: the stage ran out of time' % t['name'])
            failed += 1
            continue
        timeout = min(t.get('timeout') or 30, left)
        cmd = list(wrap) + m.cmd(t['cmd'])
        tenv = m.env(t.get('env'))
        if 'LD_LIBRARY_PATH' in tenv and base.get('LD_LIBRARY_PATH'):
            tenv['LD_LIBRARY_PATH'] += ':' + base['LD_LIBRARY_PATH']
        run_env = dict(base, **tenv)
        run_env.setdefault('MALLOC_PERTURB_', str(random.randint(1, 255)))
        cwd = m.path(t['workdir']) if t.get('workdir') else m.build_root
        with open(os.path.join(logs, safe(t['name']) + '.log'), 'w') as log:
            log.write('# %s\n# cwd %s\n# env %s\n# cmd %s\n# timeout %.0f s\n' %
                      (t['name'], cwd, ' '.join('%s=%s' % kv for kv in sorted(tenv.items())),
                       ' '.join(cmd), timeout))
            log.flush()
            status, secs, _ = proc.run_group(cmd, timeout, stdout=log, env=run_env, cwd=cwd)
            log.write('\n# exit %d after %.1f s\n' % (status, secs))
        if status == 77:
            res = 'SKIP'
        elif (status == 0) != bool(t.get('should_fail')):
            res = 'ok'
        else:
            res = 'FAIL'
        if status == proc.TIMED_OUT:
            note = ' (timeout %.0f s)' % timeout
        else:
            note = ' (exit %d)' % status if res == 'FAIL' else ''
        emit('%-4s  %-40s %6.1f s%s' % (res, t['name'], secs, note))
        passed += res == 'ok'
        failed += res == 'FAIL'
        skipped += res == 'SKIP'
    emit('%d passed, %d failed, %d skipped' % (passed, failed, skipped))
    return passed, failed, skipped


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(prog='replay.py')
    sub = ap.add_subparsers(dest='command')
    sub.required = True
    p = sub.add_parser('run-tests')
    p.add_argument('--list', required=True)
    p.add_argument('--build-root', required=True)
    p.add_argument('--source-root', required=True)
    p.add_argument('--mpirun', default='')
    p.add_argument('--logs', required=True)
    p.add_argument('--deadline', type=float, required=True)
    p.add_argument('names', nargs='+')
    a = ap.parse_args(argv)

    def emit(line):
        print(line, flush=True)
    try:
        doc = load(a.list)
    except ReplayError as e:
        emit(str(e))
        return 1
    failed = run_tests(doc, a.names, a.build_root, a.source_root, a.mpirun, a.logs, a.deadline, emit=emit)[1]
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
