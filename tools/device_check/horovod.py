"""Horovod's test_torch.py in the torch stage: --prepare stages its two files
from a local git mirror of Horovod (the lent machine has no network, and
Horovod's code stays out of the repository: device-stage/ is ignored);
--run sums tools/horovod-test-torch's outcome up by test family."""
import os
import shutil
import subprocess

from . import settings as S

OTHER = 'optimizer/other'


def git_dir(mirror):
    """The git repository at mirror (or mirror/repo, where the mirror keeps
    it), or ''."""
    for d in (mirror, os.path.join(mirror, 'repo')):
        if os.path.isdir(d) and subprocess.call(['git', '--git-dir', d, 'rev-parse', '--git-dir'],
                                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0:
            return d
    return ''


def git(repo, *args):
    """(status, stdout bytes) of git --git-dir=repo ARGS."""
    r = subprocess.run(['git', '--git-dir', repo] + list(args), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return r.returncode, r.stdout


def stage(mirror, dest):
    """HOROVOD_FILES at HOROVOD_TAG from the mirror into dest, in Horovod's
    layout (dest/test/parallel/, dest/test/utils/: what horovod-test-torch
    finds). Returns (staged, the manifest's line: what, or why not)."""
    shutil.rmtree(dest, ignore_errors=True)
    repo = git_dir(mirror)
    if not repo:
        return False, 'not staged: no git repository at %s (DC_HOROVOD_MIRROR)' % mirror
    rc, commit = git(repo, 'rev-parse', '--verify', '-q', S.HOROVOD_TAG + '^{commit}')
    if rc != 0:
        return False, 'not staged: no tag %s in %s' % (S.HOROVOD_TAG, repo)
    for rel in S.HOROVOD_FILES:
        rc, text = git(repo, 'show', '%s:%s' % (S.HOROVOD_TAG, rel))
        if rc != 0:
            shutil.rmtree(dest, ignore_errors=True)
            return False, 'not staged: no %s at %s in %s' % (rel, S.HOROVOD_TAG, repo)
        path = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'wb') as f:
            f.write(text)
    return True, '%s (%s) from %s: %s' % (S.HOROVOD_TAG, commit.decode().strip()[:12], repo,
                                         ' '.join(S.HOROVOD_FILES))


def family(name):
    for f in S.HOROVOD_FAMILIES:
        if f in name:
            return f
    return OTHER


def outcomes(doc):
    """{test: 'passed' | 'failed' | 'skipped' | 'no outcome'} for the tests
    horovod-test-torch's --json says it selected, from its main jobs (a
    known failure's own job aside)."""
    found = {}
    for job in doc.get('jobs', []):
        if job.get('known'):
            continue
        for name in job.get('passed_tests', []):
            found.setdefault(name, 'passed')
        for name in job.get('skipped_tests', {}):
            found.setdefault(name, 'skipped')
        for name in job.get('failed', []):
            found[name] = 'failed'
    return {name: found.get(name, 'no outcome') for name in doc.get('selected', [])}


def counts_text(counts):
    text = '%d passed, %d failed, %d skipped' % (counts['passed'], counts['failed'], counts['skipped'])
    return text + (', %d without an outcome' % counts['no outcome'] if counts['no outcome'] else '')


def families(doc):
    """[(family, counts)] in HOROVOD_FAMILIES' order, optimizer/other last,
    families without a selected test left out; and the counts of all."""
    rows = {f: {'passed': 0, 'failed': 0, 'skipped': 0, 'no outcome': 0} for f in S.HOROVOD_FAMILIES + [OTHER]}
    total = {'passed': 0, 'failed': 0, 'skipped': 0, 'no outcome': 0}
    for name, outcome in outcomes(doc).items():
        rows[family(name)][outcome] += 1
        total[outcome] += 1
    return [(f, c) for f, c in rows.items() if sum(c.values())], total
