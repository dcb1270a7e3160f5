/* SPDX-License-Identifier: MIT */
/*
 * datadir.c - the data directory's own record of what it holds, and the
 * start-up reconciliation of topics/ with the metadata store.
 *
 * The metadata store (LevelDB, src/meta) is the commit point of topic
 * create and delete and the home of cursors, but it must never be the only
 * place that knows what the event data is: a store that is lost, damaged or
 * silently short of records (LevelDB drops a damaged log record with only a
 * line in its LOG) must not turn into deleted topics. So the data directory
 * carries (docs/Storage.md "The data directory's own metadata"):
 *   <data>/cluster.json              the cluster and broker ids
 *   <data>/topics/<t>/topic.json      the topic's definition
 *   <data>/topics/<t>/creating        a create that has not committed
 *   <data>/topics/<t>/deleting        a delete that has been decided
 * Partition directories are decimal numbers, so these names never collide
 * with one. Every file is written with pulse_io_replace_file (temp file,
 * fdatasync, rename, directory fsync) and removed with pulse_io_remove_file
 * (unlink plus a directory fsync). Every file-system call, reads and
 * directory listings included, goes through the broker's struct pulse_io
 * (pulse_broker_io), so a test's faulty io reaches each of them.
 *
 * The rule at start, for each entry of topics/ (classify everything first;
 * if any directory is undecidable, refuse to start having changed nothing):
 *   __deleted-*                    a delete's aside tree: removed.
 *   has "deleting"                 a decided delete: its metadata (if any)
 *                                  and the directory are removed.
 *   metadata present               a topic: a "creating" marker is removed
 *                                  (the create committed); retention is taken
 *                                  from topic.json when it differs (the file
 *                                  is written first, so it is the newer);
 *                                  topic.json is (re)written from the store
 *                                  when missing (older data directory),
 *                                  damaged, or different otherwise.
 *   no metadata, has "creating",   an interrupted create: removed.
 *   no partition holds records
 *   no metadata, holds nothing     (no file at all): removed.
 *   (a "creating" marker beside records is a leftover of a committed
 *   create, nothing being appended before the commit: the rows below
 *   apply, and an adoption removes it)
 *   no metadata, valid topic.json  adopted: the metadata is rewritten from
 *   whose partitions match the     the file and the adoption logged at warn.
 *   partition directories
 *   anything else                  undecidable: pulsed refuses to start and
 *                                  names the directory and the command that
 *                                  resolves it (pulsed --adopt-topic).
 *   not a topic name               left alone (logged).
 * A topic whose metadata exists but whose directory does not (or a missing
 * topics/ while the store names topics) refuses the start, naming the
 * topics and `pulsed --forget-topic`: a volume that is not mounted looks
 * exactly like that, and treating it as deleted data would cost every
 * topic's metadata and cursors. A missing topics/ is made only when the
 * store names no topic. Likewise a topic kept or adopted whose partition
 * directory is missing or empty (every committed partition has at least a
 * segment file): made again empty, its log would hand out its offsets a
 * second time, so the start refuses and names the directory and
 * `pulsed --recreate-partition`, which accepts the loss explicitly and
 * starts the partition again after its consumers' cursors (or a given
 * offset).
 * Directories are removed by renaming them aside to __deleted-<nonce> first,
 * so an interrupted removal never leaves a half tree under a topic's name.
 *
 * Thread: start-up (single-threaded), the offline modes, and the admin
 * thread (markers, topic.json, directories of one topic at a time).
 */
#include "broker/broker.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker/broker_int.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "meta/dirfile.h"
#include "meta/meta.h"
#include "common/fsio.h"
#include "storage/segment.h"

/* ---- the directories themselves (errors that name their cause) --------- */

static pulse_status_t dir_error(const char *path, int e, char *errbuf, size_t errlen)
{
    if (e == EACCES || e == EPERM)
        pulse_errbuf_set(errbuf, errlen, "permission denied: %s (running as uid %u)", path, (unsigned)geteuid());
    else if (e == ENOTDIR)
        pulse_errbuf_set(errbuf, errlen, "not a directory: %s", path);
    else if (e == EROFS)
        pulse_errbuf_set(errbuf, errlen, "read-only file system: %s", path);
    else
        pulse_errbuf_set(errbuf, errlen, "%s: %s", path, strerror(e));
    PULSE_ERROR("data directory: %s: %s", path, strerror(e));
    return pulse_status_from_errno(e);
}

/* Makes path if missing and checks that it is a directory this process may
 * write. As root the permission check always passes, as it should. A new
 * directory's name is made durable (its parent fsynced) before anything is
 * put in it: the data directory and topics/ are made at a first start, and
 * nothing later syncs the directory holding them, so a power cut would
 * otherwise take them away with every topic (found by the power-cut
 * campaign, tests/powerloss). */
static pulse_status_t usable_dir(const struct pulse_local *b, const char *path, char *errbuf, size_t errlen)
{
    const struct pulse_io *io = pulse_broker_io(b);
    struct stat sb;

    if (pulse_io_mkdir_sync(io, path, 0755) != 0) {
        int e = errno;
        if (e != EEXIST)
            return dir_error(path, e, errbuf, errlen);
    }
    if (io->stat(io, path, false, &sb) != 0) {
        int e = errno;
        return dir_error(path, e, errbuf, errlen);
    }
    if (!S_ISDIR(sb.st_mode))
        return dir_error(path, ENOTDIR, errbuf, errlen);
    if (io->access(io, path, W_OK | X_OK) != 0) {
        int e = errno;
        return dir_error(path, e, errbuf, errlen);
    }
    return PULSE_OK;
}

/* Whether path exists at all (lstat); errno-free. */
static bool path_present(const struct pulse_local *b, const char *path)
{
    const struct pulse_io *io = pulse_broker_io(b);
    struct stat sb;

    return io->stat(io, path, true, &sb) == 0;
}

/* Whether path is a directory (following a symbolic link). */
static bool is_dir(const struct pulse_local *b, const char *path)
{
    const struct pulse_io *io = pulse_broker_io(b);
    struct stat sb;

    return io->stat(io, path, false, &sb) == 0 && S_ISDIR(sb.st_mode);
}

pulse_status_t pulse_broker_datadir_prepare(struct pulse_local *b, char *errbuf, size_t errlen)
{
    pulse_status_t st = usable_dir(b, b->data_dir, errbuf, errlen);

    /* A missing topics/ is made only once the store says it names no
     * topic (topics_dir_ready): made now, it would hide an unmounted
     * volume. */
    if (st == PULSE_OK && path_present(b, b->topics_dir))
        st = usable_dir(b, b->topics_dir, errbuf, errlen);
    return st;
}

/* ---- small files -------------------------------------------------------- */

/* Reads a whole small file; PULSE_NOT_FOUND when absent, PULSE_TOO_LARGE
 * over PULSE_DIRFILE_MAX. */
static pulse_status_t read_small(const struct pulse_io *io, const char *path, char *buf, size_t cap, size_t *len_out)
{
    int fd = io->open(io, path, O_RDONLY | O_CLOEXEC, 0);
    ssize_t n;

    if (fd < 0) {
        int e = errno;
        if (e == ENOENT)
            return PULSE_NOT_FOUND;
        PULSE_ERROR("open %s failed: %s", path, strerror(e));
        return pulse_status_from_errno(e);
    }
    n = pulse_io_pread_all(io, fd, buf, cap, 0);
    if (n < 0) {
        int e = errno;
        io->close(io, fd);
        PULSE_ERROR("read %s failed: %s", path, strerror(e));
        return pulse_status_from_errno(e);
    }
    io->close(io, fd);
    if ((size_t)n == cap)
        return PULSE_TOO_LARGE;
    *len_out = (size_t)n;
    return PULSE_OK;
}

static pulse_status_t replace_small(struct pulse_local *b, const char *dir, const char *name, const char *data,
                                    size_t len)
{
    if (pulse_io_replace_file(pulse_broker_io(b), dir, name, data, len) != 0) {
        int e = errno;
        PULSE_ERROR("writing %s/%s failed: %s", dir, name, strerror(e));
        return pulse_status_from_errno(e);
    }
    return PULSE_OK;
}

static void topic_path(const struct pulse_local *b, const char *topic, const char *file, char *path, size_t len)
{
    if (file != NULL)
        snprintf(path, len, "%s/%s/%s", b->topics_dir, topic, file);
    else
        snprintf(path, len, "%s/%s", b->topics_dir, topic);
}

struct unwritable {
    const struct pulse_io *io;
    const char *tree; /* the directory being listed */
    int depth;        /* levels left below it */
    char *path_out;
    size_t len;
};

static bool find_unwritable(const struct pulse_io *io, const char *tree, int depth, char *path_out, size_t len);

static int unwritable_entry(void *arg, const char *name, unsigned char type)
{
    const struct unwritable *u = arg;
    char path[PATH_MAX];

    if (snprintf(path, sizeof path, "%s/%s", u->tree, name) >= (int)sizeof path)
        return 0;
    return find_unwritable(u->io, path, type == DT_DIR ? u->depth - 1 : 0, u->path_out, u->len) ? 1 : 0;
}

/* First entry of tree (the directory itself, its subdirectories and their
 * files, two levels down) this process may not write, or false. */
