/* SPDX-License-Identifier: MIT */
/*
 * ratelimit.c - token buckets per client (ratelimit.h).
 *
 * Method: a chained hash table of entries, keyed by the first 8 bytes of
 * the 32-byte key (a digest, so evenly spread), and a doubly linked list
 * of the same entries, most recently seen first. A lookup moves its entry
 * to the front; a new key past max_buckets takes the tail's entry. Levels
 * are doubles refilled lazily from the time of the entry's last visit, so
 * nothing runs between requests.
 */
#include "http/ratelimit.h"

#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "common/alloc.h"
#include "common/settings.h"

#define F(field) offsetof(struct pulse_limits_settings, field)
#define HOUR_MS (3600000ll)
#define EPS 1e-6

static const struct pulse_setting keys[] = {
    {"limits.requests-per-second", PULSE_SETTING_INT, F(requests_per_second), "0", NULL, 0, 1000000, NULL,
     "requests each client may make per second (bucket of burst); 0 = no limit"},
    {"limits.bytes-per-second", PULSE_SETTING_SIZE, F(bytes_per_second), "0", NULL, 0, 1024ll * 1024 * 1024 * 1024,
     NULL, "request body and fetched bytes each client may move per second; 0 = no limit"},
    {"limits.burst", PULSE_SETTING_DURATION, F(burst_ms), "1s", NULL, 1, HOUR_MS, NULL,
     "size of each client's buckets, as time at the rate: a client idle this long may send that much at once"},
    {"limits.max-clients", PULSE_SETTING_INT, F(max_buckets), "10000", NULL, 1, 10000000, NULL,
     "clients whose buckets are remembered at once; past it the least recently seen is forgotten"},
};

/* (Not libm's: nothing else in the library needs -lm.) */
static double dmin(double a, double b)
{
    return a < b ? a : b;
}

static double dmax(double a, double b)
{
    return a > b ? a : b;
}

static const struct pulse_settings_table table = {"limits", keys, sizeof keys / sizeof keys[0],
                                                  sizeof(struct pulse_limits_settings)};

const struct pulse_settings_table *pulse_limits_settings(void)
{
    return &table;
}

struct entry {
    unsigned char key[PULSE_RATELIMIT_KEY_LEN];
    struct entry *chain;       /* next in the hash slot */
    struct entry *prev, *next; /* the recency list */
    double requests;           /* tokens left */
    double bytes;              /* tokens left; negative = debt */
    int64_t seen_us;           /* the levels are as of this time */
};

struct pulse_ratelimit {
    struct pulse_limits_settings s;
    double req_cap;
    double byte_cap;
    pthread_mutex_t lock;
    struct entry **slots;
    size_t nslots; /* a power of two */
    size_t count;
    struct entry *head, *tail;
    uint64_t refusals;
    uint64_t evictions;
};

pulse_status_t pulse_ratelimit_create(const struct pulse_limits_settings *s, struct pulse_ratelimit **out)
{
    struct pulse_ratelimit *rl = pulse_calloc(1, sizeof *rl);
    if (rl == NULL)
        return PULSE_NOMEM;
    rl->s = *s;
    double burst = (double)s->burst_ms / 1000.0;
    rl->req_cap = dmax(1.0, (double)s->requests_per_second * burst);
    rl->byte_cap = dmax(1.0, (double)s->bytes_per_second * burst);
    /* About one entry per slot when full, never more slots than 2^20. */
    rl->nslots = 16;
    while (rl->nslots < (size_t)s->max_buckets && rl->nslots < ((size_t)1 << 20))
        rl->nslots *= 2;
    if (pulse_ratelimit_enabled(rl)) {
        rl->slots = pulse_calloc(rl->nslots, sizeof *rl->slots);
        if (rl->slots == NULL) {
            pulse_free(rl);
            return PULSE_NOMEM;
        }
    }
    pthread_mutex_init(&rl->lock, NULL);
    *out = rl;
    return PULSE_OK;
}

void pulse_ratelimit_destroy(struct pulse_ratelimit *rl)
{
    if (rl == NULL)
        return;
    struct entry *e = rl->head;
    while (e != NULL) {
        struct entry *next = e->next;
        pulse_free(e);
        e = next;
    }
    pthread_mutex_destroy(&rl->lock);
    pulse_free(rl->slots);
    pulse_free(rl);
}

bool pulse_ratelimit_enabled(const struct pulse_ratelimit *rl)
{
    return rl->s.requests_per_second > 0 || rl->s.bytes_per_second > 0;
}

static size_t slot_of(const struct pulse_ratelimit *rl, const unsigned char *key)
{
    uint64_t h = 0;
    memcpy(&h, key, sizeof h);
    return (size_t)(h & (rl->nslots - 1));
}

static void list_unlink(struct pulse_ratelimit *rl, struct entry *e)
{
    if (e->prev != NULL)
        e->prev->next = e->next;
    else
        rl->head = e->next;
    if (e->next != NULL)
        e->next->prev = e->prev;
    else
        rl->tail = e->prev;
    e->prev = e->next = NULL;
}

static void list_push_front(struct pulse_ratelimit *rl, struct entry *e)
{
    e->next = rl->head;
    e->prev = NULL;
    if (rl->head != NULL)
        rl->head->prev = e;
    rl->head = e;
    if (rl->tail == NULL)
        rl->tail = e;
}

