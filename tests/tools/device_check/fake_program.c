/* fake_program.c - every program of the fake build in tools/device-check's
 * self-test (the tests, hora-train, hora-bench-allreduce): a real ELF file
 * that needs libmpi.so.40, libcudart.so.13 and libhora.so.0, so the loader
 * checks of --prepare and --run see real dependencies resolved by the real
 * loader. It tells fake_device.py, which plays the program (by its path's
 * name), where the loader found libmpi and libcudart:
 *   python3 -S fake_device.py SELF LIBMPI LIBCUDART ARGS...
 * Built by selftest.py with -DPYTHON="..." -DDRIVER=".../fake_device.py". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The path the loader loaded soname from ("?" if it did not). */
static const char *fake_library_path(const char *soname)
{
    struct link_map *map = NULL;
    void *handle = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
    if (handle == NULL || dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == NULL) return "?";
    return map->l_name;
}

int main(int argc, char **argv)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n < 0) {
        perror("fake_program: /proc/self/exe");
        return 126;
    }
    self[n] = '\0';
    char **args = calloc((size_t)argc + 6, sizeof(*args));
    if (args == NULL) return 126;
    args[0] = PYTHON;
    args[1] = "-S";
    args[2] = DRIVER;
    args[3] = self;
    args[4] = (char *)fake_library_path("libmpi.so.40");
    args[5] = (char *)fake_library_path("libcudart.so.13");
    for (int i = 1; i < argc; i++) args[5 + i] = argv[i];
    execv(PYTHON, args);
    perror("fake_program: " PYTHON);
    return 127;
}
