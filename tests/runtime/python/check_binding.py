#!/usr/bin/env python3
"""check_binding.py - runtime/python/hora's hand copies of hora.h against
what the C compiler makes of hora.h (suite unit, test 'python binding').

    check_binding.py emit HORA_H OUT.c
        Writes a C program (meson builds it as binding_layout) that prints,
        for the names hora.h declares: every enumerator's value, every
        integer #define, sizeof/_Alignof(hora_opts_t), each field's offset,
        size and array length, and the bytes of each field of HORA_OPTS_INIT.
    check_binding.py check HORA_H BINDING_LAYOUT
        Runs that program and compares the binding (import hora, libhora from
        $HORA_LIBRARY) with it:
          - hora_status_t, hora_compression_t, hora_memory_t,
            hora_reproducible_t: every enumerator HORA_X is hora.X with the
            same value (the *_COUNT sentinels excepted);
          - hora_dtype_t, hora_op_t (whose values the binding asks libhora
            for): every dtype's name is in hora._DTYPE_NAMES and hora.dtypes
            maps it to the header's value, and hora.OP_X is HORA_OP_X;
          - every integer #define HORA_X is hora.X;
          - hora.Opts has hora_opts_t's fields in order, each with the offset,
            size and ctypes type (array length) its C type calls for, the
            same sizeof and alignment, and Opts.make() gives HORA_OPTS_INIT's
            bytes field by field;
          - every hora_* function the binding declares is a HORA_API function
            of hora.h with as many argtypes as parameters and the restype its
            return type calls for.

Names come from parsing hora.h (comments removed; typedef enums, the
typedef struct hora_opts_t, #define NAME INTEGER, HORA_API prototypes),
values and layout from the compiler, so a field, enumerator or constant
added to hora.h is checked without editing this file. Exit 0 when the
binding agrees, 1 listing every difference.
"""
import ctypes
import os
import re
import subprocess
import sys

# The enums the binding copies by hand; dtype and op it asks libhora for.
COPIED_ENUMS = ("hora_status_t", "hora_compression_t", "hora_memory_t", "hora_reproducible_t")
STRUCT = "hora_opts_t"


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def parse_header(path):
    """hora.h's names: {enum type: [enumerators]}, [integer defines],
    [(field, C type, array length expression or None)] of hora_opts_t,
    {function: (return type, parameter count)}."""
    with open(path) as f:
        text = strip_comments(f.read())
    enums = {}
    for body, name in re.findall(r"typedef\s+enum\s*\{(.*?)\}\s*(\w+)\s*;", text, flags=re.S):
        enums[name] = [m.group(1) for item in body.split(",") for m in [re.match(r"\s*(\w+)", item)] if m]
    defines = re.findall(r"^\s*#\s*define\s+(HORA_\w+)[ \t]+(?:-?\d+|0[xX][0-9a-fA-F]+)[ \t]*$", text, flags=re.M)
    m = re.search(r"typedef\s+struct\s*\{(.*?)\}\s*" + STRUCT + r"\s*;", text, flags=re.S)
    if not m:
        sys.exit("check_binding: no typedef struct { ... } %s; in %s" % (STRUCT, path))
    fields = []
    for decl in m.group(1).split(";"):
        decl = " ".join(decl.split())
        if not decl:
            continue
        fm = re.match(r"^(.*?)\b(\w+)\s*(?:\[(.+)\])?$", decl)
        if not fm:
            sys.exit("check_binding: cannot read the field declaration '%s' of %s" % (decl, STRUCT))
        fields.append((fm.group(2), " ".join(fm.group(1).replace("*", " * ").split()), fm.group(3)))
    functions = {}
    for ret, name, params in re.findall(r"HORA_API\s+([^;{}()]*?)\b(hora_\w+)\s*\(([^;{}]*?)\)\s*;", text, flags=re.S):
        params = " ".join(params.split())
        count = 0 if params in ("", "void") else params.count(",") + 1
        functions[name] = (" ".join(ret.replace("*", " * ").split()), count)
    return enums, defines, fields, functions