static bool find_unwritable(const struct pulse_io *io, const char *tree, int depth, char *path_out, size_t len)
{
    struct unwritable u = {io, tree, depth, path_out, len};

    if (io->access(io, tree, depth > 0 ? W_OK | X_OK : W_OK) != 0 && errno == EACCES) {
        snprintf(path_out, len, "%s", tree);
        return true;
    }
    return depth > 0 && io->list_dir(io, tree, unwritable_entry, &u) == 1;
}

bool pulse_broker_datadir_explain(struct pulse_local *b, const char *topic, char *errbuf, size_t errlen)
{
    char tree[PATH_MAX];
    char path[PATH_MAX];

    topic_path(b, topic, NULL, tree, sizeof tree);
    if (!find_unwritable(pulse_broker_io(b), tree, 2, path, sizeof path))
        return false;
    pulse_errbuf_set(errbuf, errlen, "cannot open the logs of topic %s: permission denied: %s (running as uid %u)",
                     topic, path, (unsigned)geteuid());
    return true;
}

pulse_status_t pulse_broker_topic_file_write(struct pulse_local *b, const struct pulse_meta_topic *def)
{
    char buf[PULSE_DIRFILE_MAX];
    char dir[PATH_MAX];
    size_t len = 0;
    pulse_status_t st = pulse_dirfile_topic_encode(def, buf, sizeof buf, &len);

    if (st != PULSE_OK)
        return st;
    topic_path(b, def->name, NULL, dir, sizeof dir);
    return replace_small(b, dir, PULSE_BROKER_TOPIC_FILE, buf, len);
}

/* PULSE_NOT_FOUND (no file), PULSE_CORRUPT (why in errbuf) or PULSE_OK. */
static pulse_status_t topic_file_read(struct pulse_local *b, const char *topic, struct pulse_meta_topic *out, char *why,
                                      size_t whylen)
{
    char buf[PULSE_DIRFILE_MAX + 1];
    char path[PATH_MAX];
    size_t len = 0;
    pulse_status_t st;

    topic_path(b, topic, PULSE_BROKER_TOPIC_FILE, path, sizeof path);
    st = read_small(pulse_broker_io(b), path, buf, sizeof buf, &len);
    if (st == PULSE_TOO_LARGE) {
        pulse_errbuf_set(why, whylen, "larger than %d bytes", PULSE_DIRFILE_MAX);
        return PULSE_CORRUPT;
    }
    if (st != PULSE_OK) {
        pulse_errbuf_set(why, whylen, "%s", pulse_status_message(st));
        return st == PULSE_NOT_FOUND ? st : PULSE_CORRUPT;
    }
    st = pulse_dirfile_topic_decode(buf, len, out, why, whylen);
    if (st == PULSE_OK && strcmp(out->name, topic) != 0) {
        pulse_errbuf_set(why, whylen, "it names topic \"%s\"", out->name);
        st = PULSE_CORRUPT;
    }
    return st;
}

pulse_status_t pulse_broker_mark_set(struct pulse_local *b, const char *topic, const char *mark)
{
    static const char text[] = "pulsed topic marker; see docs/Storage.md\n";
    char dir[PATH_MAX];

    topic_path(b, topic, NULL, dir, sizeof dir);
    return replace_small(b, dir, mark, text, sizeof text - 1);
}

pulse_status_t pulse_broker_mark_clear(struct pulse_local *b, const char *topic, const char *mark)
{
    char dir[PATH_MAX];

    topic_path(b, topic, NULL, dir, sizeof dir);
    if (pulse_io_remove_file(pulse_broker_io(b), dir, mark) != 0) {
        int e = errno;
        PULSE_ERROR("removing %s/%s failed: %s", dir, mark, strerror(e));
        return pulse_status_from_errno(e);
    }
    return PULSE_OK;
}

pulse_status_t pulse_broker_dir_set_aside(struct pulse_local *b, const char *topic, char *aside, size_t asidelen)
{
    char path[PATH_MAX];
    uint64_t nonce = 0;

    if (getrandom(&nonce, sizeof nonce, GRND_NONBLOCK) != (ssize_t)sizeof nonce)
        nonce = (uint64_t)pulse_clock_mono_us();
    topic_path(b, topic, NULL, path, sizeof path);
    snprintf(aside, asidelen, "%s/" PULSE_BROKER_DELETED_PREFIX "%016" PRIx64, b->topics_dir, nonce);
    if (pulse_io_rename_sync(pulse_broker_io(b), path, aside, b->topics_dir) != 0) {
        int e = errno;
        PULSE_ERROR("rename %s -> %s (and fsync of %s) failed: %s", path, aside, b->topics_dir, strerror(e));
        return pulse_status_from_errno(e);
    }
    return PULSE_OK;
}

/* Sets the directory aside, then removes it. */
static pulse_status_t discard_dir(struct pulse_local *b, const char *topic)
{
    char aside[PATH_MAX];
    pulse_status_t st = pulse_broker_dir_set_aside(b, topic, aside, sizeof aside);

    if (st != PULSE_OK)
        return st;
    if (pulse_broker_remove_tree(b, aside) != 0)
        PULSE_ERROR("could not remove %s; it is removed at the next start", aside);
    pulse_broker_fsync_dir(b, b->topics_dir);
    return PULSE_OK;
}

/* ---- what a topic directory holds --------------------------------------- */

/* Partition directory names: decimal, no leading zero. */
static bool partition_name(const char *s, uint32_t *p_out)
{
    uint32_t p = 0;
    size_t len = strlen(s);

    if (len == 0 || len > 5 || (len > 1 && s[0] == '0'))
        return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        p = p * 10 + (uint32_t)(s[i] - '0');
    }
    *p_out = p;
    return true;
}

struct dir_scan {
    bool creating;
    bool deleting;
    bool holds_files;       /* any file (or unknown entry) besides the markers */
    bool records;           /* a partition log holds (or held) records */
    pulse_status_t file_st; /* topic.json: PULSE_OK, PULSE_NOT_FOUND or PULSE_CORRUPT */
    struct pulse_meta_topic file_def;
    char file_why[160];
    uint32_t nparts;   /* partition directories */
    uint32_t max_part; /* highest partition directory + 1 */
    /* What the listing of each partition directory below
     * PULSE_BROKER_MAX_PARTITIONS found (a bit per partition): listed, and
     * then whether it holds an entry, so that find_lost_partitions need
     * not list it again. */
    uint64_t listed[PULSE_BROKER_MAX_PARTITIONS / 64];
    uint64_t nonempty[PULSE_BROKER_MAX_PARTITIONS / 64];
};

/* The bitmaps above round down: a limit that is not a multiple of 64
 * would leave its last partitions without a bit (bit_set would write past
 * the array). */
_Static_assert(PULSE_BROKER_MAX_PARTITIONS % 64 == 0, "partition bitmaps need a multiple of 64 partitions");

static int any_entry(void *arg, const char *name, unsigned char type)
{
    (void)arg;
    (void)name;
    (void)type;
    return 1;
}

/* True when dir holds any entry at all. */
static bool dir_nonempty(const struct pulse_local *b, const char *path)
{
    const struct pulse_io *io = pulse_broker_io(b);

    /* Unreadable (-1): assume it holds something. */
    return io->list_dir(io, path, any_entry, NULL) != 0;
}

static void bit_set(uint64_t *bits, uint32_t i)
{
    bits[i / 64] |= (uint64_t)1 << (i % 64);
}

static bool bit_get(const uint64_t *bits, uint32_t i)
{
    return (bits[i / 64] >> (i % 64) & 1) != 0;
}

struct records_probe {
    const struct pulse_io *io;
    const char *dir;
};

/* 1 (stop) at a segment file that holds or held records. */
static int records_entry(void *arg, const char *name, unsigned char type)
{
    const struct records_probe *rp = arg;
    char file[PATH_MAX];
    struct stat sb;
    int64_t base = 0;

    (void)type;
    if (!pulse_segment_parse_name(name, &base))
        return 0;
    if (base > 0 || snprintf(file, sizeof file, "%s/%s", rp->dir, name) >= (int)sizeof file ||
        rp->io->stat(rp->io, file, false, &sb) != 0 || sb.st_size > 0)
        return 1;
    return 0;
}

/* Whether a partition directory may hold records: a segment file with
 * bytes in it, or one whose base offset is not 0 (its predecessors held
 * records, even if retention removed them). A log that was only opened has
 * one empty segment at base 0. What cannot be read counts as records: the
 * answer decides whether a directory may be removed, and nothing is removed
 * that is not proven garbage. */
static bool partition_has_records(const struct pulse_local *b, const char *path)
{
    struct records_probe rp = {pulse_broker_io(b), path};

    return rp.io->list_dir(rp.io, path, records_entry, &rp) != 0;
}

struct scan_ctx {
    struct pulse_local *b;
    const char *topic;
    struct dir_scan *sc;
};

