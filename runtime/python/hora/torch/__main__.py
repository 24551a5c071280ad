"""python -m hora.torch --check-build: what the loaded libhora was built
with, laid out as `horovodrun --check-build` lays out Horovod's build (a
[X] for what is there, [ ] for what is not), with torch's version and the
place libhora was loaded from. Needs no mpirun."""
import argparse
import sys

import torch

import hora as _h


def check_build_text():
    """The --check-build report, or raises RuntimeError where the loaded
    libhora does not report its build."""
    info = _h.build_info()
    if info is None:
        raise RuntimeError("hora: the loaded libhora (%s) is older than hora_build_info and does not say what it "
                           "was built with; rebuild it" % _h.library_path)

    def mark(key):
        return "[X]" if info.get(key) == "1" else "[ ]"

    lines = [
        "hora v%s, libhora %s (%s)" % (info.get("version", "?"), _h.library_path, _h.library_source),
        "torch %s" % torch.__version__,
        "",
        "Available Frameworks:",
        "    [ ] TensorFlow",
        "    [X] PyTorch",
        "    [ ] MXNet",
        "",
        "Available Controllers:",
        "    [X] MPI",
        "    [ ] Gloo",
        "",
        "Available Tensor Operations:",
        "    [ ] NCCL",
        "    [ ] DDL",
        "    [ ] CCL",
        "    [X] MPI",
        "    [ ] Gloo",
        "",
        "Transports (libhora):",
        "    %s shm" % mark("shm"),
        "    %s UCX" % mark("ucx"),
        "    %s MPI" % mark("mpi"),
        "    %s CUDA IPC" % mark("cudaipc"),
        "",
        "Device engine (libhora):",
        "    %s CUDA" % mark("cuda"),
    ]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m hora.torch", description="hora.torch, Horovod's PyTorch API over "
                                     "libhora (run your training script under mpirun to use it).")
    parser.add_argument("--check-build", action="store_true",
                        help="print what the loaded libhora was built with, and torch's version")
    args = parser.parse_args(argv)
    if not args.check_build:
        parser.print_help()
        return 2
    try:
        sys.stdout.write(check_build_text())
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
