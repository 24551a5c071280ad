#!/usr/bin/env python3
"""tools/hora-ckpt on checkpoints written by hora-train's writer (fixtures from
test_ckpt_desc --fixtures; plain Python, no numpy).

usage: ckpt_tool.py HORA_CKPT TEST_CKPT_DESC [HORA_TRAIN]

The fixtures: a/, b/ and c/ each hold ckpt-0000000003.hckpt of a resnet8
(1x8x8, 10 classes, world size 2, batch 16). c is a written again (equal); b
differs from a in exactly: params layer1.0.conv2.weight[7] 0.5 -> 0.75 and
fc.bias[2] 0.125 -> 0.1875, momentum conv1.weight[0] +0 -> -0, bn_stats
layer2.0.bn1.running_var[3] 1.5 -> 2, run_state images 96 -> 97.

Checks:
  format  the file read here from trainer/ckpt/CHECKPOINT.md alone: header fields,
          table, alignment, zero padding, CRC32C of header+table and of each
          section, the model section's param/bn lines tiling the arenas
  info    the description, position, loss scale and section table
  verify  0 on good files; 1 naming the section and offset for a flipped
          byte in each section, the header for one in the table, truncation
          with both sizes, a missing file
  diff    equal files: every section 'equal', last line 'equal', exit 0; a
          vs b: the exact lines, exit 1; an unreadable file: exit 2; a file
          written here from CHECKPOINT.md is a's bytes exactly, and one with a
          section missing, one extra and one resized gives those lines; a
          file differing from a only in run_state's measurements
          (overlap_probe_s, precision_measured, precision_probe_ms) is
          'equal (measurements differ: ...)', exit 0, and one that also
          differs in a parameter or in overlap_mode differs, exit 1
  export  a zip whose members pass their CRC-32, each a .npy of the right
          name, dtype and shape holding the checkpoint's exact bytes, in
          state_dict order; num_batches_tracked = step; --momentum
  logits  (N, classes) float32 for an (N, 1, 8, 8) input; bad inputs refused
  usage   exit 2 and a message for bad command lines
  same    (with HORA_TRAIN) one error channel: for each damaged file (a byte
          flipped in model, run_state, bn_stats and the header, truncated, not a
          checkpoint, missing, a model section that does not parse, a
          section of the wrong size) hora-ckpt verify's one error line
          "hora-ckpt: MSG" and hora-train --resume's one error line
          "hora-train: --resume: MSG" carry the same MSG, naming the file
          (and the section and offset where there is one)
"""
import os, re, shutil, struct, subprocess, sys, tempfile, zipfile

NAME = "ckpt-0000000003.hckpt"


def run(args, want_rc=None):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    print("$", " ".join(args), "->", p.returncode)
    if p.stdout:
        print(p.stdout, end="")
    if p.stderr:
        print(p.stderr, end="")
    if want_rc is not None and p.returncode != want_rc:
        raise AssertionError(f"{' '.join(args)}: exit {p.returncode}, expected {want_rc}")
    return p


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


# ---- the format, from CHECKPOINT.md ----

def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


CRC_TABLE = _crc32c_table()


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    t = CRC_TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def read_ckpt(path, check_crc=True):
    """The file parsed as CHECKPOINT.md describes it: {name: bytes}, order.
    check_crc=False skips the sections' CRCs (pure Python: ~1 s per 10 MB)."""
    raw = open(path, "rb").read()
    expect(raw[:8] == b"HORACKPT", "magic")
    version, count, file_bytes, table_offset, table_bytes = struct.unpack_from("<IIQQQ", raw, 8)
    expect(version == 1 and table_offset == 64 and table_bytes == 64 * count, "header fields")
    expect(file_bytes == len(raw), f"file_bytes {file_bytes}, file {len(raw)}")
    expect(raw[40:60] == bytes(20), "header reserved bytes")
    (hcrc,) = struct.unpack_from("<I", raw, 60)
    expect(hcrc == crc32c(raw[64:64 + table_bytes], crc32c(raw[:60])), "header CRC over bytes 0-59 and the table")
    sections, order, end = {}, [], 64 + table_bytes
    for i in range(count):
        e = raw[64 + 64 * i: 128 + 64 * i]
        name = e[:24].split(b"\0")[0].decode()
        expect(e[len(name):24] == bytes(24 - len(name)), "name NUL-padded")
        off, size, crc = struct.unpack_from("<QQI", e, 24)
        expect(e[44:] == bytes(20), "entry reserved bytes")
        expect(off % 64 == 0 and off >= end and off - end < 64, f"{name} at the next multiple of 64")
        expect(raw[end:off] == bytes(off - end), f"zero padding before {name}")
        data = raw[off:off + size]
        expect(not check_crc or crc32c(data) == crc, f"{name} CRC32C")
        sections[name] = data
        order.append(name)
        end = off + size
    expect(end == file_bytes, "the last section ends the file")
    return sections, order