static int scan_entry(void *arg, const char *n, unsigned char type)
{
    struct scan_ctx *c = arg;
    struct dir_scan *sc = c->sc;
    char path[PATH_MAX];
    uint32_t p;

    (void)type;
    if (strcmp(n, PULSE_BROKER_CREATE_MARK) == 0) {
        sc->creating = true;
    } else if (strcmp(n, PULSE_BROKER_DELETE_MARK) == 0) {
        sc->deleting = true;
    } else if (strncmp(n, ".tmp-", 5) == 0) {
        return 0; /* an unfinished replace: never the file itself */
    } else if (partition_name(n, &p)) {
        sc->nparts++;
        if (p + 1 > sc->max_part)
            sc->max_part = p + 1;
        topic_path(c->b, c->topic, n, path, sizeof path);
        /* Unreadable (-1): assume it holds something. */
        int listed = pulse_broker_io(c->b)->list_dir(pulse_broker_io(c->b), path, any_entry, NULL);
        if (listed != 0)
            sc->holds_files = true;
        if (listed >= 0 && p < PULSE_BROKER_MAX_PARTITIONS) {
            bit_set(sc->listed, p);
            if (listed > 0)
                bit_set(sc->nonempty, p);
        }
        if (!sc->records && partition_has_records(c->b, path))
            sc->records = true;
    } else {
        /* topic.json, or something we did not write: either way not
         * nothing. */
        sc->holds_files = true;
    }
    return 0;
}

static pulse_status_t scan_topic_dir(struct pulse_local *b, const char *topic, struct dir_scan *sc)
{
    const struct pulse_io *io = pulse_broker_io(b);
    struct scan_ctx c = {b, topic, sc};
    char path[PATH_MAX];

    memset(sc, 0, sizeof *sc);
    topic_path(b, topic, NULL, path, sizeof path);
    if (io->list_dir(io, path, scan_entry, &c) < 0) {
        int e = errno;
        PULSE_ERROR("reading directory %s failed: %s", path, strerror(e));
        return pulse_status_from_errno(e);
    }
    sc->file_st = topic_file_read(b, topic, &sc->file_def, sc->file_why, sizeof sc->file_why);
    if (sc->file_st != PULSE_OK && sc->file_st != PULSE_NOT_FOUND)
        sc->file_st = PULSE_CORRUPT;
    return PULSE_OK;
}

struct temps_ctx {
    struct pulse_local *b;
    const char *topic;
};

static int temp_entry(void *arg, const char *name, unsigned char type)
{
    const struct temps_ctx *c = arg;
    const struct pulse_io *io = pulse_broker_io(c->b);
    char path[PATH_MAX];

    (void)type;
    if (strncmp(name, ".tmp-", 5) != 0)
        return 0;
    topic_path(c->b, c->topic, name, path, sizeof path);
    if (io->unlink(io, path) != 0)
        PULSE_WARN("cannot remove %s: %s", path, strerror(errno));
    return 0;
}

/* Removes ".tmp-" files directly in a topic directory (an interrupted
 * replace of topic.json or of a marker; the file itself is intact). */
static void remove_temps(struct pulse_local *b, const char *topic)
{
    const struct pulse_io *io = pulse_broker_io(b);
    struct temps_ctx c = {b, topic};
    char path[PATH_MAX];

    topic_path(b, topic, NULL, path, sizeof path);
    (void)io->list_dir(io, path, temp_entry, &c);
}

/* ---- start-up reconciliation ------------------------------------------- */

enum dir_action {
    ACT_KEEP,          /* a topic with metadata */
    ACT_FINISH_DELETE, /* "deleting": a decided delete */
    ACT_DROP_CREATE,   /* "creating" without metadata: an interrupted create */
    ACT_DROP_EMPTY,    /* no metadata and no file at all */
    ACT_ADOPT,         /* no metadata, a valid topic.json matching the partitions */
    ACT_UNDECIDED      /* none of the above: refuse to start */
};

struct dir_entry {
    char name[PULSE_NAME_MAX + 1];
    enum dir_action act;
    struct dir_scan sc;
    const struct pulse_meta_topic *def; /* into the caller's defs, or NULL */
    char why[256];
    uint32_t lost_parts;   /* kept or adopted: partition logs that are gone */
    uint32_t first_lost;   /*   the first of them */
    bool first_lost_empty; /*   which is an empty directory (else missing) */
};

struct reconcile {
    struct dir_entry *items;
    size_t n;
    size_t cap;
    char **asides; /* __deleted-* names */
    size_t nasides;
    size_t asides_cap;
    bool *seen; /* per def: a directory exists */
};

static enum dir_action classify(const struct dir_scan *sc, const struct pulse_meta_topic *def, char *why, size_t whylen)
{
    const struct pulse_meta_topic *f = &sc->file_def;

    if (sc->deleting)
        return ACT_FINISH_DELETE;
    if (def != NULL)
        return ACT_KEEP;
    /* Nothing is appended before a create commits (the topic is not in the
     * map until then), so records beside a "creating" marker prove the
     * commit: the marker is a leftover whose removal failed, and the
     * directory is judged as if it were not there. */
    if (sc->creating && !sc->records)
        return ACT_DROP_CREATE;
    if (!sc->holds_files)
        return ACT_DROP_EMPTY;
    if (sc->file_st == PULSE_NOT_FOUND) {
        pulse_errbuf_set(why, whylen,
                         "has no metadata and no " PULSE_BROKER_TOPIC_FILE
                         " (written by an older pulsed, or copied in)");
        return ACT_UNDECIDED;
    }
    if (sc->file_st != PULSE_OK) {
        pulse_errbuf_set(why, whylen, "has no metadata and its " PULSE_BROKER_TOPIC_FILE " is damaged (%s)",
                         sc->file_why);
        return ACT_UNDECIDED;
    }
    if (f->partitions > PULSE_BROKER_MAX_PARTITIONS || f->segment_bytes < (int64_t)PULSE_PLOG_MIN_SEGMENT_BYTES ||
        f->segment_bytes > (int64_t)PULSE_PLOG_MAX_SEGMENT_BYTES) {
        pulse_errbuf_set(why, whylen, "has no metadata and its " PULSE_BROKER_TOPIC_FILE " has values out of range");
        return ACT_UNDECIDED;
    }
    if (sc->nparts != f->partitions || sc->max_part != f->partitions) {
        pulse_errbuf_set(why, whylen,
                         "has no metadata and its " PULSE_BROKER_TOPIC_FILE " says %" PRIu32 " partitions but %" PRIu32
                         " partition directories (highest %" PRId64 ") exist",
                         f->partitions, sc->nparts, (int64_t)sc->max_part - 1);
        return ACT_UNDECIDED;
    }
    return ACT_ADOPT;
}

static const struct pulse_meta_topic *find_def(const struct pulse_meta_topic *defs, size_t ndefs, const char *name,
                                               size_t *idx_out)
{
    for (size_t i = 0; i < ndefs; i++) {
        if (strcmp(defs[i].name, name) == 0) {
            *idx_out = i;
            return &defs[i];
        }
    }
    return NULL;
}

static pulse_status_t note_aside(struct reconcile *rc, const char *name)
{
    if (rc->nasides == rc->asides_cap) {
        size_t ncap = rc->asides_cap ? rc->asides_cap * 2 : 8;
        char **a = pulse_realloc(rc->asides, ncap * sizeof *a);
        if (a == NULL)
            return PULSE_NOMEM;
        rc->asides = a;
        rc->asides_cap = ncap;
    }
    rc->asides[rc->nasides] = pulse_strdup(name);
    if (rc->asides[rc->nasides] == NULL)
        return PULSE_NOMEM;
    rc->nasides++;
    return PULSE_OK;
}

static pulse_status_t grow_items(struct reconcile *rc)
{
    if (rc->n == rc->cap) {
        size_t ncap = rc->cap ? rc->cap * 2 : 16;
        struct dir_entry *items = pulse_realloc(rc->items, ncap * sizeof *items);
        if (items == NULL)
            return PULSE_NOMEM;
        rc->items = items;
        rc->cap = ncap;
    }
    return PULSE_OK;
}

/* How partition directory p of topic stands: present with files, or lost
 * (missing, a symbolic link to nowhere, or empty: a committed create
 * opened every partition's log, which leaves a segment file, and nothing
 * pulsed does removes the last one). */
enum part_state { PART_PRESENT, PART_MISSING, PART_EMPTY };

static enum part_state partition_state(struct pulse_local *b, const char *topic, const struct dir_scan *sc, uint32_t p)
{
    char path[PATH_MAX];
    char name[16];

    /* The survey's listing of it just now succeeded: it is a directory
     * (or a link to one), and the listing says whether it is empty. */
    if (p < PULSE_BROKER_MAX_PARTITIONS && bit_get(sc->listed, p))
        return bit_get(sc->nonempty, p) ? PART_PRESENT : PART_EMPTY;
    snprintf(name, sizeof name, "%" PRIu32, p);
    topic_path(b, topic, name, path, sizeof path);
    if (!is_dir(b, path))
        return PART_MISSING;
    return dir_nonempty(b, path) ? PART_PRESENT : PART_EMPTY;
}

/* Counts the partitions 0..nparts-1 of a topic pulsed keeps whose logs are
 * gone. Opening them would make an empty log and hand their offsets out a
 * second time, so the start refuses over them (refuse_lost). */
static void find_lost_partitions(struct pulse_local *b, struct dir_entry *e, uint32_t nparts)
{
    for (uint32_t p = 0; p < nparts; p++) {
        enum part_state ps = partition_state(b, e->name, &e->sc, p);
        if (ps == PART_PRESENT)
            continue;
        if (e->lost_parts == 0) {
            e->first_lost = p;
            e->first_lost_empty = ps == PART_EMPTY;
        }
        e->lost_parts++;
    }
}

