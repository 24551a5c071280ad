"""A small Fashion-MNIST for the checkpoint and fault tests: the first
images of Debian's dataset-fashion-mnist as IDX files, and the same as
record shards (hora-mkrecord)."""
import gzip, os, struct, subprocess

FMNIST = "/usr/share/datasets/fashion-mnist"


def available():
    return os.path.exists(os.path.join(FMNIST, "train-images-idx3-ubyte.gz"))


def make_idx(d, n_train, n_val):
    """DIR/idx with the first n_train training and n_val test images."""
    idx = os.path.join(d, "idx")
    os.mkdir(idx)
    for split, n in [("train", n_train), ("t10k", n_val)]:
        with gzip.open(os.path.join(FMNIST, f"{split}-images-idx3-ubyte.gz")) as f:
            magic, count, rows, cols = struct.unpack(">IIII", f.read(16))
            images = f.read(n * rows * cols)
        with gzip.open(os.path.join(FMNIST, f"{split}-labels-idx1-ubyte.gz")) as f:
            f.read(8)
            labels = f.read(n)
        with open(os.path.join(idx, f"{split}-images-idx3-ubyte"), "wb") as f:
            f.write(struct.pack(">IIII", magic, n, rows, cols) + images)
        with open(os.path.join(idx, f"{split}-labels-idx1-ubyte"), "wb") as f:
            f.write(struct.pack(">II", 0x801, n) + labels)
    return idx


def make_records(d, idx, mkrecord, shards):
    """DIR/records: idx's splits as hora-mkrecord shards; None if it failed."""
    rec = os.path.join(d, "records")
    for split, prefix in [("train", "train"), ("t10k", "val")]:
        cmd = [mkrecord, "--from", "idx", os.path.join(idx, f"{split}-images-idx3-ubyte"),
               os.path.join(idx, f"{split}-labels-idx1-ubyte"), os.path.join(rec, prefix), "--shards", str(shards)]
        print("$", " ".join(cmd), flush=True)
        if subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode != 0:
            return None
    return rec
