/* SPDX-License-Identifier: MIT */
/*
 * idem.h - the window of idempotency keys of the local backend: which
 * publishes with an Idempotency-Key the broker remembers, what each stored
 * where, and who waits for one still running (docs/API.md "Retrying a
 * publish", docs/Format.md "Producer fields").
 *
 * Owner: idem.c alone reads and writes the window; publish.c asks it
 * (begin, then finish exactly once per begin that returned
 * PULSE_IDEM_RUN). Keys are per topic (a topic's uid, never reused, so a
 * recreated topic never inherits its namesake's keys).
 *
 * Identity on disk. Every batch an idempotent publish writes carries the
 * request's identity in its producer fields: producerID:producerEpoch = a
 * 64-bit hash of the key (murmur2 and CRC32C of it; producerID never 0),
 * baseSequence = a 31-bit fingerprint of the request's records (never 0).
 * The fields are inside the CRC-covered bytes of the batch, so the key is
 * durable in the same fdatasync as the records: no crash keeps one without
 * the other. At open, pulse_broker_idem_rebuild reads back the batches of
 * every partition whose segments hold records of the window and remembers
 * them again (key known by hash only until a retry names it).
 *
 * What an entry knows per partition (a share): how many records the
 * publish routed there, and either that they are stored (durable, offsets
 * known), or that they were appended in a plog epoch and must be judged
 * by pulse_plog_fate, or nothing (not stored). A retry skips the stored
 * shares and appends the rest, which is how a publish that a crash or a
 * fence cut between partitions is completed exactly once.
 *
 * Thread: any. Locks: the window's own mutex, a leaf (never held while
 * calling out: callbacks run after it is released).
 */
#ifndef PULSE_BROKER_IDEM_H
#define PULSE_BROKER_IDEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker/broker.h"
#include "common/status.h"

struct pulse_broker_idem;
struct pulse_idem_entry;
struct pulse_local;
struct pulse_syncpool;

enum pulse_idem_share_state {
    PULSE_IDEM_SHARE_NONE = 0, /* nothing of it is stored */
    PULSE_IDEM_SHARE_APPENDED, /* written in epoch, ends at end; judge with pulse_plog_fate */
    PULSE_IDEM_SHARE_STORED    /* durable at [base, base + count) */
};

/* One partition's share of an idempotent publish. */
struct pulse_idem_share {
    uint32_t partition;
    uint32_t count; /* records stored (or appended) there */
    int64_t base;
    int64_t end;
    uint64_t epoch;
    uint8_t state; /* enum pulse_idem_share_state */
};

/* The identity of one request. */
struct pulse_idem_id {
    uint64_t topic_uid;
    uint32_t nparts; /* the topic's partitions */
    size_t touched;  /* how many of them this request writes to */
    const char *key; /* borrowed for the call */
    size_t key_len;
    uint64_t khash;   /* pulse_broker_idem_key_hash(key) */
    uint64_t body;    /* pulse_broker_idem_body_hash(records): CRC32C and length */
    uint32_t body_fp; /* its 31-bit form stored in baseSequence (never 0) */
};

/* A request that waits for the running publish of its key. Filled by the
 * caller; owned by the window until its done is called. */
struct pulse_idem_waiter {
    struct pulse_idem_waiter *next;
    pulse_publish_done_fn done;
    void *arg;
    struct pulse_offset_pair *offsets_out;
    size_t n;
    struct pulse_publish_idem *idem;
    char *errbuf;
    size_t errlen;
};

enum pulse_idem_begin {
    PULSE_IDEM_RUN = 0, /* this request runs the publish: *entry_out, finish it */
    PULSE_IDEM_WAIT     /* the waiter was queued behind the running one */
};

/* Creates an empty window. PULSE_NOMEM. */
pulse_status_t pulse_broker_idem_create(int64_t window_ms, uint32_t max_keys, struct pulse_broker_idem **out);

