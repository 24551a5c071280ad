"""cudart_query.py LIB: the device query through cudart (ctypes), key=value
lines: runtime, driver, count_rc, count, deviceN, memory0, error. Run by the
probe in a process of its own, under a time limit."""
import ctypes
import sys


def query(lib):
    try:
        rt = ctypes.CDLL(lib)
    except OSError as e:
        print('error=cannot load %s: %s' % (lib, e))
        return
    v = ctypes.c_int(0)
    rt.cudaRuntimeGetVersion(ctypes.byref(v))
    print('runtime=%d' % v.value)
    v = ctypes.c_int(0)
    rt.cudaDriverGetVersion(ctypes.byref(v))
    print('driver=%d' % v.value)
    n = ctypes.c_int(0)
    rc = rt.cudaGetDeviceCount(ctypes.byref(n))
    print('count_rc=%d' % rc)
    print('count=%d' % (n.value if rc == 0 else 0))
    if rc != 0:
        rt.cudaGetErrorString.restype = ctypes.c_char_p
        print('error=cudaGetDeviceCount: %s (%d)' % (rt.cudaGetErrorString(rc).decode(), rc))
        return

    def attr(a, d):
        x = ctypes.c_int(0)
        rt.cudaDeviceGetAttribute(ctypes.byref(x), a, d)
        return x.value
    for d in range(n.value):
        prop = ctypes.create_string_buffer(8192)     # cudaDeviceProp: name[256] first
        f = getattr(rt, 'cudaGetDeviceProperties_v2', None) or rt.cudaGetDeviceProperties
        f(prop, d)
        name = prop.raw[:256].split(b'\0')[0].decode(errors='replace')
        # 75, 76: compute capability major, minor; 16: multiprocessors.
        print('device%d=%s cc %d.%d, %d SMs' % (d, name, attr(75, d), attr(76, d), attr(16, d)))
    rt.cudaSetDevice(0)
    free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
    if rt.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total)) == 0:
        print('memory0=%.1f GiB total, %.1f GiB free' % (total.value / 2**30, free.value / 2**30))


if __name__ == '__main__':
    query(sys.argv[1])
