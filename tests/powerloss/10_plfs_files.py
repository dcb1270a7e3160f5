# SPDX-License-Identifier: MIT
"""plfs, file contents (tests/powerloss/README.md, "Rules"): a power cut
puts every file back to the bytes and size of its last fsync or fdatasync;
with --torn a page-granular prefix of the unsynced pages survives; a clean
stop keeps everything; BACKING at mount time counts as durable."""

import mmap
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plfstest import PAGE, check, eq, main, read_file, write_file  # noqa: E402

OLD = b"old bytes, durable before the mount\n" * 300  # 10,800 bytes: 3 pages, the last one partial


def test_write_without_fsync_is_lost(t):
    write_file(t.b("f"), OLD)
    t.mount()
    fd = os.open(t.m("f"), os.O_WRONLY)
    os.pwrite(fd, b"X" * 5000, 100)  # overwrites pages 0 and 1
    os.pwrite(fd, b"tail" * 2000, len(OLD))  # appends
    os.close(fd)
    eq(read_file(t.m("f"))[100:105], b"XXXXX", "the mount shows the write at once")
    t.cut()
    eq(read_file(t.b("f")), OLD, "a write never synced is gone after the cut")


def test_fdatasync_makes_data_survive(t):
    write_file(t.b("f"), OLD)
    t.mount()
    fd = os.open(t.m("f"), os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"first")
    os.fdatasync(fd)
    os.write(fd, b"second")
    os.close(fd)
    t.cut()
    eq(read_file(t.b("f")), OLD + b"first", "fdatasync'ed bytes survive; the later append does not")


def test_o_dsync_write_survives(t):
    write_file(t.b("f"), OLD)
    t.mount()
    fd = os.open(t.m("f"), os.O_WRONLY | os.O_APPEND | os.O_DSYNC)
    os.write(fd, b"synced by O_DSYNC")  # the kernel syncs after the write
    os.close(fd)
    t.cut()
    eq(read_file(t.b("f")), OLD + b"synced by O_DSYNC", "an O_DSYNC write is durable when it returns")


def test_fsync_makes_data_survive(t):
    write_file(t.b("f"), OLD)
    t.mount()
    fd = os.open(t.m("f"), os.O_RDWR)
    os.pwrite(fd, b"Y" * PAGE, PAGE)
    os.fsync(fd)
    os.pwrite(fd, b"Z" * 10, 0)
    os.close(fd)
    t.cut()
    eq(read_file(t.b("f")), OLD[:PAGE] + b"Y" * PAGE + OLD[2 * PAGE :], "fsync'ed page kept, later write undone")


def test_ftruncate_without_fsync_is_undone(t):
    write_file(t.b("f"), OLD)
    write_file(t.b("g"), OLD)
    t.mount()
    os.truncate(t.m("f"), 100)  # shrink
    with open(t.m("f"), "ab") as f:
        f.write(b"regrown")
    os.truncate(t.m("g"), 5 * PAGE)  # extend
    eq(os.path.getsize(t.m("g")), 5 * PAGE, "the mount shows the new size")
    t.cut()
    eq(read_file(t.b("f")), OLD, "shrunk and regrown without fsync: the synced bytes come back")
    eq(read_file(t.b("g")), OLD, "extended without fsync: the synced size comes back")


def test_ftruncate_with_fsync_survives(t):
    write_file(t.b("f"), OLD)
    t.mount()
    fd = os.open(t.m("f"), os.O_RDWR)
    os.ftruncate(fd, 100)
    os.fsync(fd)
    os.ftruncate(fd, 50)  # not synced: undone
    os.close(fd)
    t.cut()
    eq(read_file(t.b("f")), OLD[:100], "the fsync'ed truncation is durable, the later one is not")


def test_fallocate_follows_fsync(t):
    write_file(t.b("f"), OLD)
    write_file(t.b("g"), OLD)
    t.mount()
    for name, sync in (("f", False), ("g", True)):
        fd = os.open(t.m(name), os.O_RDWR)
        os.posix_fallocate(fd, 0, 5 * PAGE)  # extends the size
        if sync:
            os.fsync(fd)
        os.close(fd)
        eq(os.path.getsize(t.m(name)), 5 * PAGE, "fallocate extended %s" % name)
    t.cut()
    eq(read_file(t.b("f")), OLD, "an extension by fallocate, not synced, is undone")
    eq(read_file(t.b("g")), OLD + bytes(5 * PAGE - len(OLD)), "a synced fallocate keeps its size")


def test_o_trunc_without_fsync_is_undone(t):
    write_file(t.b("f"), OLD)
    t.mount()
    write_file(t.m("f"), b"replacement")  # O_TRUNC
    eq(read_file(t.m("f")), b"replacement", "the mount shows the new contents")
    t.cut()
    eq(read_file(t.b("f")), OLD, "O_TRUNC and the write after it, not synced, are undone")