/* Frees the window. No publish may be running. NULL is a no-op. */
void pulse_broker_idem_destroy(struct pulse_broker_idem *w);

/* The 64-bit key hash of the producer fields: high half murmur2, low half
 * CRC32C of the key; the high half is never 0 (0 means "no producer"). */
uint64_t pulse_broker_idem_key_hash(const char *key, size_t len);

/* CRC32C of the records' canonical form (keys, values, headers, partition,
 * timestamp when given; lengths and null markers included) in the high
 * half, their encoded length in the low half. */
uint64_t pulse_broker_idem_body_hash(const struct pulse_publish_record *recs, size_t n);

/*
 * Looks id up in the window (dropping expired keys on the way).
 * - unknown key: a new entry is made (evicting the oldest finished key when
 *   the window holds max_keys; PULSE_BUSY when every remembered key is
 *   still running); PULSE_OK, *how = RUN, *shares_out = NULL.
 * - known key, other records: PULSE_KEY_REUSED (errbuf says so).
 * - known key still running: waiter is queued, *how = WAIT; its done is
 *   called when the running publish finishes.
 * - known key, finished: it is marked running again for this request
 *   (*how = RUN); *shares_out gets its shares, one per partition of the
 *   topic, index = partition (pulse_free; *nshares_out = id->nparts),
 *   which the caller judges and completes.
 * Locks: the window's mutex.
 */
pulse_status_t pulse_broker_idem_begin(struct pulse_broker_idem *w, const struct pulse_idem_id *id,
                                       struct pulse_idem_waiter *waiter, enum pulse_idem_begin *how,
                                       struct pulse_idem_entry **entry_out, struct pulse_idem_share **shares_out,
                                       size_t *nshares_out, char *errbuf, size_t errlen);

/*
 * Ends the running publish of entry begun with PULSE_IDEM_RUN. shares
 * (nshares, index = partition; NULL: nothing changed) is what is now known
 * of every partition (replaces the entry's; copied); st its outcome. When st is PULSE_OK every share
 * becomes STORED and each waiter gets offsets (copied from offsets, n
 * records) with duplicate set; otherwise the waiters get st and errmsg.
 * An entry with nothing appended or stored is forgotten. Waiters' done
 * callbacks run on the calling thread after the lock is released.
 * Locks: the window's mutex.
 */
void pulse_broker_idem_finish(struct pulse_broker_idem *w, struct pulse_idem_entry *entry,
                              const struct pulse_idem_share *shares, size_t nshares, pulse_status_t st,
                              const struct pulse_offset_pair *offsets, size_t n, const char *errmsg);

/*
 * At open, before the broker's threads start: reads back the batches with
 * producer fields in every partition's segments whose newest record lies
 * within the window, and remembers them. Reads what was written in the
 * last window (see docs/Operations.md); a partition it cannot read is
 * logged and skipped (its keys are not remembered). The reads run on pool
 * (the start's threads; NULL: the caller alone), the remembering on the
 * caller in (topic, partition) order, so the window is the same either
 * way. Always PULSE_OK.
 * Thread: the opener.
 */
pulse_status_t pulse_broker_idem_rebuild(struct pulse_local *b, struct pulse_syncpool *pool);

/* What a rebuild did with its memory budget. */
struct pulse_idem_rebuild_stats {
    size_t read_again; /* partitions whose headers did not fit, read again in their turn */
    size_t held_after; /* headers still counted against the budget at the end (0) */
};

/* pulse_broker_idem_rebuild with a budget of budget headers held at once
 * over all partitions (the rebuild's own is 262,144) and, with stats
 * (nullable), what it did with it: for tests. */
pulse_status_t pulse_broker_idem_rebuild_within(struct pulse_local *b, struct pulse_syncpool *pool, size_t budget,
                                                struct pulse_idem_rebuild_stats *stats);

/* Keys remembered now, for tests and metrics. Locks: the window's mutex. */
size_t pulse_broker_idem_count(struct pulse_broker_idem *w);

#endif
