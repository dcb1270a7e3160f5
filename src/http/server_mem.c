/* SPDX-License-Identifier: MIT */
/*
 * server_mem.c - the memory of requests in flight, all of it counted
 * against server.memory-budget (budget.h): reservations for bodies and
 * answers, charges for what is allocated while a request is served
 * (jansson's blocks included, through a process-wide allocator that
 * charges the request a thread-local names), and the request pool.
 *
 * A request gives back everything it took in one place, its
 * request-completed callback (pulse_server_on_completed), after
 * pulse_server_pool_free has freed its pool.
 *
 * The pool (after h2o's h2o_mem_pool_t): blocks (zeroed unless asked
 * otherwise) that live until the request completes, each charged to the budget before it exists; nothing
 * in it is freed earlier. A handler keeps its own state there
 * (pulse_server_hstate) instead of in struct pulse_hreq.
 */
#include <stdint.h>

#include "common/alloc.h"
#include "http/http_int.h"
#include "http/server_int.h"

/* A body without a Content-Length (chunked) or an inflated gzip body grows
 * its budget reservation in steps of at least this, doubling. */
#define BODY_STEP (64u * 1024)

struct pulse_hreq_chunk {
    struct pulse_hreq_chunk *next;
    _Alignas(max_align_t) unsigned char data[];
};

/* ---- memory charged as it is allocated -------------------------------- */

/* A request's charges are drawn from budget taken in steps: as large as
 * what it took so far (doubling), at least CHARGE_MIN, at most CHARGE_STEP,
 * so a small request holds little and a large parse few reservations. */
#define CHARGE_MIN (4u * 1024)
#define CHARGE_STEP (64u * 1024)

/* The request whose jansson allocations this thread charges right now
 * (pulse_server_json_begin); NULL: none are charged. */
static _Thread_local struct pulse_hreq *json_charge;

/* What glibc's malloc takes from the heap for a block of n bytes: n plus
 * its 8-byte size field, rounded up to 16, and at least 32. (Checked
 * against mallinfo2: parsing 1 M values through jansson, the heap grew by
 * exactly the sum of these; docs/Operations.md "Memory".) */
static uint64_t malloc_cost(size_t n)
{
    uint64_t c = ((uint64_t)n + 8 + 15) & ~(uint64_t)15;
    return c < 32 ? 32 : c;
}

bool pulse_server_mem_charge(struct pulse_hreq *r, uint64_t n)
{
    if (n <= r->mem_credit) {
        r->mem_credit -= n;
        return true;
    }
    uint64_t need = n - r->mem_credit;
    /* A step when the budget has room for it, else exactly what is
     * needed: one reservation either way, so one refusal counted. */
    const struct pulse_budget *b = &r->srv->budget;
    uint64_t step = r->mem_charged < CHARGE_MIN ? CHARGE_MIN : r->mem_charged;
    if (step > CHARGE_STEP)
        step = CHARGE_STEP;
    uint64_t used = pulse_budget_used(b);
    uint64_t room = used < b->limit ? b->limit - used : 0;
    uint64_t take = need < step && room >= step ? step : need;
    if (!pulse_server_mem_take(r, take)) {
        r->mem_refused = true;
        /* Past the whole budget even with nothing else in flight. */
        if (r->mem_held > b->limit || need > b->limit - r->mem_held)
            r->mem_never_fits = true;
        return false;
    }
    r->mem_charged += take;
    r->mem_credit += take - n;
    return true;
}

/*
 * jansson allocates through these for the whole process (installed before
 * main, so before any thread or jansson call). A block is charged only
 * while a request's parse runs on this thread (json_charge); every other
 * allocation, and every free, is the plain allocator's. Charges are never
 * given back block by block: the request gives back everything it took
 * when it completes, by which time its documents are freed.
 */
static void *json_alloc(size_t n)
{
    struct pulse_hreq *r = json_charge;
    if (r != NULL && !pulse_server_mem_charge(r, malloc_cost(n)))
        return NULL; /* jansson fails the parse or dump as out of memory */
    return pulse_malloc(n);
}

static void json_release(void *p)
{
    pulse_free(p);
}

__attribute__((constructor)) static void json_alloc_install(void)
{
    json_set_alloc_funcs(json_alloc, json_release);
}

struct pulse_hreq *pulse_server_json_begin(struct pulse_hreq *r)
{
    struct pulse_hreq *prev = json_charge;
    json_charge = r;
    return prev;
}

void pulse_server_json_end(struct pulse_hreq *prev)
{
    json_charge = prev;
}

/* ---- the request pool ------------------------------------------------- */

static void *pool_alloc(struct pulse_hreq *r, size_t n, bool zero)
{
    if (n > SIZE_MAX - sizeof(struct pulse_hreq_chunk))
        return NULL;
    if (!pulse_server_mem_charge(r, malloc_cost(sizeof(struct pulse_hreq_chunk) + n)))
        return NULL;
    struct pulse_hreq_chunk *c = zero ? pulse_calloc(1, sizeof *c + n) : pulse_malloc(sizeof *c + n);
    if (c == NULL)
        return NULL;
    c->next = r->pool;
    r->pool = c;
    return c->data;
}

void *pulse_server_palloc(struct pulse_hreq *r, size_t n)
{
    return pool_alloc(r, n, true);
}

void *pulse_server_palloc_uninit(struct pulse_hreq *r, size_t n)
{
    return pool_alloc(r, n, false);
}

void *pulse_server_hstate(struct pulse_hreq *r, size_t n, void (*dispose)(void *hstate))
{
    void *state = pulse_server_palloc(r, n);

    if (state == NULL)
        return NULL;
    r->hstate = state;
    r->hstate_dispose = dispose;
    return state;
}

void pulse_server_pool_free(struct pulse_hreq *r)
{
    if (r->hstate_dispose != NULL)
        r->hstate_dispose(r->hstate);
    r->hstate = NULL;
    r->hstate_dispose = NULL;
    struct pulse_hreq_chunk *c = r->pool;
    while (c != NULL) {
        struct pulse_hreq_chunk *next = c->next;
        pulse_free(c);
        c = next;
    }
    r->pool = NULL;
}

/* ---- reservations ------------------------------------------------------ */

bool pulse_server_mem_take(struct pulse_hreq *r, uint64_t n)
{
    if (!pulse_budget_reserve(&r->srv->budget, n))
        return false;
    r->mem_held += n;
    return true;
}

pulse_status_t pulse_server_mem_grow(struct pulse_hreq *r, struct pulse_buf *buf, size_t n, size_t cap)
{
    if (n > cap || buf->len > cap - n)
        return PULSE_TOO_LARGE;
    if (buf->len + n <= buf->max)
        return PULSE_OK;
    /* Double the reserved cap (at least one step), never past cap. */
    size_t want = buf->max > cap / 2 ? cap : buf->max * 2;
    if (want < buf->len + n)
        want = buf->len + n;
    if (want < BODY_STEP)
        want = BODY_STEP < cap ? BODY_STEP : cap;
    if (!pulse_server_mem_take(r, want - buf->max))
        return PULSE_BUSY;
    pulse_buf_set_max(buf, want);
    return PULSE_OK;
}