static pulse_status_t note_entry(struct pulse_local *b, struct reconcile *rc, const char *name,
                                 const struct pulse_meta_topic *defs, size_t ndefs)
{
    struct dir_entry *e;
    size_t idx = 0;
    pulse_status_t st;

    if (grow_items(rc) != PULSE_OK)
        return PULSE_NOMEM;
    e = &rc->items[rc->n];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    st = scan_topic_dir(b, name, &e->sc);
    if (st != PULSE_OK)
        return st;
    e->def = find_def(defs, ndefs, name, &idx);
    if (e->def != NULL)
        rc->seen[idx] = true;
    e->act = classify(&e->sc, e->def, e->why, sizeof e->why);
    if (e->act == ACT_KEEP)
        find_lost_partitions(b, e, e->def->partitions);
    else if (e->act == ACT_ADOPT)
        find_lost_partitions(b, e, e->sc.file_def.partitions);
    rc->n++;
    return PULSE_OK;
}

static pulse_status_t note_dangling(struct reconcile *rc, const char *name, const struct pulse_meta_topic *defs,
                                    size_t ndefs)
{
    struct dir_entry *e;
    size_t idx = 0;

    if (grow_items(rc) != PULSE_OK)
        return PULSE_NOMEM;
    e = &rc->items[rc->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    e->def = find_def(defs, ndefs, name, &idx);
    if (e->def != NULL)
        rc->seen[idx] = true;
    e->act = ACT_UNDECIDED;
    pulse_errbuf_set(e->why, sizeof e->why,
                     "is a symbolic link to a directory that is not there "
                     "(a volume not mounted?)");
    return PULSE_OK;
}

struct survey_ctx {
    struct pulse_local *b;
    struct reconcile *rc;
    const struct pulse_meta_topic *defs;
    size_t ndefs;
    pulse_status_t st;
};

/* One entry of topics/; 1 (stop) once c->st is not PULSE_OK. */
static int survey_entry(void *arg, const char *n, unsigned char type)
{
    struct survey_ctx *c = arg;
    const struct pulse_io *io = pulse_broker_io(c->b);
    char path[PATH_MAX];
    struct stat sb;

    (void)type;
    if (strncmp(n, PULSE_BROKER_DELETED_PREFIX, strlen(PULSE_BROKER_DELETED_PREFIX)) == 0) {
        c->st = note_aside(c->rc, n);
        return c->st != PULSE_OK;
    }
    snprintf(path, sizeof path, "%s/%s", c->b->topics_dir, n);
    if (!pulse_broker_name_valid(n, strlen(n)) ||
        (io->stat(io, path, true, &sb) == 0 && !S_ISLNK(sb.st_mode) && !S_ISDIR(sb.st_mode))) {
        /* Not something pulsed makes: never touched. */
        PULSE_WARN("ignoring %s: not a topic directory", path);
        return 0;
    }
    /* A topic directory may be a symbolic link (to another volume); one
     * whose target is missing is an unmounted volume, not a deleted
     * topic. */
    if (!is_dir(c->b, path))
        c->st = note_dangling(c->rc, n, c->defs, c->ndefs);
    else
        c->st = note_entry(c->b, c->rc, n, c->defs, c->ndefs);
    return c->st != PULSE_OK;
}

/* Phase 1: looks at every entry of topics/ and decides; changes nothing. */
static pulse_status_t survey(struct pulse_local *b, struct reconcile *rc, const struct pulse_meta_topic *defs,
                             size_t ndefs)
{
    const struct pulse_io *io = pulse_broker_io(b);
    struct survey_ctx c = {b, rc, defs, ndefs, PULSE_OK};

    if (io->list_dir(io, b->topics_dir, survey_entry, &c) < 0) {
        int e = errno;
        PULSE_ERROR("reading directory %s failed: %s", b->topics_dir, strerror(e));
        return pulse_status_from_errno(e);
    }
    return c.st;
}

/* Refuses when any directory is undecidable: each is logged, the first one
 * named in errbuf with the command that resolves it. */
static pulse_status_t refuse_undecided(struct pulse_local *b, const struct reconcile *rc, char *errbuf, size_t errlen)
{
    const struct dir_entry *first = NULL;
    size_t count = 0;

    for (size_t i = 0; i < rc->n; i++) {
        const struct dir_entry *e = &rc->items[i];
        if (e->act != ACT_UNDECIDED)
            continue;
        PULSE_ERROR("topic directory %s/%s %s", b->topics_dir, e->name, e->why);
        if (first == NULL)
            first = e;
        count++;
    }
    if (first == NULL)
        return PULSE_OK;
    pulse_errbuf_set(errbuf, errlen,
                     "topic directory %s/%s %s, so pulsed cannot tell what it holds "
                     "(%zu such director%s; nothing was changed). Adopt it as a topic with "
                     "\"pulsed --data-dir %s --adopt-topic %s [--partitions N] [--cleanup delete|compact]\", "
                     "or move it out of %s; see docs/Operations.md",
                     b->topics_dir, first->name, first->why, count, count == 1 ? "y" : "ies", b->data_dir, first->name,
                     b->topics_dir);
    return PULSE_INVALID;
}

/* Refuses when a topic pulsed would keep has partition logs that are gone
 * (a missing or empty partition directory): made again empty, the log
 * would start over at its first offset and hand out offsets its consumers
 * have already seen. pulsed cannot tell "not there now" (a volume, a move)
 * from "gone", so it changes nothing and names the ways out. */
static pulse_status_t refuse_lost(struct pulse_local *b, const struct reconcile *rc, char *errbuf, size_t errlen)
{
    const struct dir_entry *first = NULL;
    size_t count = 0;

    for (size_t i = 0; i < rc->n; i++) {
        const struct dir_entry *e = &rc->items[i];
        if (e->lost_parts == 0)
            continue;
        PULSE_ERROR("topic %s: %" PRIu32 " partition log(s) gone, the first %s/%s/%" PRIu32 " (%s)", e->name,
                    e->lost_parts, b->topics_dir, e->name, e->first_lost,
                    e->first_lost_empty ? "an empty directory" : "no such directory");
        if (first == NULL)
            first = e;
        count += e->lost_parts;
    }
    if (first == NULL)
        return PULSE_OK;
    pulse_errbuf_set(errbuf, errlen,
                     "partition directory %s/%s/%" PRIu32 " %s, but the metadata store names the partition "
                     "(%zu such partition(s); a volume not mounted? a directory moved?). pulsed will not make it "
                     "again empty: its offsets would be handed out a second time. Nothing was changed. Put the "
                     "directory back, or, if its records are gone for good, accept the loss with \"pulsed "
                     "--data-dir %s --recreate-partition %s/%" PRIu32 " [--start-offset N]\" (once per partition; "
                     "the partition starts again empty, after its consumers' cursors); see docs/Operations.md",
                     b->topics_dir, first->name, first->first_lost,
                     first->first_lost_empty ? "is empty (its log files are gone)" : "is missing", count, b->data_dir,
                     first->name, first->first_lost);
    return PULSE_INVALID;
}

static bool same_def(const struct pulse_meta_topic *a, const struct pulse_meta_topic *b)
{
    return strcmp(a->name, b->name) == 0 && a->partitions == b->partitions && a->cleanup == b->cleanup &&
           a->compression == b->compression && a->retention_ms == b->retention_ms &&
           a->retention_bytes == b->retention_bytes && a->segment_bytes == b->segment_bytes &&
           a->created_at_ms == b->created_at_ms;
}

/*
 * A topic with metadata: its definition from the two copies. Only retention
 * and compression change after a create, and a change writes topic.json
 * before the store
 * (pulse_broker_topic_set_retention), so where both are readable the file's
 * retention is never older than the store's: it is the newer of the two
 * (a crash between the writes leaves an unanswered change applied; a store
 * that silently lost the record gets the answered one back). Everything
 * else was written to both before the create committed and never changes:
 * there the store is taken, and the file rewritten if it differs.
 */
static pulse_status_t keep_topic(struct pulse_local *b, struct dir_entry *e, struct pulse_broker_open_report *rep)
{
    struct pulse_meta_topic def = *e->def;
    const struct pulse_meta_topic *f = &e->sc.file_def;
    pulse_status_t st;

    if (e->sc.creating) {
        /* The create committed; only the marker's removal was cut short. */
        st = pulse_broker_mark_clear(b, e->name, PULSE_BROKER_CREATE_MARK);
        if (st != PULSE_OK)
            return st;
    }
    remove_temps(b, e->name);
    /* Compression changes like retention (the same write order): the
     * file's is the newer too. */
    if (e->sc.file_st == PULSE_OK && (f->retention_ms != def.retention_ms ||
                                      f->retention_bytes != def.retention_bytes || f->compression != def.compression)) {
        PULSE_WARN("topic %s: the metadata store had retention_ms=%" PRId64 " retention_bytes=%" PRId64
                   " compression=%s, %s the newer retention_ms=%" PRId64 " retention_bytes=%" PRId64
                   " compression=%s; the store is updated",
                   e->name, def.retention_ms, def.retention_bytes, def.compression == 1 ? "zlib" : "none",
                   PULSE_BROKER_TOPIC_FILE, f->retention_ms, f->retention_bytes, f->compression == 1 ? "zlib" : "none");
        def.retention_ms = f->retention_ms;
        def.retention_bytes = f->retention_bytes;
        def.compression = f->compression;
        st = pulse_meta_topic_put(b->meta, &def);
        if (st != PULSE_OK)
            return st;
    }
    if (e->sc.file_st == PULSE_OK && same_def(f, &def))
        return PULSE_OK;
    st = pulse_broker_topic_file_write(b, &def);
    if (st != PULSE_OK)
        return st;
    if (e->sc.file_st == PULSE_NOT_FOUND) {
        PULSE_INFO("topic %s: wrote %s from the metadata store (a topic directory of an older version)", e->name,
                   PULSE_BROKER_TOPIC_FILE);
        rep->migrated_topics++;
    } else if (e->sc.file_st == PULSE_OK) {
        PULSE_WARN("topic %s: %s disagreed with the metadata store on a setting that never changes; rewritten "
                   "from the store",
                   e->name, PULSE_BROKER_TOPIC_FILE);
    } else {
        PULSE_WARN("topic %s: %s was damaged (%s); rewritten from the metadata store", e->name, PULSE_BROKER_TOPIC_FILE,
                   e->sc.file_why);
    }
    return PULSE_OK;
}

static pulse_status_t adopt_topic(struct pulse_local *b, struct dir_entry *e, struct pulse_broker_open_report *rep)
{
    const struct pulse_meta_topic *f = &e->sc.file_def;
    pulse_status_t st;

    remove_temps(b, e->name);
    st = pulse_meta_topic_create(b->meta, f);
    if (st != PULSE_OK)
        return st;
    /* After the commit, as a create does: a crash in between leaves the
     * marker beside metadata (and records), which the next start clears. */
    if (e->sc.creating) {
        st = pulse_broker_mark_clear(b, e->name, PULSE_BROKER_CREATE_MARK);
        if (st != PULSE_OK)
            return st;
    }
    PULSE_WARN("adopted topic %s from %s/%s/%s: it had no metadata (the store was lost or damaged)%s; "
               "partitions=%" PRIu32 " cleanup=%s retention_ms=%" PRId64 " retention_bytes=%" PRId64
               " segment_bytes=%" PRId64 "; its records are kept as they are, its consumer cursors are not known",
               f->name, b->topics_dir, f->name, PULSE_BROKER_TOPIC_FILE,
               e->sc.creating ? "; its leftover \"" PULSE_BROKER_CREATE_MARK "\" marker was removed: its records "
                                "prove the create committed"
                              : "",
               f->partitions, f->cleanup == 1 ? "compact" : "delete", f->retention_ms, f->retention_bytes,
               f->segment_bytes);
    rep->adopted_topics++;
    return PULSE_OK;
}

static pulse_status_t act_on(struct pulse_local *b, struct dir_entry *e, struct pulse_broker_open_report *rep)
{
    pulse_status_t st = PULSE_OK;

    switch (e->act) {
    case ACT_KEEP:
        return keep_topic(b, e, rep);
    case ACT_ADOPT:
        return adopt_topic(b, e, rep);
    case ACT_FINISH_DELETE:
        /* Metadata first: once it is gone the directory is only garbage. */
        if (e->def != NULL)
            st = pulse_meta_topic_delete(b->meta, e->name, NULL);
        if (st == PULSE_OK)
            st = discard_dir(b, e->name);
        if (st == PULSE_OK)
            PULSE_INFO("finished the interrupted delete of topic %s", e->name);
        break;
    case ACT_DROP_CREATE:
        st = discard_dir(b, e->name);
        if (st == PULSE_OK)
            PULSE_INFO("removed %s/%s: a topic create that never committed", b->topics_dir, e->name);
        break;
    case ACT_DROP_EMPTY:
        st = discard_dir(b, e->name);
        if (st == PULSE_OK)
            PULSE_INFO("removed %s/%s: an empty directory without metadata", b->topics_dir, e->name);
        break;
    case ACT_UNDECIDED:
        return PULSE_INVALID;
    }
    if (st == PULSE_OK)
        rep->deleted_leftovers++;
    return st;
}

/* Lists up to a few topic names, then how many more, into buf. */
static void name_list(char *buf, size_t len, const struct pulse_meta_topic *defs, size_t ndefs, const bool *skip)
{
    size_t shown = 0, total = 0, used = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < ndefs; i++) {
        if (skip != NULL && skip[i])
            continue;
        total++;
        if (shown < 5 && used < len) {
            int n = snprintf(buf + used, len - used, "%s%s", shown ? ", " : "", defs[i].name);
            used += n > 0 ? (size_t)n : 0;
            shown++;
        }
    }
    if (total > shown && used < len)
        snprintf(buf + used, len - used, " and %zu more", total - shown);
}

