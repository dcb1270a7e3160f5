# SPDX-License-Identifier: MIT
"""plfs against a model of its rules (tests/powerloss/README.md, "Rules").

Each round runs a seeded random mix of creates, writes, truncates, fsyncs,
renames (within and between directories, over existing files), unlinks,
mkdirs, rmdirs and directory fsyncs on the mount, while a small model here
tracks the durable state the rules say a power cut must leave: per file the
bytes of its last fsync, per directory the entries of its last fsync (with a
rename tying its two directories: syncing either makes both durable). After
the cut, BACKING must equal the model's durable tree exactly. A failure
prints the seed and the operations."""

import os
import random
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plfstest import eq, fsync_path, main  # noqa: E402

ROUNDS = 12
OPS = 60


class Inode:
    def __init__(self, is_dir):
        self.is_dir = is_dir
        self.data = b""  # files: the current bytes
        self.synced = b""  # files: the bytes of the last fsync (a new file has none)
        self.entries = {}  # directories: name -> Inode, as now
        self.durable = None  # directories: name -> Inode at the last fsync; None while unchanged since
        self.ties = set()


class Model:
    def __init__(self):
        self.root = Inode(True)

    def paths(self, want_dir=None, top=None, prefix=""):
        """(path, inode, parent) of every entry now, directories first by depth."""
        top = top or self.root
        out = []
        for name, node in sorted(top.entries.items()):
            p = prefix + "/" + name
            if want_dir is None or node.is_dir == want_dir:
                out.append((p, node, top))
            if node.is_dir:
                out += self.paths(want_dir, node, p)
        return out

    def dirs(self):
        return [("", self.root, None)] + self.paths(True)

    @staticmethod
    def change(d):
        if d.durable is None:
            d.durable = dict(d.entries)

    def sync_dir(self, d):
        todo = [d]
        while todo:
            x = todo.pop()
            if x.durable is None:
                continue
            x.durable = None
            todo += list(x.ties)
            x.ties = set()

    def tie(self, a, b):
        if a is not b:
            a.ties.add(b)
            b.ties.add(a)

    def durable_tree(self, d=None, prefix=""):
        d = d or self.root
        out = {}
        entries = d.durable if d.durable is not None else d.entries
        for name, node in entries.items():
            p = (prefix + "/" + name).lstrip("/")
            if node.is_dir:
                out[p] = None
                out.update(self.durable_tree(node, p))
            else:
                out[p] = node.synced
        return out


def inside(path, top):
    return path == top or path.startswith(top + "/")


