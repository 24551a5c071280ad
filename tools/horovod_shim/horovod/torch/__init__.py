# `import horovod.torch as hvd` gives hora.torch itself: this module replaces
# its own entry in sys.modules, so every attribute is hora.torch's. Its
# submodules too: `from horovod.torch.mpi_ops import synchronize` (Horovod's
# test_adasum_pytorch.py) must find hora.torch.mpi_ops itself, not load a
# second copy of the file whose handle table the first copy's requests are
# not in.
import sys

import hora.torch

for _name, _module in list(sys.modules.items()):
    if _name.startswith("hora.torch."):
        sys.modules["horovod.torch." + _name[len("hora.torch."):]] = _module
sys.modules[__name__] = hora.torch