/* The sentence of a refusal over missing topic directories. */
static pulse_status_t refuse_missing(struct pulse_local *b, bool no_topics_dir, const struct pulse_meta_topic *defs,
                                     size_t ndefs, const bool *seen, char *errbuf, size_t errlen)
{
    char names[512];
    const char *first = NULL;
    size_t count = 0;

    for (size_t i = 0; i < ndefs; i++) {
        if (seen != NULL && seen[i])
            continue;
        PULSE_ERROR("topic %s has metadata but no directory %s/%s", defs[i].name, b->topics_dir, defs[i].name);
        if (first == NULL)
            first = defs[i].name;
        count++;
    }
    name_list(names, sizeof names, defs, ndefs, seen);
    pulse_errbuf_set(errbuf, errlen,
                     "%s%sthe metadata store names %zu topic(s) whose directories are missing from %s: %s "
                     "(a volume not mounted? a directory moved?). Nothing was changed: their metadata and "
                     "consumer cursors are kept. Put the directories back, or, for a topic that is gone "
                     "for good, forget it with \"pulsed --data-dir %s --forget-topic %s\" (once per topic); see "
                     "docs/Operations.md",
                     no_topics_dir ? b->topics_dir : "", no_topics_dir ? " does not exist, but " : "", count,
                     b->topics_dir, names, b->data_dir, first);
    return PULSE_INVALID;
}

/* topics/ itself: made when missing only if the store names no topic (a
 * first start, or every topic deleted); otherwise its absence is what an
 * unmounted volume looks like, and pulsed refuses rather than forget every
 * topic and cursor. */
static pulse_status_t topics_dir_ready(struct pulse_local *b, const struct pulse_meta_topic *defs, size_t ndefs,
                                       char *errbuf, size_t errlen)
{
    if (path_present(b, b->topics_dir))
        return PULSE_OK;
    if (ndefs == 0)
        return usable_dir(b, b->topics_dir, errbuf, errlen);
    return refuse_missing(b, true, defs, ndefs, NULL, errbuf, errlen);
}

/* Topics whose metadata exists but whose directory does not. pulsed cannot
 * tell a directory that is not there now (an unmounted volume, a move)
 * from data that is gone, and guessing "gone" would cost the topic's
 * metadata and its consumers' cursors: refused, naming them and the two
 * ways out. (No delete pulsed runs leaves this: the "deleting" marker
 * stays in the directory until the metadata is gone.) */
static pulse_status_t refuse_dirless(struct pulse_local *b, const struct reconcile *rc,
                                     const struct pulse_meta_topic *defs, size_t ndefs, char *errbuf, size_t errlen)
{
    for (size_t i = 0; i < ndefs; i++)
        if (!rc->seen[i])
            return refuse_missing(b, false, defs, ndefs, rc->seen, errbuf, errlen);
    return PULSE_OK;
}

static void reconcile_free(struct reconcile *rc)
{
    pulse_free(rc->items);
    for (size_t i = 0; i < rc->nasides; i++)
        pulse_free(rc->asides[i]);
    pulse_free(rc->asides);
    pulse_free(rc->seen);
}

/* The closing line of a rebuild: what came back, and that cursors lost
 * with the store are not made up. */
static void report_rebuild(struct pulse_local *b, const struct pulse_broker_open_report *rep)
{
    uint64_t cursors = 0;

    if (rep->adopted_topics == 0 && !rep->identity_restored && !rep->metadata_damaged)
        return;
    if (pulse_meta_cursor_count(b->meta, &cursors) != PULSE_OK)
        cursors = 0;
    PULSE_WARN("the metadata store was incomplete and was rebuilt from the data directory: %" PRIu32
               " topic(s) adopted, identity %s; consumer cursors lost with the store cannot be recovered and are "
               "not recreated (%" PRIu64 " cursor(s) remain; consumers without one start where their client says)",
               rep->adopted_topics, rep->identity_restored ? "restored from " PULSE_BROKER_IDENTITY_FILE : "kept",
               cursors);
}

pulse_status_t pulse_broker_datadir_reconcile(struct pulse_local *b, struct pulse_meta_topic **defs, size_t *ndefs,
                                              struct pulse_broker_open_report *rep, char *errbuf, size_t errlen)
{
    pulse_status_t st;
    struct reconcile rc;
    char path[PATH_MAX];