class Round:
    def __init__(self, t, seed):
        self.t, self.rng, self.model, self.log = t, random.Random(seed), Model(), []
        self.names = 0

    def new_name(self):
        self.names += 1
        return "n%d" % self.names

    def m(self, path):
        return self.t.mnt + path

    def op_create(self):
        dpath, d, _ = self.rng.choice(self.model.dirs())
        name = self.new_name()
        self.log.append("create %s/%s" % (dpath, name))
        fd = os.open(self.m(dpath + "/" + name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        os.close(fd)
        self.model.change(d)
        d.entries[name] = Inode(False)

    def op_write(self, f):
        path, node, _ = f
        off = self.rng.randrange(0, len(node.data) + 6000)
        data = bytes([self.rng.randrange(97, 123)]) * self.rng.randrange(1, 9000)
        self.log.append("write %s at %d, %d bytes" % (path, off, len(data)))
        fd = os.open(self.m(path), os.O_WRONLY)
        os.pwrite(fd, data, off)
        os.close(fd)
        cur = node.data + bytes(max(0, off - len(node.data)))
        node.data = cur[:off] + data + cur[off + len(data) :]

    def op_truncate(self, f):
        path, node, _ = f
        size = self.rng.randrange(0, len(node.data) + 5000)
        self.log.append("truncate %s to %d" % (path, size))
        os.truncate(self.m(path), size)
        node.data = node.data[:size] + bytes(max(0, size - len(node.data)))

    def op_fsync(self, f):
        path, node, _ = f
        self.log.append("fsync %s" % path)
        fsync_path(self.m(path))
        node.synced = node.data

    def op_unlink(self, f):
        path, node, parent = f
        self.log.append("unlink %s" % path)
        os.unlink(self.m(path))
        self.model.change(parent)
        del parent.entries[path.rsplit("/", 1)[1]]

    def op_rename(self, src):
        path, node, parent = src
        dirs = [x for x in self.model.dirs() if not (node.is_dir and inside(x[0], path))]
        dpath, d, _ = self.rng.choice(dirs)
        files = [n for n, x in d.entries.items() if not x.is_dir and x is not node]
        name = self.rng.choice(files) if files and not node.is_dir and self.rng.random() < 0.5 else self.new_name()
        self.log.append("rename %s to %s/%s" % (path, dpath, name))
        os.rename(self.m(path), self.m(dpath + "/" + name))
        self.model.change(parent)
        self.model.change(d)
        del parent.entries[path.rsplit("/", 1)[1]]
        d.entries[name] = node
        self.model.tie(parent, d)

    def op_mkdir(self):
        dpath, d, _ = self.rng.choice(self.model.dirs())
        name = self.new_name()
        self.log.append("mkdir %s/%s" % (dpath, name))
        os.mkdir(self.m(dpath + "/" + name))
        self.model.change(d)
        new = Inode(True)
        new.durable = {}
        d.entries[name] = new

    def op_rmdir(self, e):
        path, node, parent = e
        self.log.append("rmdir %s" % path)
        os.rmdir(self.m(path))
        self.model.change(parent)
        del parent.entries[path.rsplit("/", 1)[1]]

    def op_fsync_dir(self):
        dpath, d, _ = self.rng.choice(self.model.dirs())
        self.log.append("fsync dir %s/" % dpath)
        fsync_path(self.m(dpath or "/"))
        self.model.sync_dir(d)

    def step(self):
        files = self.model.paths(False)
        subdirs = self.model.paths(True)
        empty = [x for x in subdirs if not x[1].entries]
        r = self.rng.random()
        if r < 0.15 or not files:
            return self.op_create() if r < 0.6 or not subdirs else self.op_mkdir()
        f = self.rng.choice(files)
        for limit, fn in ((0.35, self.op_write), (0.42, self.op_truncate), (0.55, self.op_fsync),
                          (0.62, self.op_unlink), (0.75, self.op_rename)):
            if r < limit:
                return fn(f)
        if r < 0.8 and subdirs:
            return self.op_rename(self.rng.choice(subdirs))
        if r < 0.85:
            return self.op_mkdir()
        if r < 0.88 and empty:
            return self.op_rmdir(self.rng.choice(empty))
        return self.op_fsync_dir()


def test_random_operations_leave_the_durable_state(t):
    for seed in range(ROUNDS):
        rnd = Round(t, seed)
        t.mount()
        try:
            for _ in range(OPS):
                rnd.step()
        except OSError as e:
            raise AssertionError("seed %d: %s after:\n  %s" % (seed, e, "\n  ".join(rnd.log)))
        t.cut()
        want = rnd.model.durable_tree()
        got = t.listing()
        if got != want:
            eq(sorted(got.items()), sorted(want.items()),
               "seed %d: BACKING after the cut, after:\n  %s\n" % (seed, "\n  ".join(rnd.log)))
        for p in list(got):  # the next round starts from an empty BACKING
            full = os.path.join(t.backing, p)
            if os.path.isfile(full):
                os.unlink(full)
        for p in sorted((p for p in got if got[p] is None), key=len, reverse=True):
            os.rmdir(os.path.join(t.backing, p))


if __name__ == "__main__":
    sys.exit(main(globals()))
