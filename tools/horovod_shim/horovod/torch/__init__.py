# `import horovod.torch as hvd` gives hora.torch itself: this module replaces
# its own entry in sys.modules, so every attribute is hora.torch's.
import sys

import hora.torch

sys.modules[__name__] = hora.torch