    memset(&rc, 0, sizeof rc);
    st = topics_dir_ready(b, *defs, *ndefs, errbuf, errlen);
    if (st != PULSE_OK)
        return st;
    rc.seen = pulse_calloc(*ndefs + 1, sizeof *rc.seen);
    if (rc.seen == NULL)
        return PULSE_NOMEM;
    st = survey(b, &rc, *defs, *ndefs);
    if (st != PULSE_OK) {
        pulse_errbuf_set(errbuf, errlen, "cannot scan %s: %s", b->topics_dir, pulse_status_message(st));
        goto out;
    }
    st = refuse_dirless(b, &rc, *defs, *ndefs, errbuf, errlen);
    if (st == PULSE_OK)
        st = refuse_undecided(b, &rc, errbuf, errlen);
    if (st == PULSE_OK)
        st = refuse_lost(b, &rc, errbuf, errlen);
    if (st != PULSE_OK)
        goto out;
    for (size_t i = 0; i < rc.nasides; i++) {
        snprintf(path, sizeof path, "%s/%s", b->topics_dir, rc.asides[i]);
        PULSE_INFO("removing %s left by an interrupted topic delete", path);
        if (pulse_broker_remove_tree(b, path) == 0)
            rep->deleted_leftovers++;
    }
    if (rc.nasides > 0)
        pulse_broker_fsync_dir(b, b->topics_dir);
    for (size_t i = 0; i < rc.n && st == PULSE_OK; i++) {
        st = act_on(b, &rc.items[i], rep);
        if (st != PULSE_OK)
            pulse_errbuf_set(errbuf, errlen, "cannot reconcile %s/%s with the metadata store: %s", b->topics_dir,
                             rc.items[i].name, pulse_status_message(st));
    }
    if (st != PULSE_OK)
        goto out;
    /* The store changed (adoptions, finished deletes): read it again, in
     * name order. */
    pulse_free(*defs);
    *defs = NULL;
    *ndefs = 0;
    st = pulse_meta_topic_list(b->meta, defs, ndefs);
    if (st != PULSE_OK) {
        pulse_errbuf_set(errbuf, errlen, "cannot read topic metadata: %s", pulse_status_message(st));
        goto out;
    }
    report_rebuild(b, rep);
out:
    reconcile_free(&rc);
    return st;
}

/* ---- identity and the store --------------------------------------------- */

/* PULSE_OK, PULSE_NOT_FOUND (no file) or PULSE_CORRUPT (why says why). */
static pulse_status_t identity_read(struct pulse_local *b, const char *path, struct pulse_meta_identity *out, char *why,
                                    size_t whylen)
{
    char buf[PULSE_DIRFILE_MAX + 1];
    size_t len = 0;
    pulse_status_t st = read_small(pulse_broker_io(b), path, buf, sizeof buf, &len);

    if (st == PULSE_NOT_FOUND)
        return st;
    if (st != PULSE_OK) {
        pulse_errbuf_set(why, whylen, "%s", st == PULSE_TOO_LARGE ? "too large" : pulse_status_message(st));
        return PULSE_CORRUPT;
    }
    return pulse_dirfile_identity_decode(buf, len, out, why, whylen) == PULSE_OK ? PULSE_OK : PULSE_CORRUPT;
}

static pulse_status_t identity_write(struct pulse_local *b)
{
    struct pulse_meta_identity id;
    char buf[PULSE_DIRFILE_MAX];
    size_t len = 0;
    pulse_status_t st;

    memset(&id, 0, sizeof id);
    snprintf(id.cluster_id, sizeof id.cluster_id, "%s", pulse_meta_cluster_id(b->meta));
    snprintf(id.broker_id, sizeof id.broker_id, "%s", pulse_meta_broker_id(b->meta));
    st = pulse_dirfile_identity_encode(&id, buf, sizeof buf, &len);
    if (st == PULSE_OK)
        st = replace_small(b, b->data_dir, PULSE_BROKER_IDENTITY_FILE, buf, len);
    return st;
}

/* The sentence for a store that would not open. */
static void store_error(struct pulse_local *b, pulse_status_t st, const struct pulse_meta_open_report *mrep,
                        pulse_status_t fst, const char *idpath, const char *why, const char *merr, char *errbuf,
                        size_t errlen)
{
    if (st == PULSE_BUSY)
        pulse_errbuf_set(errbuf, errlen, "data directory %s is in use by another process", b->data_dir);
    else if (mrep->identity_mismatch)
        pulse_errbuf_set(errbuf, errlen,
                         "the metadata store %s/meta belongs to another data directory: %s (from %s). Put this "
                         "directory's own meta/ back, or move %s/meta aside to rebuild it from the data directory "
                         "(see docs/Operations.md)",
                         b->data_dir, merr, idpath, b->data_dir);
    else if (st == PULSE_NOT_FOUND && fst == PULSE_CORRUPT)
        pulse_errbuf_set(errbuf, errlen,
                         "%s is damaged (%s) and the metadata store holds no identity, so the cluster id cannot be "
                         "recovered: restore %s from a backup, or remove it to start under a new cluster id",
                         idpath, why, idpath);
    else if (st == PULSE_CORRUPT)
        pulse_errbuf_set(errbuf, errlen,
                         "%s; pulsed will not start on a damaged metadata store: run \"pulsed --data-dir %s "
                         "--repair-metadata\" (LevelDB's repair, then a rebuild from the data directory; "
                         "see docs/Operations.md)",
                         merr, b->data_dir);
    else
        pulse_errbuf_set(errbuf, errlen, "%s", merr);
}

pulse_status_t pulse_broker_datadir_open_store(struct pulse_local *b, struct pulse_broker_open_report *rep,
                                               char *errbuf, size_t errlen)
{
    struct pulse_meta_identity file_id;
    struct pulse_meta_open_opts opts;
    struct pulse_meta_open_report mrep;
    char idpath[PATH_MAX];
    char metadir[PATH_MAX];
    char merr[512] = "";
    char why[160] = "";
    pulse_status_t fst;
    pulse_status_t st;

    memset(&opts, 0, sizeof opts);
    memset(&mrep, 0, sizeof mrep);
    snprintf(idpath, sizeof idpath, "%s/%s", b->data_dir, PULSE_BROKER_IDENTITY_FILE);
    snprintf(metadir, sizeof metadir, "%s/meta", b->data_dir);
    fst = identity_read(b, idpath, &file_id, why, sizeof why);
    if (fst == PULSE_OK)
        opts.identity = &file_id;
    else if (fst == PULSE_CORRUPT)
        opts.identity_required = true; /* never draw a new id over a damaged copy */
    st = pulse_meta_open_ex(metadir, &opts, &b->meta, &mrep, merr, sizeof merr);
    if (st != PULSE_OK) {
        b->meta = NULL;
        store_error(b, st, &mrep, fst, idpath, why, merr, errbuf, errlen);
        return st;
    }
    rep->metadata_damaged = mrep.damage_lines > 0;
    if (mrep.cluster_origin == PULSE_META_ID_ADOPTED || mrep.broker_origin == PULSE_META_ID_ADOPTED) {
        rep->identity_restored = true;
        PULSE_WARN("the metadata store %s had no identity (it was lost or damaged): restored cluster %s and broker %s "
                   "from %s",
                   metadir, pulse_meta_cluster_id(b->meta), pulse_meta_broker_id(b->meta), idpath);
    }
    if (fst == PULSE_OK)
        return PULSE_OK;
    /* First start, a data directory of an older version, or a damaged copy:
     * the store's identity is written to the data directory. */
    st = identity_write(b);
    if (st != PULSE_OK) {
        pulse_errbuf_set(errbuf, errlen, "cannot write %s: %s", idpath, pulse_status_message(st));
        return st;
    }
    if (fst == PULSE_CORRUPT)
        PULSE_WARN("%s was damaged (%s); rewritten from the metadata store", idpath, why);
    else
        PULSE_INFO("wrote %s (cluster %s, broker %s)", idpath, pulse_meta_cluster_id(b->meta),
                   pulse_meta_broker_id(b->meta));
    return PULSE_OK;
}

/* ---- offline modes: --adopt-topic and --repair-metadata ----------------- */

/* A broker with only its paths, configuration and metadata store: what the
 * offline modes need (no logs, no threads). */
static pulse_status_t shell_open(const struct pulse_broker_config *cfg, struct pulse_local *b,
                                 struct pulse_broker_open_report *rep, char *errbuf, size_t errlen)
{
    char path[PATH_MAX];
    pulse_status_t st;

    memset(b, 0, sizeof *b);
    b->cfg = *cfg;
    b->data_dir = pulse_strdup(cfg->data_dir);
    snprintf(path, sizeof path, "%s/topics", cfg->data_dir);
    b->topics_dir = pulse_strdup(path);
    if (b->data_dir == NULL || b->topics_dir == NULL)
        return PULSE_NOMEM;
    b->cfg.data_dir = b->data_dir;
    st = pulse_broker_datadir_prepare(b, errbuf, errlen);
    if (st == PULSE_OK)
        st = pulse_broker_datadir_open_store(b, rep, errbuf, errlen);
    return st;
}

static void shell_close(struct pulse_local *b)
{
    pulse_meta_close(b->meta);
    pulse_free(b->data_dir);
    pulse_free(b->topics_dir);
    memset(b, 0, sizeof *b);
}

/* The definition --adopt-topic writes: partitions from the directories,
 * the rest from the request or the configured topic defaults. */
static pulse_status_t adopt_def(struct pulse_local *b, const struct pulse_topic_spec *spec, const struct dir_scan *sc,
                                struct pulse_meta_topic *def, char *errbuf, size_t errlen)
{
    char dir[PATH_MAX];