def test_unlinked_open_file_keeps_synced_data(t):
    write_file(t.b("f"), OLD)
    t.mount()
    fd = os.open(t.m("f"), os.O_RDWR)
    os.unlink(t.m("f"))
    os.pwrite(fd, b"S" * 10, 0)
    os.fsync(fd)  # the data is durable; the unlink is not (no directory fsync)
    os.pwrite(fd, b"U" * 10, 0)
    check(not os.path.exists(t.m("f")), "unlinked: gone from the mount")
    os.close(fd)
    t.cut()
    eq(read_file(t.b("f")), b"S" * 10 + OLD[10:], "the name comes back with the bytes of the file's last fsync")


def torn_once(t, seed):
    """One torn cut of a file with one synced page (page 0 then rewritten)
    and eight appended pages; returns the file after the cut."""
    base = b"s" * PAGE
    write_file(t.b("f"), base)
    t.mount(seed=seed, torn=True)
    fd = os.open(t.m("f"), os.O_RDWR)
    os.pwrite(fd, b"W" * PAGE, 0)
    for i in range(1, 9):
        os.pwrite(fd, bytes([ord("a") + i]) * PAGE, i * PAGE)
    os.close(fd)
    t.cut()
    return read_file(t.b("f"))


def test_torn_cut_keeps_a_page_prefix(t):
    new = [b"W" * PAGE] + [bytes([ord("a") + i]) * PAGE for i in range(1, 9)]
    kept_counts = set()
    for seed in range(6):
        got = torn_once(t, seed)
        eq(len(got) % PAGE, 0, "seed %d: the torn file ends on a page boundary" % seed)
        k = len(got) // PAGE
        if k <= 1:  # nothing appended survived: page 0 is old or new
            check(got in (b"s" * PAGE, new[0]), "seed %d: page 0 is its old or its new bytes" % seed)
            k = 1 if got == new[0] else 0
        else:
            eq(got, b"".join(new[:k]), "seed %d: the file is a prefix of the unsynced pages" % seed)
        kept_counts.add(k)
        again = torn_once(t, seed)
        eq(again, got, "seed %d: the same seed tears the same way" % seed)
    check(len(kept_counts) >= 2, "six seeds kept the same number of pages (%s): nothing random" % kept_counts)


def test_shared_mmap_writes_follow_msync(t):
    write_file(t.b("f"), OLD)
    write_file(t.b("g"), OLD)
    t.mount()
    for name, sync in (("f", False), ("g", True)):
        fd = os.open(t.m(name), os.O_RDWR)
        m = mmap.mmap(fd, 2 * PAGE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        m[PAGE : PAGE + 4] = b"MMAP"
        if sync:
            m.flush()  # msync(MS_SYNC): written back, then fsync
        m.close()
        os.close(fd)
    t.cut()
    eq(read_file(t.b("f")), OLD, "a store through a shared mapping, never synced, is undone")
    eq(read_file(t.b("g")), OLD[:PAGE] + b"MMAP" + OLD[PAGE + 4 :], "msync made the store durable")


def test_clean_stop_keeps_everything(t):
    write_file(t.b("f"), OLD)
    t.mount()
    with open(t.m("f"), "ab") as f:
        f.write(b"more")
    os.mkdir(t.m("d"))
    write_file(t.m("d/new"), b"never synced")
    os.rename(t.m("f"), t.m("d/f"))
    t.stop()
    eq(t.listing(), {"d": None, "d/new": b"never synced", "d/f": OLD + b"more"}, "a clean stop keeps every change")


def test_fusermount_unmount_keeps_everything(t):
    t.mount()
    write_file(t.m("new"), b"never synced")
    t.unmount()
    eq(t.listing(), {"new": b"never synced"}, "an unmount keeps every change")


def test_remount_counts_backing_as_durable(t):
    write_file(t.b("f"), OLD)
    t.mount()
    with open(t.m("f"), "ab") as f:
        f.write(b"more")
    t.stop()
    t.mount()
    os.truncate(t.m("f"), 0)
    t.cut()
    eq(read_file(t.b("f")), OLD + b"more", "what BACKING held at mount time is durable")


def test_statfs_and_attributes_pass_through(t):
    write_file(t.b("f"), OLD)
    t.mount()
    st = os.statvfs(t.mnt)
    eq(st.f_bsize, os.statvfs(t.backing).f_bsize, "statfs reports BACKING's")
    os.utime(t.m("f"), (1000000000, 1000000000))
    os.chmod(t.m("f"), 0o600)
    eq(os.stat(t.m("f")).st_ino, os.stat(t.b("f")).st_ino, "inode numbers pass through")
    t.stop()
    eq(int(os.stat(t.b("f")).st_mtime), 1000000000, "utimens reaches BACKING")
    eq(os.stat(t.b("f")).st_mode & 0o777, 0o600, "chmod reaches BACKING")


if __name__ == "__main__":
    sys.exit(main(globals()))
