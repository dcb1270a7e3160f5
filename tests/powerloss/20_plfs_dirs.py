# SPDX-License-Identifier: MIT
"""plfs, directory entries (tests/powerloss/README.md, "Rules"): a power cut
puts every directory back to the entries of its last fsync. A file's own
fsync does not make its name durable; an undone rename brings back the file
it replaced; an undone unlink or rmdir brings the entry back with its
synced contents; a rename between two directories is durable as a whole
once either directory is synced."""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plfstest import check, eq, fsync_path, main, read_file, write_file  # noqa: E402


def test_new_file_without_dir_fsync_disappears(t):
    t.mount()
    write_file(t.m("new"), b"data", sync=True)  # the file's fsync: its bytes, not its name
    os.mkdir(t.m("d"))
    fsync_path(t.m("d"))
    t.cut()
    eq(t.listing(), {}, "names created without an fsync of their directory are gone")


def test_new_file_with_dir_fsync_survives(t):
    t.mount()
    write_file(t.m("synced"), b"data", sync=True)
    write_file(t.m("unsynced"), b"data")  # its name will be durable, its bytes not
    fsync_path(t.mnt)
    t.cut()
    eq(t.listing(), {"synced": b"data", "unsynced": b""}, "the directory's fsync made both names durable")


def test_fdatasync_of_a_directory_syncs_its_entries(t):
    t.mount()
    write_file(t.m("f"), b"data", sync=True)
    fd = os.open(t.mnt, os.O_RDONLY | os.O_DIRECTORY)
    os.fdatasync(fd)  # what LevelDB 1.23 calls on its directory after a new MANIFEST
    os.close(fd)
    t.cut()
    eq(t.listing(), {"f": b"data"}, "fdatasync of the directory made the name durable")


def test_rename_without_dir_fsync_is_undone(t):
    write_file(t.b("target"), b"old target")
    t.mount()
    write_file(t.m("tmp"), b"new target", sync=True)
    fsync_path(t.mnt)  # tmp's name durable
    os.rename(t.m("tmp"), t.m("target"))
    eq(read_file(t.m("target")), b"new target", "the mount shows the rename")
    t.cut()
    eq(t.listing(), {"tmp": b"new target", "target": b"old target"}, "the rename is undone, the replaced file back")


def test_rename_with_dir_fsync_survives(t):
    write_file(t.b("target"), b"old target")
    t.mount()
    write_file(t.m("tmp"), b"new target", sync=True)
    os.rename(t.m("tmp"), t.m("target"))
    fsync_path(t.mnt)
    t.cut()
    eq(t.listing(), {"target": b"new target"}, "the synced rename replaced the target for good")


def test_unlink_without_dir_fsync_is_undone(t):
    write_file(t.b("f"), b"synced contents")
    t.mount()
    with open(t.m("f"), "ab") as f:
        f.write(b" and more")
    os.unlink(t.m("f"))
    check(not os.path.exists(t.m("f")), "unlinked: gone from the mount")
    t.cut()
    eq(t.listing(), {"f": b"synced contents"}, "the unlink is undone, with the file's synced bytes")


def test_unlink_with_dir_fsync_survives(t):
    write_file(t.b("f"), b"synced contents")
    write_file(t.b("g"), b"other")
    t.mount()
    os.unlink(t.m("f"))
    fsync_path(t.mnt)
    os.unlink(t.m("g"))
    t.cut()
    eq(t.listing(), {"g": b"other"}, "the synced unlink is durable, the later one is not")


def test_mkdir_and_rmdir(t):
    os.mkdir(t.b("old"))
    write_file(t.b("old/f"), b"in old")
    os.mkdir(t.b("empty"))
    t.mount()
    os.mkdir(t.m("made"))
    write_file(t.m("made/f"), b"x", sync=True)
    fsync_path(t.mnt)  # "made" is durable, empty: its own entries were never synced
    os.rmdir(t.m("empty"))
    os.unlink(t.m("old/f"))
    os.rmdir(t.m("old"))
    t.cut()
    eq(t.listing(), {"made": None, "empty": None, "old": None, "old/f": b"in old"},
       "a synced mkdir keeps an empty directory; unsynced rmdirs are undone with their contents")


def test_rename_between_directories(t):
    for d in ("a", "b", "c"):
        os.mkdir(t.b(d))
    write_file(t.b("a/f"), b"f")
    write_file(t.b("a/g"), b"g")
    t.mount()
    os.rename(t.m("a/f"), t.m("b/f"))
    fsync_path(t.m("b"))  # the rename is one transaction: durable in a and b
    os.rename(t.m("a/g"), t.m("c/g"))  # never synced
    t.cut()
    eq(t.listing(), {"a": None, "a/g": b"g", "b": None, "b/f": b"f", "c": None},
       "a synced cross-directory rename moved the file; the unsynced one is undone")


def test_renamed_directory_is_undone(t):
    os.mkdir(t.b("d"))
    write_file(t.b("d/f"), b"f")
    t.mount()
    os.rename(t.m("d"), t.m("e"))
    write_file(t.m("e/new"), b"n", sync=True)
    fsync_path(t.m("e"))  # e's own entries durable, not its name
    t.cut()
    eq(t.listing(), {"d": None, "d/f": b"f", "d/new": b"n"}, "the directory keeps its synced entries, not its new name")


def test_hard_links_are_refused(t):
    write_file(t.b("f"), b"f")
    t.mount()
    try:
        os.link(t.m("f"), t.m("g"))
    except PermissionError:
        pass
    else:
        raise AssertionError("link() succeeded: plfs does not model hard links")
    t.stop()


if __name__ == "__main__":
    sys.exit(main(globals()))