    topic_path(b, spec->name, NULL, dir, sizeof dir);
    if (sc->nparts == 0 || sc->nparts != sc->max_part) {
        pulse_errbuf_set(errbuf, errlen,
                         "the partition directories of %s are not 0..N-1 (%" PRIu32 " found, highest %" PRId64
                         "): move the stray ones aside first",
                         dir, sc->nparts, (int64_t)sc->max_part - 1);
        return PULSE_INVALID;
    }
    if (spec->partitions >= 0 && (uint32_t)spec->partitions != sc->nparts) {
        pulse_errbuf_set(errbuf, errlen,
                         "--partitions %" PRId32 " does not match the %" PRIu32 " partition directories of %s",
                         spec->partitions, sc->nparts, dir);
        return PULSE_INVALID;
    }
    memset(def, 0, sizeof *def);
    snprintf(def->name, sizeof def->name, "%s", spec->name);
    def->partitions = sc->nparts;
    def->cleanup = spec->cleanup == PULSE_CLEANUP_COMPACT ? 1 : 0;
    def->retention_ms = spec->retention_ms >= 0 ? spec->retention_ms : b->cfg.default_retention_ms;
    def->retention_bytes = spec->retention_bytes >= 0 ? spec->retention_bytes : b->cfg.default_retention_bytes;
    def->segment_bytes = spec->segment_bytes >= 0 ? spec->segment_bytes : (int64_t)b->cfg.segment_max_bytes;
    def->created_at_ms = pulse_clock_wall_ms();
    if (sc->nparts > PULSE_BROKER_MAX_PARTITIONS || def->segment_bytes < (int64_t)PULSE_PLOG_MIN_SEGMENT_BYTES ||
        def->segment_bytes > (int64_t)PULSE_PLOG_MAX_SEGMENT_BYTES) {
        pulse_errbuf_set(errbuf, errlen, "the definition for %s is out of range", dir);
        return PULSE_INVALID;
    }
    return PULSE_OK;
}

/* What stands in the way of adopting: metadata, a marker, no directory. */
static pulse_status_t adopt_check(struct pulse_local *b, const char *name, struct dir_scan *sc, char *errbuf,
                                  size_t errlen)
{
    struct pulse_meta_topic existing;
    char dir[PATH_MAX];
    pulse_status_t st;

    topic_path(b, name, NULL, dir, sizeof dir);
    st = pulse_meta_topic_get(b->meta, name, &existing);
    if (st == PULSE_OK) {
        pulse_errbuf_set(errbuf, errlen, "topic %s has metadata: there is nothing to adopt", name);
        return PULSE_EXISTS;
    }
    if (st != PULSE_NOT_FOUND) {
        pulse_errbuf_set(errbuf, errlen, "cannot read the metadata of %s: %s", name, pulse_status_message(st));
        return st;
    }
    if (!is_dir(b, dir)) {
        pulse_errbuf_set(errbuf, errlen, "no topic directory %s", dir);
        return PULSE_TOPIC_NOT_FOUND;
    }
    st = scan_topic_dir(b, name, sc);
    if (st != PULSE_OK) {
        pulse_errbuf_set(errbuf, errlen, "cannot read %s: %s", dir, pulse_status_message(st));
        return st;
    }
    /* A "creating" marker beside records is a leftover (classify). */
    if (sc->deleting || (sc->creating && !sc->records)) {
        pulse_errbuf_set(errbuf, errlen, "%s holds an unfinished topic %s (file \"%s\"): the next start removes it",
                         dir, sc->deleting ? "delete" : "create",
                         sc->deleting ? PULSE_BROKER_DELETE_MARK : PULSE_BROKER_CREATE_MARK);
        return PULSE_INVALID;
    }
    return PULSE_OK;
}

pulse_status_t pulse_broker_adopt_topic(const struct pulse_broker_config *cfg, const struct pulse_topic_spec *spec,
                                        struct pulse_topic_info *out, char *errbuf, size_t errlen)
{
    struct pulse_local shell;
    struct pulse_broker_open_report rep;
    struct pulse_meta_topic def;
    struct dir_scan sc;
    pulse_status_t st;

    memset(&rep, 0, sizeof rep);
    if (errbuf != NULL && errlen > 0)
        errbuf[0] = '\0';
    if (cfg == NULL || cfg->data_dir == NULL || spec == NULL || !pulse_broker_cname_valid(spec->name)) {
        pulse_errbuf_set(errbuf, errlen, "not a valid topic name");
        return PULSE_INVALID_NAME;
    }
    st = shell_open(cfg, &shell, &rep, errbuf, errlen);
    if (st == PULSE_OK)
        st = adopt_check(&shell, spec->name, &sc, errbuf, errlen);
    if (st == PULSE_OK)
        st = adopt_def(&shell, spec, &sc, &def, errbuf, errlen);
    if (st == PULSE_OK) {
        st = pulse_broker_topic_file_write(&shell, &def);
        if (st != PULSE_OK)
            pulse_errbuf_set(errbuf, errlen, "cannot write %s/%s/%s: %s", shell.topics_dir, def.name,
                             PULSE_BROKER_TOPIC_FILE, pulse_status_message(st));
    }
    if (st == PULSE_OK && out != NULL) {
        memset(out, 0, sizeof *out);
        snprintf(out->name, sizeof out->name, "%s", def.name);
        out->partitions = def.partitions;
        out->cleanup = def.cleanup == 1 ? PULSE_CLEANUP_COMPACT : PULSE_CLEANUP_DELETE;
        out->retention_ms = def.retention_ms;
        out->retention_bytes = def.retention_bytes;
        out->segment_bytes = def.segment_bytes;
        out->created_at_ms = def.created_at_ms;
        out->compression = def.compression == 1 ? PULSE_COMPRESSION_ZLIB : PULSE_COMPRESSION_NONE;
    }
    shell_close(&shell);
    return st;
}

pulse_status_t pulse_broker_forget_topic(const struct pulse_broker_config *cfg, const char *name, size_t *cursors_out,
                                         char *errbuf, size_t errlen)
{
    struct pulse_local shell;
    struct pulse_broker_open_report rep;
    struct pulse_meta_topic def;
    char dir[PATH_MAX];
    size_t cursors = 0;
    pulse_status_t st;

    memset(&rep, 0, sizeof rep);
    if (errbuf != NULL && errlen > 0)
        errbuf[0] = '\0';
    if (cfg == NULL || cfg->data_dir == NULL || !pulse_broker_cname_valid(name)) {
        pulse_errbuf_set(errbuf, errlen, "not a valid topic name");
        return PULSE_INVALID_NAME;
    }
    st = shell_open(cfg, &shell, &rep, errbuf, errlen);
    if (st != PULSE_OK)
        goto out;
    topic_path(&shell, name, NULL, dir, sizeof dir);
    st = pulse_meta_topic_get(shell.meta, name, &def);
    if (st == PULSE_NOT_FOUND) {
        pulse_errbuf_set(errbuf, errlen, "the metadata store has no topic %s", name);
        st = PULSE_TOPIC_NOT_FOUND;
        goto out;
    }
    if (st != PULSE_OK) {
        pulse_errbuf_set(errbuf, errlen, "cannot read the metadata of %s: %s", name, pulse_status_message(st));
        goto out;
    }
    /* Only what the start refuses over: a topic whose directory is there
     * is deleted through the API, never forgotten behind its data's back. */
    if (path_present(&shell, dir)) {
        pulse_errbuf_set(errbuf, errlen,
                         "%s exists: --forget-topic is for a topic whose directory is gone; delete the topic "
                         "through the API (DELETE /v1/topics/%s) instead",
                         dir, name);
        st = PULSE_EXISTS;
        goto out;
    }
    st = pulse_meta_topic_delete(shell.meta, name, &cursors);
    if (st != PULSE_OK) {
        pulse_errbuf_set(errbuf, errlen, "cannot remove the metadata of %s: %s", name, pulse_status_message(st));
        goto out;
    }
    PULSE_WARN("forgot topic %s: its metadata and %zu consumer cursor(s) were removed (its directory %s was "
               "missing)",
               name, cursors, dir);
    if (cursors_out != NULL)
        *cursors_out = cursors;
out:
    shell_close(&shell);
    return st;
}

/* ---- offline mode: --recreate-partition ---------------------------------- */

/* The highest offset any consumer committed on topic/p (-1: none), and how
 * many cursors there are on it. A cursor is committed only at or below the
 * high watermark, so it proves the log reached it. */
static pulse_status_t highest_cursor(struct pulse_meta *meta, const char *topic, uint32_t p, int64_t *max_out,
                                     size_t *count_out)
{
    char **names = NULL;
    size_t n = 0;
    pulse_status_t st = pulse_meta_consumer_list(meta, &names, &n);

    *max_out = -1;
    *count_out = 0;
    for (size_t i = 0; i < n && st == PULSE_OK; i++) {
        int64_t off = 0;
        st = pulse_meta_cursor_get(meta, names[i], topic, p, &off);
        if (st == PULSE_NOT_FOUND) {
            st = PULSE_OK;
            continue;
        }
        if (st != PULSE_OK)
            break;
        (*count_out)++;
        if (off > *max_out)
            *max_out = off;
    }
    pulse_meta_names_free(names, n);
    return st;
}