def emit(header, out):
    enums, defines, fields, _ = parse_header(header)
    lines = ["/* Written by tests/runtime/python/check_binding.py from hora.h: what the C",
             " * compiler makes of its names, for the binding's check. */",
             "#include <stddef.h>", "#include <stdio.h>", '#include "hora.h"', "",
             "static void bytes(const char *field, const void *p, size_t n)", "{",
             '    printf("default %s ", field);',
             '    for (size_t i = 0; i < n; i++) printf("%02x", ((const unsigned char *)p)[i]);',
             '    printf("\\n");', "}", "", "int main(void)", "{",
             "    static const %s d = HORA_OPTS_INIT;" % STRUCT]
    for enum, names in enums.items():
        for n in names:
            lines.append('    printf("enum %s %s %%lld\\n", (long long)%s);' % (enum, n, n))
    for n in defines:
        lines.append('    printf("define %s %%lld\\n", (long long)%s);' % (n, n))
    lines.append('    printf("struct %s %%zu %%zu\\n", sizeof(%s), _Alignof(%s));' % (STRUCT, STRUCT, STRUCT))
    for name, _, length in fields:
        member = "((%s *)0)->%s" % (STRUCT, name)
        count = "sizeof(%s) / sizeof(%s[0])" % (member, member) if length else "(size_t)0"
        lines.append('    printf("field %s %%zu %%zu %%zu\\n", offsetof(%s, %s), sizeof(%s), %s);'
                     % (name, STRUCT, name, member, count))
        lines.append("    bytes(\"%s\", &d.%s, sizeof(d.%s));" % (name, name, name))
    lines += ["    return 0;", "}", ""]
    with open(out, "w") as f:
        f.write("\n".join(lines))


def read_layout(exe):
    out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    values, defines, fields, defaults, struct = {}, {}, [], {}, None
    for line in out.splitlines():
        w = line.split()
        if w[0] == "enum":
            values.setdefault(w[1], {})[w[2]] = int(w[3])
        elif w[0] == "define":
            defines[w[1]] = int(w[2])
        elif w[0] == "struct":
            struct = (int(w[2]), int(w[3]))
        elif w[0] == "field":
            fields.append((w[1], int(w[2]), int(w[3]), int(w[4])))
        elif w[0] == "default":
            defaults[w[1]] = bytes.fromhex(w[2])
    return values, defines, struct, fields, defaults


class Report:
    def __init__(self):
        self.failures = 0
        self.checks = 0

    def check(self, ok, message):
        self.checks += 1
        if not ok:
            self.failures += 1
            print("FAIL: " + message)


def binding_name(c_name):
    return c_name[len("HORA_"):]


def check_enums(r, hora, values):
    for enum in COPIED_ENUMS:
        r.check(enum in values, "hora.h has no enum %s (the binding copies it)" % enum)
        for name, value in values.get(enum, {}).items():
            if name.endswith("_COUNT"):
                continue
            got = getattr(hora, binding_name(name), None)
            r.check(got == value, "%s %s is %d in hora.h, hora.%s is %r" % (enum, name, value, binding_name(name), got))
    dtypes = {n: v for n, v in values.get("hora_dtype_t", {}).items() if not n.endswith("_COUNT")}
    r.check(len(dtypes) == len(hora._DTYPE_NAMES),
            "hora.h has %d dtypes, hora._DTYPE_NAMES %d" % (len(dtypes), len(hora._DTYPE_NAMES)))
    for name, value in dtypes.items():
        short = hora.lib.hora_dtype_name(value)
        short = short.decode() if short else None
        r.check(short in hora._DTYPE_NAMES, "%s (%d), libhora's '%s', is not in hora._DTYPE_NAMES" % (name, value, short))
        r.check(hora.dtypes.get(short) == value,
                "%s is %d in hora.h, hora.dtypes['%s'] is %r" % (name, value, short, hora.dtypes.get(short)))
    for name, value in values.get("hora_op_t", {}).items():
        if not name.endswith("_COUNT"):
            got = getattr(hora, binding_name(name), None)
            r.check(got == value, "hora_op_t %s is %d in hora.h, hora.%s is %r" % (name, value, binding_name(name), got))


def check_defines(r, hora, defines):
    for name, value in defines.items():
        got = getattr(hora, binding_name(name), None)
        r.check(got == value, "#define %s %d in hora.h, hora.%s is %r" % (name, value, binding_name(name), got))


def ctypes_for(c_type, enum_names):
    """The ctypes type a field or return value of C type c_type needs."""
    c_type = " ".join(w for w in c_type.split() if w != "const")
    if c_type.endswith("*"):
        return ctypes.c_char_p if c_type == "char *" else ctypes.c_void_p
    plain = {"size_t": ctypes.c_size_t, "double": ctypes.c_double, "int": ctypes.c_int,
             "int64_t": ctypes.c_int64, "void": None}
    if c_type in plain:
        return plain[c_type]
    if c_type in enum_names:
        return ctypes.c_int
    raise KeyError(c_type)


