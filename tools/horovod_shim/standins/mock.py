# tools/horovod_shim stand-in for the `mock` backport (used only where it is
# missing): the standard library's unittest.mock, which it backports.
from unittest.mock import *  # noqa: F401,F403
