"""Stand-in for the `filelock` package where python3 lacks it (Horovod's
examples/elastic/pytorch/pytorch_mnist_elastic.py takes `FileLock` from it to
guard its dataset download): FileLock(path) as a context manager holding an
exclusive flock on path, as the package does on Linux."""
import fcntl
import os


class FileLock:
    def __init__(self, lock_file, timeout=-1):
        self.lock_file = lock_file
        self._fd = None

    def acquire(self):
        if self._fd is None:
            fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._fd = fd
        return self

    def release(self):
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
        return False
