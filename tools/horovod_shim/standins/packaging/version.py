# tools/horovod_shim stand-in for packaging.version (used only where the
# package is missing): test_torch.py compares torch.__version__ with release
# numbers; parse gives the release as a tuple of up to three integers, which
# compare the same way for such versions ("2.1.2+cpu" -> (2, 1, 2)).
import re


def parse(text):
    release = text.split("+")[0]
    return tuple(int(part) for part in re.findall(r"\d+", release)[:3])
