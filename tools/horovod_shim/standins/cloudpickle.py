# tools/horovod_shim stand-in for cloudpickle (used only where it is missing):
# Horovod's test/utils/common.py imports it at module level; what test_torch.py
# uses from common.py does not pickle. The standard pickle's functions.
from pickle import Pickler, Unpickler, dump, dumps, load, loads  # noqa: F401