def check_struct(r, hora, header_fields, enum_names, struct, fields, defaults):
    opts = hora.Opts
    ours = [f[0] for f in opts._fields_]
    theirs = [f[0] for f in fields]
    r.check(ours == theirs, "hora.Opts fields %s, %s in hora.h %s" % (ours, STRUCT, theirs))
    size, align = struct
    r.check(ctypes.sizeof(opts) == size, "sizeof(hora.Opts) %d, sizeof(%s) %d" % (ctypes.sizeof(opts), STRUCT, size))
    r.check(ctypes.alignment(opts) == align,
            "alignment of hora.Opts %d, of %s %d" % (ctypes.alignment(opts), STRUCT, align))
    types = dict((f[0], f[1]) for f in opts._fields_)
    made = bytes(opts.make())
    for (name, offset, nbytes, length), (_, c_type, _) in zip(fields, header_fields):
        if name not in types:
            r.check(False, "hora.Opts has no field %s (offset %d in %s)" % (name, offset, STRUCT))
            continue
        desc = getattr(opts, name)
        r.check(desc.offset == offset and desc.size == nbytes,
                "%s.%s at offset %d, %d bytes; hora.Opts.%s at %d, %d bytes"
                % (STRUCT, name, offset, nbytes, name, desc.offset, desc.size))
        try:
            want = ctypes_for(c_type, enum_names)
        except KeyError:
            r.check(False, "%s.%s: no ctypes type known for C type '%s' (add it to ctypes_for)" % (STRUCT, name, c_type))
            continue
        got = types[name]
        if length:
            ok = issubclass(got, ctypes.Array) and got._type_ is want and got._length_ == length
            r.check(ok, "%s.%s is %s[%d]; hora.Opts.%s is %s" % (STRUCT, name, want.__name__, length, name,
                                                                got.__name__))
        else:
            r.check(got is want, "%s.%s is %s (%s); hora.Opts.%s is %s" % (STRUCT, name, c_type, want.__name__, name,
                                                                         got.__name__))
        ours_default = made[desc.offset:desc.offset + desc.size]
        r.check(ours_default == defaults[name],
                "HORA_OPTS_INIT's %s is %s, hora.Opts.make()'s %s" % (name, defaults[name].hex(), ours_default.hex()))


def check_functions(r, hora, functions, enum_names):
    declared = {n: f for n, f in vars(hora.lib).items() if n.startswith("hora_") and f.argtypes is not None}
    r.check(declared, "the binding declares no hora_* function (found none in hora.lib)")
    for name, f in sorted(declared.items()):
        if name not in functions:
            r.check(False, "the binding declares %s, which hora.h has no HORA_API prototype for" % name)
            continue
        ret, count = functions[name]
        r.check(len(f.argtypes) == count,
                "%s takes %d parameters in hora.h, the binding declares %d argtypes" % (name, count, len(f.argtypes)))
        try:
            want = ctypes_for(ret, enum_names)
        except KeyError:
            r.check(False, "%s returns '%s': no ctypes type known for it (add it to ctypes_for)" % (name, ret))
            continue
        r.check(f.restype is want, "%s returns %s in hora.h (%s), the binding's restype is %s"
                % (name, ret, want.__name__ if want else "None", getattr(f.restype, "__name__", f.restype)))


def check(header, exe):
    enums, _, header_fields, functions = parse_header(header)
    values, defines, struct, fields, defaults = read_layout(exe)
    import hora
    r = Report()
    enum_names = set(enums) | {"hora_status_t"}
    check_enums(r, hora, values)
    check_defines(r, hora, defines)
    check_struct(r, hora, header_fields, enum_names, struct, fields, defaults)
    check_functions(r, hora, functions, enum_names)
    print("check_binding: %s (%s, libhora %s) against %s: %d checks, %d failures"
          % (os.path.dirname(hora.__file__), STRUCT, hora.library_path, header, r.checks, r.failures))
    return 1 if r.failures else 0


def main(argv):
    if len(argv) == 4 and argv[1] == "emit":
        emit(argv[2], argv[3])
        return 0
    if len(argv) == 4 and argv[1] == "check":
        return check(argv[2], argv[3])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