static void chain_remove(struct pulse_ratelimit *rl, struct entry *e)
{
    struct entry **pp = &rl->slots[slot_of(rl, e->key)];
    while (*pp != NULL && *pp != e)
        pp = &(*pp)->chain;
    if (*pp == e)
        *pp = e->chain;
    e->chain = NULL;
}

static struct entry *find(struct pulse_ratelimit *rl, const unsigned char *key)
{
    for (struct entry *e = rl->slots[slot_of(rl, key)]; e != NULL; e = e->chain)
        if (memcmp(e->key, key, PULSE_RATELIMIT_KEY_LEN) == 0)
            return e;
    return NULL;
}

/* key's entry, made (full buckets) when missing: a new allocation, or the
 * least recently seen entry once max_buckets are remembered. NULL on
 * NOMEM. Locks: rl->lock. */
static struct entry *lookup(struct pulse_ratelimit *rl, const unsigned char *key, int64_t now_us, bool create)
{
    struct entry *e = find(rl, key);
    if (e != NULL) {
        list_unlink(rl, e);
        list_push_front(rl, e);
        return e;
    }
    if (!create)
        return NULL;
    if (rl->count >= (size_t)rl->s.max_buckets && rl->tail != NULL) {
        e = rl->tail;
        list_unlink(rl, e);
        chain_remove(rl, e);
        rl->evictions++;
    } else {
        e = pulse_calloc(1, sizeof *e);
        if (e == NULL)
            return NULL;
        rl->count++;
    }
    memcpy(e->key, key, PULSE_RATELIMIT_KEY_LEN);
    e->requests = rl->req_cap;
    e->bytes = rl->byte_cap;
    e->seen_us = now_us;
    size_t i = slot_of(rl, key);
    e->chain = rl->slots[i];
    rl->slots[i] = e;
    list_push_front(rl, e);
    return e;
}

/* Adds what the rates gave since the entry's last visit. */
static void refill(struct pulse_ratelimit *rl, struct entry *e, int64_t now_us)
{
    if (now_us <= e->seen_us)
        return;
    double secs = (double)(now_us - e->seen_us) / 1e6;
    e->requests = dmin(rl->req_cap, e->requests + secs * (double)rl->s.requests_per_second);
    e->bytes = dmin(rl->byte_cap, e->bytes + secs * (double)rl->s.bytes_per_second);
    e->seen_us = now_us;
}

unsigned pulse_ratelimit_admit(struct pulse_ratelimit *rl, const unsigned char key[PULSE_RATELIMIT_KEY_LEN],
                               uint64_t in_bytes, int64_t now_us, const char **which)
{
    if (!pulse_ratelimit_enabled(rl))
        return 0;
    unsigned wait = 0;
    pthread_mutex_lock(&rl->lock);
    struct entry *e = lookup(rl, key, now_us, true);
    if (e == NULL)
        goto out; /* out of memory: not limited rather than refused */
    refill(rl, e, now_us);
    double wait_req = 0.0;
    double wait_bytes = 0.0;
    /* EPS: refills summed in many small steps fall short of a whole
     * token by rounding (ten 0.1 s refills of 1/s are 0.99999...). */
    if (rl->s.requests_per_second > 0 && e->requests < 1.0 - EPS)
        wait_req = (1.0 - e->requests) / (double)rl->s.requests_per_second;
    double need = dmin((double)in_bytes, rl->byte_cap);
    if (rl->s.bytes_per_second > 0 && e->bytes < need - EPS)
        wait_bytes = (need - e->bytes) / (double)rl->s.bytes_per_second;
    if (wait_req > 0.0 || wait_bytes > 0.0) {
        double w = dmax(wait_req, wait_bytes);
        wait = w >= 86400.0 ? 86400u : (unsigned)w;
        if ((double)wait < w)
            wait++; /* whole seconds, rounded up */
        if (wait < 1)
            wait = 1;
        if (which != NULL)
            *which = wait_req >= wait_bytes ? "limits.requests-per-second" : "limits.bytes-per-second";
        rl->refusals++;
        goto out;
    }
    if (rl->s.requests_per_second > 0)
        e->requests -= 1.0;
    if (rl->s.bytes_per_second > 0)
        e->bytes -= (double)in_bytes;
out:
    pthread_mutex_unlock(&rl->lock);
    return wait;
}

void pulse_ratelimit_charge(struct pulse_ratelimit *rl, const unsigned char key[PULSE_RATELIMIT_KEY_LEN],
                            uint64_t bytes, int64_t now_us)
{
    if (rl->s.bytes_per_second == 0 || bytes == 0)
        return;
    pthread_mutex_lock(&rl->lock);
    struct entry *e = lookup(rl, key, now_us, false);
    if (e != NULL) {
        refill(rl, e, now_us);
        e->bytes -= (double)bytes;
    }
    pthread_mutex_unlock(&rl->lock);
}

uint64_t pulse_ratelimit_refusals(struct pulse_ratelimit *rl)
{
    pthread_mutex_lock(&rl->lock);
    uint64_t n = rl->refusals;
    pthread_mutex_unlock(&rl->lock);
    return n;
}

uint64_t pulse_ratelimit_evictions(struct pulse_ratelimit *rl)
{
    pthread_mutex_lock(&rl->lock);
    uint64_t n = rl->evictions;
    pthread_mutex_unlock(&rl->lock);
    return n;
}

size_t pulse_ratelimit_count(struct pulse_ratelimit *rl)
{
    pthread_mutex_lock(&rl->lock);
    size_t n = rl->count;
    pthread_mutex_unlock(&rl->lock);
    return n;
}
