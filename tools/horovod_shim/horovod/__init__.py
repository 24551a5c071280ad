# tools/horovod_shim: lets Horovod's own test files import `horovod.torch`,
# which resolves to hora.torch (horovod/torch/__init__.py). Used only by
# tools/horovod-test-torch; not a Horovod package.
__version__ = "0.28.1"  # the release whose test_torch.py the tool runs
