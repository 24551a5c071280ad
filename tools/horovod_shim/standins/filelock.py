"""Stand-in for the `filelock` package where python3 lacks it (Horovod's
examples/elastic/pytorch/pytorch_mnist_elastic.py takes `FileLock` from it to
guard its dataset download): FileLock(path, timeout) as a context manager
holding an exclusive flock on path, as the package does on Linux; a timeout
of 0 or more gives up after that many seconds (Timeout), -1 waits for good."""
import fcntl
import os
import time


class Timeout(TimeoutError):
    pass


class FileLock:
    def __init__(self, lock_file, timeout=-1):
        self.lock_file = lock_file
        self.timeout = timeout
        self._fd = None

    def acquire(self, timeout=None):
        if self._fd is not None:
            return self
        timeout = self.timeout if timeout is None else timeout
        fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        if timeout < 0:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        os.close(fd)
                        raise Timeout("the lock %s is held elsewhere: gave up after %g s" % (self.lock_file, timeout))
                    time.sleep(0.05)
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