def write_ckpt(path, sections):
    """A file written from CHECKPOINT.md alone: [(name, bytes)] in order."""
    n = len(sections)
    table, body, at = b"", b"", 64 + 64 * n
    for name, data in sections:
        pad = (-at) % 64
        body += bytes(pad)
        at += pad
        table += name.encode().ljust(24, b"\0") + struct.pack("<QQI", at, len(data), crc32c(data)) + bytes(20)
        body += data
        at += len(data)
    head = b"HORACKPT" + struct.pack("<IIQQQ", 1, n, at, 64, 64 * n) + bytes(20)
    head += struct.pack("<I", crc32c(table, crc32c(head)))
    with open(path, "wb") as f:
        f.write(head + table + body)


def parse_model(text):
    keys, params, bns = {}, [], []
    for line in text.split("\n")[:-1]:
        w = line.split(" ")
        if w[0] == "param":
            params.append((w[1], w[2], int(w[3]), int(w[4]), tuple(int(d) for d in w[5:])))
        elif w[0] == "bn":
            bns.append((w[1], int(w[2]), int(w[3])))
        else:
            keys[w[0]] = w[1:]
    return keys, params, bns


def check_format(d):
    s, order = read_ckpt(f"{d}/a/{NAME}")
    expect(order == ["model", "run_state", "params", "momentum", "bn_stats"], f"sections {order}")
    model = s["model"].decode()
    expect(model.startswith("format hora-model 1\n") and model.endswith("\n"), "model text")
    keys, params, bns = parse_model(model)
    for k in ("arch", "stem", "block", "blocks", "width", "input", "classes", "compute_dtype", "grad_dtype",
              "bn_epsilon", "bn_momentum", "zero_init_last_bn", "world_size", "batch", "params_count", "stats_count"):
        expect(k in keys, f"model key {k}")
    expect(keys["arch"] == ["resnet8"] and keys["input"] == ["1", "8", "8"] and keys["blocks"] == ["1", "1", "1"],
           "model values")
    n = int(keys["params_count"][0])
    at = 0
    for name, kind, off, count, dims in params:
        prod = 1
        for x in dims:
            prod *= x
        expect(off == at and count == prod, f"param {name} tiles the arena")
        at += count
    expect(at == n and len(s["params"]) == 4 * n and len(s["momentum"]) == 4 * n, "params arena")
    at = 0
    for name, ch, off in bns:
        expect(off == at, f"bn {name}")
        at += 2 * ch
    expect(at == int(keys["stats_count"][0]) and len(s["bn_stats"]) == 4 * at, "stats arena")
    state = s["run_state"].decode()
    expect(state.startswith("format hora-run-state 1\n") and "\nstep 3\n" in state and "\nimages 96\n" in state,
           "run_state text")
    for k in ("seed", "data_seed", "epoch", "step_in_epoch", "step", "images", "steps_per_epoch", "world_size",
              "batch", "overlap_mode", "overlap_probe_step", "overlap_probe_s", "loss_scale",
              "loss_scale_good_steps", "loss_scale_skipped_steps", "loss_scale_consecutive_skips", "precision",
              "precision_measured", "precision_probe_ms"):
        expect(re.search(rf"^{k} ", state, re.M), f"run_state key {k}")
    expect(re.search(r"^overlap_probe_s 0x1\.999999999999ap-4 0x1\.3333333333333p-2$", state, re.M),
           "overlap_probe_s in %a")
    return s, keys, params, bns


# ---- the commands ----

def check_info(h, d):
    out = run([h, "info", f"{d}/a/{NAME}"], 0).stdout
    for pat in [r"^arch +resnet8 \(stem cifar, block basic, blocks 1 1 1, width 16\)$",
                r"^input +1x8x8 \(C x H x W\), 10 classes$", r"^precision +compute f32, gradients f32$",
                r"^run +world size 2, batch 16 per rank \(global 32\)$",
                r"^position +step 3, epoch 0, step in epoch 3 of 60, images 96$",
                r"^loss scale +1 \(good steps 0, skipped steps 0, consecutive skips 0\)$",
                r"^tensors +29 parameter tensors, 77754 parameters; 9 BN layers, 672 statistics$"]:
        expect(re.search(pat, out, re.M), f"info: no line matching {pat}")
    for name in ("model", "run_state", "params", "momentum", "bn_stats"):
        expect(re.search(rf"^ +{name} +\d+ +\d+ +0x[0-9a-f]{{8}}$", out, re.M), f"info: section line for {name}")


