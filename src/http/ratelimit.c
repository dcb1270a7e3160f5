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
    int64_t rps;               /* the rates of its last admission (0 = none) */
    uint64_t bps;
    double req_cap;
    double byte_cap;
};

struct pulse_ratelimit {
    struct pulse_limits_settings s;
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
    /* About one entry per slot when full, never more slots than 2^20.
     * Made even with the defaults off: a token's own rates may be on. */
    rl->nslots = 16;
    while (rl->nslots < (size_t)s->max_buckets && rl->nslots < ((size_t)1 << 20))
        rl->nslots *= 2;
    rl->slots = pulse_calloc(rl->nslots, sizeof *rl->slots);
    if (rl->slots == NULL) {
        pulse_free(rl);
        return PULSE_NOMEM;
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

/* key's entry, made (empty buckets, no rates: set_rates fills them) when missing: a new allocation, or the
 * least recently seen entry once max_buckets are remembered. NULL on
 * NOMEM. Locks: rl->lock. */
static struct entry *lookup(struct pulse_ratelimit *rl, const unsigned char *key, int64_t now_us, bool create,
                            bool *fresh)
{
    struct entry *e = find(rl, key);
    *fresh = e == NULL;
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
    memset(e, 0, sizeof *e);
    memcpy(e->key, key, PULSE_RATELIMIT_KEY_LEN);
    e->seen_us = now_us;
    size_t i = slot_of(rl, key);
    e->chain = rl->slots[i];
    rl->slots[i] = e;
    list_push_front(rl, e);
    return e;
}

/* Adds what the rates gave since the entry's last visit. */
static void refill(struct entry *e, int64_t now_us)
{
    if (now_us <= e->seen_us)
        return;
    double secs = (double)(now_us - e->seen_us) / 1e6;
    e->requests = dmin(e->req_cap, e->requests + secs * (double)e->rps);
    e->bytes = dmin(e->byte_cap, e->bytes + secs * (double)e->bps);
    e->seen_us = now_us;
}

/* Gives e the rates of this admission (a reload may have changed a
 * token's): a fresh entry starts full, a known one keeps its levels
 * within the new sizes (and its debt). Locks: rl->lock. */
static void set_rates(const struct pulse_ratelimit *rl, struct entry *e, int64_t rps, uint64_t bps, bool fresh)
{
    double burst = (double)rl->s.burst_ms / 1000.0;
    e->rps = rps;
    e->bps = bps;
    e->req_cap = dmax(1.0, (double)rps * burst);
    e->byte_cap = dmax(1.0, (double)bps * burst);
    e->requests = fresh ? e->req_cap : dmin(e->requests, e->req_cap);
    e->bytes = fresh ? e->byte_cap : dmin(e->bytes, e->byte_cap);
}

unsigned pulse_ratelimit_admit(struct pulse_ratelimit *rl, const unsigned char key[PULSE_RATELIMIT_KEY_LEN],
                               uint64_t in_bytes, int64_t now_us, const char **which)
{
    return pulse_ratelimit_admit_rates(rl, key, rl->s.requests_per_second, rl->s.bytes_per_second, in_bytes, now_us,
                                       which);
}

unsigned pulse_ratelimit_admit_rates(struct pulse_ratelimit *rl, const unsigned char key[PULSE_RATELIMIT_KEY_LEN],
                                     int64_t rps, uint64_t bps, uint64_t in_bytes, int64_t now_us, const char **which)
{
    if (rps <= 0 && bps == 0)
        return 0;
    unsigned wait = 0;
    pthread_mutex_lock(&rl->lock);
    bool fresh = false;
    struct entry *e = lookup(rl, key, now_us, true, &fresh);
    if (e == NULL)
        goto out; /* out of memory: not limited rather than refused */
    refill(e, now_us);
    set_rates(rl, e, rps, bps, fresh);
    double wait_req = 0.0;
    double wait_bytes = 0.0;
    /* EPS: refills summed in many small steps fall short of a whole
     * token by rounding (ten 0.1 s refills of 1/s are 0.99999...). */
    if (e->rps > 0 && e->requests < 1.0 - EPS)
        wait_req = (1.0 - e->requests) / (double)e->rps;
    double need = dmin((double)in_bytes, e->byte_cap);
    if (e->bps > 0 && e->bytes < need - EPS)
        wait_bytes = (need - e->bytes) / (double)e->bps;
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
    if (e->rps > 0)
        e->requests -= 1.0;
    if (e->bps > 0)
        e->bytes -= (double)in_bytes;
out:
    pthread_mutex_unlock(&rl->lock);
    return wait;
}

void pulse_ratelimit_charge(struct pulse_ratelimit *rl, const unsigned char key[PULSE_RATELIMIT_KEY_LEN],
                            uint64_t bytes, int64_t now_us)
{
    if (bytes == 0)
        return;
    pthread_mutex_lock(&rl->lock);
    bool fresh = false;
    struct entry *e = lookup(rl, key, now_us, false, &fresh);
    if (e != NULL && e->bps > 0) {
        refill(e, now_us);
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