/* What must hold before a partition is made again: the topic and the
 * partition in the store, the topic directory there, the partition's
 * directory missing or empty. *make_out: whether dir must be made. */
static pulse_status_t recreate_check(struct pulse_local *b, const char *topic, uint32_t p, const char *dir,
                                     bool *make_out, struct pulse_meta_topic *def, char *errbuf, size_t errlen)
{
    char tdir[PATH_MAX];
    pulse_status_t st = pulse_meta_topic_get(b->meta, topic, def);

    if (st == PULSE_NOT_FOUND) {
        pulse_errbuf_set(errbuf, errlen, "the metadata store has no topic %s", topic);
        return PULSE_TOPIC_NOT_FOUND;
    }
    if (st != PULSE_OK) {
        pulse_errbuf_set(errbuf, errlen, "cannot read the metadata of %s: %s", topic, pulse_status_message(st));
        return st;
    }
    if (p >= def->partitions) {
        pulse_errbuf_set(errbuf, errlen, "topic %s has %" PRIu32 " partition(s): there is no partition %" PRIu32, topic,
                         def->partitions, p);
        return PULSE_PARTITION_NOT_FOUND;
    }
    topic_path(b, topic, NULL, tdir, sizeof tdir);
    if (!is_dir(b, tdir)) {
        pulse_errbuf_set(errbuf, errlen,
                         "the topic directory %s is missing: put it back, or forget the whole topic with "
                         "\"pulsed --data-dir %s --forget-topic %s\"",
                         tdir, b->data_dir, topic);
        return PULSE_TOPIC_NOT_FOUND;
    }
    *make_out = !path_present(b, dir);
    if (*make_out)
        return PULSE_OK;
    if (!is_dir(b, dir)) {
        pulse_errbuf_set(errbuf, errlen,
                         "%s is not a directory (a symbolic link to a volume not mounted?): mount "
                         "it, or remove it first",
                         dir);
        return PULSE_EXISTS;
    }
    if (dir_nonempty(b, dir)) {
        pulse_errbuf_set(errbuf, errlen, "%s holds files: its log is not lost, there is nothing to recreate", dir);
        return PULSE_EXISTS;
    }
    return PULSE_OK;
}

/* Makes dir (when make) holding one empty segment at base start, then
 * opens and closes the log there, which lets the engine add the rest and
 * proves that its log end is start. */
static pulse_status_t recreate_log(struct pulse_local *b, const struct pulse_meta_topic *def, const char *dir,
                                   bool make, int64_t start, char *errbuf, size_t errlen)
{
    const struct pulse_io *io = pulse_broker_io(b);
    struct pulse_plog_config pcfg;
    struct pulse_plog *plog = NULL;
    char tdir[PATH_MAX];
    char *seg = NULL;
    pulse_status_t st = PULSE_OK;

    topic_path(b, def->name, NULL, tdir, sizeof tdir);
    if (make && io->mkdir(io, dir, 0755) != 0) {
        int e = errno;
        st = dir_error(dir, e, errbuf, errlen);
        goto out;
    }
    if (make && pulse_broker_fsync_dir(b, tdir) != 0) {
        pulse_errbuf_set(errbuf, errlen, "cannot fsync %s", tdir);
        st = PULSE_IO;
        goto out;
    }
    seg = pulse_segment_path(dir, start, "log");
    if (seg == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    if (pulse_io_replace_file(io, dir, strrchr(seg, '/') + 1, "", 0) != 0) {
        int e = errno;
        pulse_errbuf_set(errbuf, errlen, "cannot write %s: %s", seg, strerror(e));
        st = pulse_status_from_errno(e);
        goto out;
    }
    pulse_plog_config_init(&pcfg);
    pcfg.segment_max_bytes = (uint64_t)def->segment_bytes;
    pcfg.io = b->cfg.io;
    st = pulse_plog_open(dir, &pcfg, &plog, NULL);
    if (st == PULSE_OK && pulse_plog_log_end(plog) != start) {
        pulse_errbuf_set(errbuf, errlen, "the log made in %s ends at %" PRId64 ", not %" PRId64, dir,
                         pulse_plog_log_end(plog), start);
        st = PULSE_CORRUPT;
    }
    if (plog != NULL) {
        pulse_status_t cst = pulse_plog_close(plog);
        st = st == PULSE_OK ? cst : st;
    }
    if (st != PULSE_OK && errbuf != NULL && errbuf[0] == '\0')
        pulse_errbuf_set(errbuf, errlen, "cannot open the log made in %s: %s", dir, pulse_status_message(st));
out:
    pulse_free(seg);
    return st;
}

pulse_status_t pulse_broker_recreate_partition(const struct pulse_broker_config *cfg, const char *topic,
                                               uint32_t partition, int64_t start_offset,
                                               struct pulse_broker_recreate_report *out, char *errbuf, size_t errlen)
{
    struct pulse_local shell;
    struct pulse_broker_open_report rep;
    struct pulse_broker_recreate_report r;
    struct pulse_meta_topic def;
    char dir[PATH_MAX];
    bool make = false;
    pulse_status_t st;

    memset(&rep, 0, sizeof rep);
    memset(&r, 0, sizeof r);
    if (errbuf != NULL && errlen > 0)
        errbuf[0] = '\0';
    if (cfg == NULL || cfg->data_dir == NULL || !pulse_broker_cname_valid(topic)) {
        pulse_errbuf_set(errbuf, errlen, "not a valid topic name");
        return PULSE_INVALID_NAME;
    }
    if (start_offset < 0 || start_offset > PULSE_BROKER_MAX_START_OFFSET) {
        pulse_errbuf_set(errbuf, errlen, "the start offset must be 0..%" PRId64,
                         (int64_t)PULSE_BROKER_MAX_START_OFFSET);
        return PULSE_INVALID;
    }
    st = shell_open(cfg, &shell, &rep, errbuf, errlen);
    if (st != PULSE_OK)
        goto out;
    snprintf(dir, sizeof dir, "%s/%s/%" PRIu32, shell.topics_dir, topic, partition);
    st = recreate_check(&shell, topic, partition, dir, &make, &def, errbuf, errlen);
    if (st == PULSE_OK) {
        st = highest_cursor(shell.meta, topic, partition, &r.highest_cursor, &r.cursors);
        if (st != PULSE_OK)
            pulse_errbuf_set(errbuf, errlen, "cannot read the cursors on %s/%" PRIu32 ": %s", topic, partition,
                             pulse_status_message(st));
    }
    if (st != PULSE_OK)
        goto out;
    r.start_offset = r.highest_cursor > start_offset ? r.highest_cursor : start_offset;
    st = recreate_log(&shell, &def, dir, make, r.start_offset, errbuf, errlen);
    if (st != PULSE_OK)
        goto out;
    PULSE_WARN("recreated partition %s/%" PRIu32 " empty in %s: its records were lost; new records get offsets "
               "from %" PRId64 " on (the highest of %" PRId64 " given and %" PRId64 ", the highest of its %zu "
               "consumer cursor(s))",
               topic, partition, dir, r.start_offset, start_offset, r.highest_cursor, r.cursors);
    if (out != NULL)
        *out = r;
out:
    shell_close(&shell);
    return st;
}

pulse_status_t pulse_broker_repair_metadata(const struct pulse_broker_config *cfg,
                                            struct pulse_broker_repair_report *report, char *errbuf, size_t errlen)
{
    struct pulse_meta_repair_report mrep;
    struct pulse_broker_config c;
    struct pulse_broker *b = NULL;
    char metadir[PATH_MAX];
    struct stat sb;
    pulse_status_t st;

    memset(report, 0, sizeof *report);
    if (errbuf != NULL && errlen > 0)
        errbuf[0] = '\0';
    if (cfg == NULL || cfg->data_dir == NULL || strlen(cfg->data_dir) > PATH_MAX - 64)
        return PULSE_INVALID;
    const struct pulse_io *io = cfg->io != NULL ? cfg->io : pulse_io_posix();
    if (io->stat(io, cfg->data_dir, false, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        pulse_errbuf_set(errbuf, errlen, "no data directory at %s", cfg->data_dir);
        return PULSE_NOT_FOUND;
    }
    snprintf(metadir, sizeof metadir, "%s/meta", cfg->data_dir);
    st = pulse_meta_repair(metadir, &mrep, errbuf, errlen);
    if (st != PULSE_OK)
        return st;
    report->store_found = mrep.found;
    report->tables_set_aside = mrep.tables_set_aside;
    report->damage_lines = mrep.damage_lines;
    for (uint32_t i = 0; i < mrep.damage_lines && i < PULSE_BROKER_REPAIR_NOTES; i++)
        snprintf(report->damage[i], sizeof report->damage[i], "%s", mrep.damage[i]);
    /* The rebuild is an ordinary open: adoption, identity, markers. No
     * maintenance pass runs meanwhile. */
    c = *cfg;
    c.retention_interval_ms = 0;
    c.compaction_interval_ms = 0;
    st = pulse_broker_open(&c, &b, &report->open, errbuf, errlen);
    if (st != PULSE_OK)
        return st;
    if (pulse_meta_cursor_count(pulse_local_of(b)->meta, &report->cursors) != PULSE_OK)
        report->cursors = 0;
    pulse_broker_close(b);
    return PULSE_OK;
}