def check_verify(h, d, s):
    a = f"{d}/a/{NAME}"
    for x in "abc":
        out = run([h, "verify", f"{d}/{x}/{NAME}"], 0).stdout
        expect("OK (header and 5 sections" in out, "verify OK line")
    run([h, "verify", a, f"{d}/b/{NAME}"], 0)
    raw = open(a, "rb").read()
    bad = f"{d}/bad.hckpt"
    sections, _ = read_ckpt(a)
    # a byte in the middle of each section
    for i, name in enumerate(["model", "run_state", "params", "momentum", "bn_stats"]):
        (off, size) = struct.unpack_from("<QQ", raw, 64 + 64 * i + 24)
        b = bytearray(raw)
        b[off + size // 2] ^= 0x10
        open(bad, "wb").write(b)
        err = run([h, "verify", bad], 1).stderr
        expect(f"{bad}: section '{name}': offset {off}: CRC32C 0x" in err and f"({size} bytes)" in err,
               f"verify names {name}")
        run([h, "diff", a, bad], 2)
    # a byte of the table, of the header
    for at, needle in [(64 + 24 + 3, "offset 0: header and section table"), (20, "header and section table"),
                       (3, "not a hora checkpoint")]:
        b = bytearray(raw)
        b[at] ^= 1
        open(bad, "wb").write(b)
        expect(needle in run([h, "verify", bad], 1).stderr, f"flip at {at}: '{needle}'")
    # truncated
    for n in (10, 300, len(raw) // 2, len(raw) - 1):
        open(bad, "wb").write(raw[:n])
        err = run([h, "verify", bad], 1).stderr
        expect("truncated" in err and f"the file has {n} bytes" in err, f"truncated at {n}")
    err = run([h, "verify", f"{d}/none.hckpt"], 1).stderr
    expect("none.hckpt: cannot open: No such file or directory" in err, "missing file")
    run([h, "verify", a, f"{d}/none.hckpt"], 1)


def check_diff(h, d):
    a, b, c = (f"{d}/{x}/{NAME}" for x in "abc")
    p = run([h, "diff", a, c], 0)
    expect(p.stdout.splitlines() == ["model: equal", "run_state: equal", "params: equal", "momentum: equal",
                                     "bn_stats: equal", "equal"], "diff of equal files")
    p = run([h, "diff", a, b], 1)
    want = [
        "model: equal",
        "run_state: differ at line 8: A 'images 96', B 'images 97'",
        "params: differ: 2 of 77754 elements, max abs difference 0.25; first at layer1.0.conv2.weight[7] "
        "(offset 2519): A 0.5 (0x3f000000), B 0.75 (0x3f400000)",
        "momentum: differ: 1 of 77754 elements, max abs difference 0; first at conv1.weight[0] (offset 0): "
        "A 0 (0x00000000), B -0 (0x80000000)",
        "bn_stats: differ: 1 of 672 elements, max abs difference 0.5; first at layer2.0.bn1.running_var[3] "
        "(offset 131): A 1.5 (0x3fc00000), B 2 (0x40000000)",
        "differ",
    ]
    got = p.stdout.splitlines()
    expect(got == want, "diff a b:\n" + "\n".join(f"  got  {g}\n  want {w}" for g, w in zip(got, want) if g != w))
    run([h, "diff", a, f"{d}/none.hckpt"], 2)
    run([h, "diff", a], 2)
    # Written here from CHECKPOINT.md: byte for byte the file hora-train's writer made.
    s, order = read_ckpt(a)
    mine = f"{d}/python.hckpt"
    write_ckpt(mine, [(k, s[k]) for k in order])
    expect(open(mine, "rb").read() == open(a, "rb").read(), "a file written from CHECKPOINT.md is the same bytes")
    # Sections missing, extra, of another size.
    write_ckpt(mine, [("model", s["model"]), ("run_state", s["run_state"]), ("params", s["params"][:-4]),
                      ("bn_stats", s["bn_stats"]), ("extra", b"x")])
    p = run([h, "diff", a, mine], 1)
    want = ["model: equal", "run_state: equal", "params: differ in size: A 311016 bytes, B 311012 bytes",
            "momentum: differ: only in A", "bn_stats: equal", "extra: differ: only in B", "differ"]
    expect(p.stdout.splitlines() == want, f"diff with sections missing, extra, resized: {p.stdout.splitlines()}")
    err = run([h, "verify", mine], 1).stderr
    expect("section 'params': offset 2816: 311012 bytes, the model section says 311016" in err, "verify: sizes")
    check_diff_measurements(h, d, s, order)


def check_diff_measurements(h, d, s, order):
    """Files equal in training state and differing only in measured timings are equal (exit 0), with the
    measurements named; any training-state difference (a parameter, overlap_mode) still differs (exit 1)."""
    a = f"{d}/a/{NAME}"
    state = s["run_state"].decode()

    def variant(name, replace, params=None):
        text = state
        for old, new in replace:
            expect(old in text, f"fixture run_state has '{old}'")
            text = text.replace(old, new)
        path = f"{d}/{name}.hckpt"
        write_ckpt(path, [(k, text.encode() if k == "run_state" else params if k == "params" and params else s[k])
                          for k in order])
        return path

    probe = ("overlap_probe_s 0x1.999999999999ap-4 0x1.3333333333333p-2", "overlap_probe_s 0x1.8p-2 0x1p-1")
    timed = variant("timed", [probe])
    p = run([h, "diff", a, timed], 0)
    want = ["model: equal",
            "run_state: equal training state; measurements differ: overlap_probe_s "
            "(A 0x1.999999999999ap-4 0x1.3333333333333p-2, B 0x1.8p-2 0x1p-1)",
            "params: equal", "momentum: equal", "bn_stats: equal",
            "equal (measurements differ: overlap_probe_s)"]
    expect(p.stdout.splitlines() == want, f"diff of a timing-only pair: {p.stdout.splitlines()}")
    # Every measured line; and a line only one file has (an older writer's) is a measurement too.
    probed = variant("probed", [probe, ("precision_measured 0\n", "precision_measured 1\n"),
                                ("precision_probe_ms 0x0p+0 0x0p+0 0x0p+0\n", "")])
    p = run([h, "diff", a, probed], 0)
    last = p.stdout.splitlines()[-1]
    expect(last == "equal (measurements differ: overlap_probe_s, precision_measured, precision_probe_ms)",
           f"diff with every measurement changed: last line '{last}'")
    expect("precision_probe_ms (A 0x0p+0 0x0p+0 0x0p+0, B none)" in p.stdout, "a measured line only A has")
    # A choice made from measurements changes training: it is state.
    chosen = variant("chosen", [probe, ("overlap_mode 0\n", "overlap_mode 1\n")])
    p = run([h, "diff", a, chosen], 1)
    expect("run_state: differ at line 12: A 'overlap_mode 0', B 'overlap_mode 1'" in p.stdout.splitlines()
           and p.stdout.splitlines()[-1] == "differ", f"overlap_mode is state: {p.stdout.splitlines()}")
    # A parameter as well as a timing: differ.
    params = bytearray(s["params"])
    params[0:4] = struct.pack("<f", struct.unpack_from("<f", params, 0)[0] + 1.0)
    both = variant("both", [probe], bytes(params))
    p = run([h, "diff", a, both], 1)
    got = p.stdout.splitlines()
    expect(got[-1] == "differ" and got[2].startswith("params: differ: 1 of 77754 elements") and
           got[1].startswith("run_state: equal training state; measurements differ: overlap_probe_s"),
           f"diff of a pair with a parameter and a timing changed: {got}")
    # The training state as well: its first difference, not the measurement.
    p = run([h, "diff", timed, f"{d}/b/{NAME}"], 1)
    expect("run_state: differ at line 8: A 'images 96', B 'images 97'" in p.stdout.splitlines(),
           f"a state difference beside a measurement: {p.stdout.splitlines()}")


def npy_parse(blob):
    expect(blob[:8] == b"\x93NUMPY\x01\x00", "npy 1.0 magic")
    (hlen,) = struct.unpack_from("<H", blob, 8)
    expect((10 + hlen) % 64 == 0 and blob[9 + hlen:10 + hlen] == b"\n", "npy header padded to 64, '\\n'")
    header = blob[10:10 + hlen].decode()
    m = re.fullmatch(r"\{'descr': '(<f4|<i8)', 'fortran_order': False, 'shape': \(([0-9, ]*)\), \} *\n", header)
    expect(m, f"npy header {header!r}")
    shape = tuple(int(x) for x in m.group(2).replace(" ", "").split(",") if x)
    return m.group(1), shape, blob[10 + hlen:]


def check_export(h, d, s, params, bns):
    a = f"{d}/a/{NAME}"
    out = f"{d}/a.npz"
    run([h, "export", a, "--npz", out, "--momentum"], 0)
    z = zipfile.ZipFile(out)
    expect(z.testzip() is None, "every member's CRC-32")
    names = [i.filename for i in z.infolist()]
    expect(all(i.compress_type == zipfile.ZIP_STORED for i in z.infolist()), "stored")
    bn_of = {name: (ch, off) for name, ch, off in bns}
    want = []  # state_dict order: each BN's buffers after its bias
    for name, kind, off, count, dims in params:
        want.append(name)
        if kind == "bn_beta":
            want += [name[:-5] + x for x in (".running_mean", ".running_var", ".num_batches_tracked")]
    want += ["momentum." + p[0] for p in params]
    expect(names == [w + ".npy" for w in want], f"members {names[:6]}..., want {want[:6]}...")
    for name, kind, off, count, dims in params:
        for prefix, section in (("", "params"), ("momentum.", "momentum")):
            descr, shape, data = npy_parse(z.read(prefix + name + ".npy"))
            expect(descr == "<f4" and shape == dims, f"{prefix}{name}: {descr} {shape}, want <f4 {dims}")
            expect(data == s[section][4 * off:4 * (off + count)], f"{prefix}{name}: the checkpoint's bytes")
    for name, (ch, off) in bn_of.items():
        for k, at in (("running_mean", off), ("running_var", off + ch)):
            descr, shape, data = npy_parse(z.read(f"{name}.{k}.npy"))
            expect(descr == "<f4" and shape == (ch,) and data == s["bn_stats"][4 * at:4 * (at + ch)], f"{name}.{k}")
        descr, shape, data = npy_parse(z.read(f"{name}.num_batches_tracked.npy"))
        expect(descr == "<i8" and shape == () and struct.unpack("<q", data) == (3,), f"{name}.num_batches_tracked")
    run([h, "export", a, "--npz", out], 0)
    expect(not any(n.startswith("momentum.") for n in zipfile.ZipFile(out).namelist()),
           "no momentum without --momentum")
    run([h, "export", f"{d}/none.hckpt", "--npz", out], 1)


def npy_write(path, shape, descr="<f4", values=None):
    count = 1
    for x in shape:
        count *= x
    dims = ", ".join(str(x) for x in shape) + ("," if len(shape) == 1 else "")
    head = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    head += " " * (63 - (10 + len(head)) % 64) + "\n"
    vals = values if values is not None else [((i * 37) % 101) / 50.0 - 1.0 for i in range(count)]
    fmt = "<%d%s" % (count, "f" if descr == "<f4" else "d")
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode() + struct.pack(fmt, *vals))


def check_logits(h, d):
    a = f"{d}/a/{NAME}"
    x, y = f"{d}/x.npy", f"{d}/y.npy"
    npy_write(x, (3, 1, 8, 8))
    run([h, "logits", a, "--input", x, "--out", y, "--threads", "1"], 0)
    descr, shape, data = npy_parse(open(y, "rb").read())
    expect(descr == "<f4" and shape == (3, 10) and len(data) == 120, f"logits {descr} {shape}")
    vals = struct.unpack("<30f", data)
    expect(all(v == v and abs(v) < 1e30 for v in vals) and len(set(vals)) > 10, "finite, varied logits")
    npy_write(x, (3, 3, 8, 8))
    expect("the model takes (N, 1, 8, 8)" in run([h, "logits", a, "--input", x, "--out", y], 1).stderr, "shape")
    npy_write(x, (2, 1, 8, 8), "<f8")
    expect("expected '<f4'" in run([h, "logits", a, "--input", x, "--out", y], 1).stderr, "dtype")
    open(x, "wb").write(b"not numpy at all")
    expect("not a .npy file" in run([h, "logits", a, "--input", x, "--out", y], 1).stderr, "not npy")


def check_usage(h, d):
    a = f"{d}/a/{NAME}"
    expect("usage: hora-ckpt" in run([h], 2).stderr, "no arguments")
    expect("usage: hora-ckpt" in run([h, "--help"], 0).stdout, "--help")
    expect("unknown command 'frob'" in run([h, "frob", a], 2).stderr, "unknown command")
    expect("wrong number of arguments" in run([h, "info"], 2).stderr, "info without a file")
    run([h, "verify"], 2)
    expect("--npz OUT is required" in run([h, "export", a], 2).stderr, "export without --npz")
    expect("unexpected argument '--bogus'" in run([h, "export", a, "--npz", f"{d}/o.npz", "--bogus"], 2).stderr,
           "stray argument")
    expect("--input IN.npy and --out OUT.npy are required" in run([h, "logits", a, "--out", "y.npy"], 2).stderr,
           "logits without --input")
    run([h, "logits", a, "--input", "x", "--out", "y", "--threads", "0"], 2)
    expect("cannot open" in run([h, "info", f"{d}/none.hckpt"], 1).stderr, "info of a missing file")


def check_same(h, train, d):
    a = f"{d}/a/{NAME}"
    raw = open(a, "rb").read()
    s, order = read_ckpt(a)
    cases = []  # (file, what MSG must name)

    def damaged(name, data):
        path = f"{d}/same-{name}.hckpt"
        open(path, "wb").write(data)
        return path

    for i, name in enumerate(order):
        if name not in ("model", "run_state", "bn_stats"):  # the text sections, and the last float one
            continue
        (off, size) = struct.unpack_from("<QQ", raw, 64 + 64 * i + 24)
        b = bytearray(raw)
        b[off + size // 2] ^= 0x10
        cases.append((damaged(name, b), f"section '{name}': offset {off}: CRC32C"))
    b = bytearray(raw)
    b[20] ^= 1
    cases.append((damaged("header", b), "header"))
    cases.append((damaged("truncated", raw[:-1]), "truncated: the file has"))
    cases.append((damaged("magic", b"not a checkpoint at all, but long enough for a header" * 2), "offset 0: not a hora"))
    cases.append((f"{d}/same-none.hckpt", "cannot open: No such file or directory"))
    model = s["model"].replace(b"\nclasses 10\n", b"\nclasses ten\n")
    expect(model != s["model"], "the model section has a 'classes 10' line")
    write_ckpt(f"{d}/same-model-text.hckpt", [(k, model if k == "model" else s[k]) for k in order])
    cases.append((f"{d}/same-model-text.hckpt", "section 'model': offset 384: line"))
    write_ckpt(f"{d}/same-size.hckpt", [(k, s[k][:-4] if k == "params" else s[k]) for k in order])
    cases.append((f"{d}/same-size.hckpt", "section 'params': offset 2816: 311012 bytes, the model section says 311016"))
    for path, needle in cases:
        tool = [line for line in run([h, "verify", path], 1).stderr.splitlines() if line.startswith("hora-ckpt")]
        expect(len(tool) == 1 and tool[0].startswith("hora-ckpt: "), f"{path}: hora-ckpt: one error line: {tool}")
        msg = tool[0][len("hora-ckpt: "):]
        expect(msg.startswith(path + ": ") and needle in msg, f"{path}: hora-ckpt's message names '{needle}': {msg}")
        p = run([train, "--model", "resnet8", "--synthetic", "--image", "1x8x8", "--classes", "10", "--batch", "16",
                 "--threads", "1", "--steps", "1", "--resume", path])
        expect(p.returncode != 0, f"{path}: hora-train --resume accepted it")
        mine = [line for line in p.stderr.splitlines() if line.startswith("hora-train")]
        expect(mine == ["hora-train: --resume: " + msg],
               f"{path}: hora-train's error lines {mine}, want the one 'hora-train: --resume: {msg}'")


def main():
    h, fixture = sys.argv[1], sys.argv[2]
    train = sys.argv[3] if len(sys.argv) > 3 else None
    d = tempfile.mkdtemp(prefix="ckpt_tool.")
    failed = []
    try:
        run([fixture, "--fixtures", d], 0)
        s, keys, params, bns = check_format(d)
        for name, fn in [("info", lambda: check_info(h, d)), ("verify", lambda: check_verify(h, d, s)),
                         ("diff", lambda: check_diff(h, d)), ("export", lambda: check_export(h, d, s, params, bns)),
                         ("logits", lambda: check_logits(h, d)), ("usage", lambda: check_usage(h, d))] + \
                        ([("same", lambda: check_same(h, train, d))] if train else []):
            try:
                fn()
                print(f"--- {name}: PASS")
            except AssertionError as e:
                print(f"--- {name}: FAIL: {e}")
                failed.append(name)
    except AssertionError as e:
        print(f"--- format: FAIL: {e}")
        failed.append("format")
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print("FAIL: " + ", ".join(failed) if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
