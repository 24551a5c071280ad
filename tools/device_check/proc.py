"""Running commands for tools/device-check: a time limit that ends the whole
process group, and the small captures the steps need."""
import os
import shutil
import signal
import subprocess
import time

# A command's status when its time limit ended it, as coreutils' timeout says.
TIMED_OUT = 124


def run_group(cmd, timeout, stdout=None, stderr=subprocess.STDOUT, env=None, cwd=None, kill_after=5):
    """Runs cmd in a session of its own; past timeout seconds (at least 1)
    TERM, then KILL kill_after seconds later, to the whole group; whatever
    is left in the group (mpirun's ranks) goes too when it ends.

    Returns (status, seconds, output): status TIMED_OUT on timeout, 127 when
    cmd cannot start, else Popen's (negative: killed by that signal); output
    what it wrote to stdout when stdout is subprocess.PIPE."""
    t0 = time.time()
    try:
        p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
                             start_new_session=True, universal_newlines=stdout == subprocess.PIPE,
                             errors='replace')
    except OSError as e:
        message = 'cannot run %s: %s\n' % (cmd[0], e)
        if hasattr(stdout, 'write'):
            stdout.write(message)
        return 127, time.time() - t0, message if stdout == subprocess.PIPE else None
    out = None
    try:
        out = p.communicate(timeout=max(timeout, 1))[0]
        status = p.returncode
    except subprocess.TimeoutExpired:
        status = TIMED_OUT
        for sig, grace in ((signal.SIGTERM, kill_after), (signal.SIGKILL, 5)):
            _kill_group(p.pid, sig)
            try:
                out = p.communicate(timeout=grace)[0]
                break
            except subprocess.TimeoutExpired:
                pass
    _kill_group(p.pid, signal.SIGKILL)
    return status, time.time() - t0, out


def _kill_group(pid, sig):
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def shell_status(status):
    """A status as a shell reports it: 128 + N for a death by signal N."""
    return 128 - status if status < 0 else status


def run_logged(log_path, timeout, cmd, env=None, cwd=None):
    """Runs cmd with run_group (in cwd), its output appended to log_path
    between a '# cmd' line and a '# exit' line. Returns its status as an
    exit status (0-255: a death by signal N is 256 - N)."""
    with open(log_path, 'a') as log:
        log.write('# cmd %s\n' % ' '.join(cmd))
        log.flush()
        status, secs, _ = run_group(cmd, timeout, stdout=log, env=env, cwd=cwd)
        log.write('\n# exit %d after %.1f s\n' % (status, secs))
    return status % 256


def output(cmd, stderr=subprocess.DEVNULL, env=None):
    """What cmd writes to stdout (and stderr with stderr=subprocess.STDOUT),
    trailing newlines dropped as $(...) does; '' when it cannot start."""
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=stderr, stdin=subprocess.DEVNULL, env=env,
                           universal_newlines=True, errors='replace')
    except OSError:
        return ''
    return r.stdout.rstrip('\n')


def status(cmd, env=None, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
    """cmd's exit status (127 when it cannot start)."""
    try:
        return subprocess.call(cmd, env=env, stdout=stdout, stderr=stderr)
    except OSError:
        return 127


def which(name, path=None):
    return shutil.which(name, path=path) or ''


def first_line(text):
    return text.split('\n', 1)[0] if text else ''


def version_line(nvcc):
    """The release line of nvcc --version (its second last line)."""
    lines = output([nvcc, '--version']).split('\n')
    return lines[-2] if len(lines) >= 2 else lines[0]


def tail(path, n, prefix=''):
    """Prints the last n lines of a file."""
    try:
        with open(path, errors='replace') as f:
            lines = f.read().splitlines()[-n:]
    except OSError:
        return
    for line in lines:
        print(prefix + line)
