/* The proxy's byte path in C: a thread that relays plaintext links, the twin of
 * kinspect/proxy/relay.py's asyncio Link.
 *
 * Python accepts and connects (kinspect/proxy/pump.py), then hands a link's two sockets to the
 * Pump. The pump's own thread reads each side and writes what it read to the other side at once,
 * without the GIL, then queues a copy for Python (the tap, the frame counts, draining). It follows
 * the Kafka frames as relay.py's Requests and Responses do, so that it holds back whole exactly the
 * responses that may carry broker addresses (rewrite.py's carries_addresses):
 *   - Metadata, FindCoordinator, DescribeCluster: handed to Python (HOLD) to be rewritten;
 *   - Produce v10+ and Fetch v16+: walked (names_brokers), and passed on at once unless they carry
 *     KIP-951's NodeEndpoints, else handed over. (rewrite_response's first check, any int16 6 or 74
 *     in the bytes, matched every Produce response while the offsets' top byte was 6.)
 * While Python has a response, that direction waits (release() gives the bytes to send on). After
 * a SaslHandshake v0 request the raw SASL tokens that follow have no Kafka header, so from the next
 * response frame on, that link's responses all go through Python (HOLD with api -1).
 *
 * Pump(max_held, chunk=131072, queue_limit=64 MiB)
 *   fileno()                 an eventfd, readable when events() has something
 *   add(conn, client_fd, server_fd)   the pump owns the fds from here (non-blocking, connected)
 *   release(conn, data)      the bytes to send for the response last handed over
 *   drain(conn)              forward the request under way, then read the client no more
 *   close(conn)              write what is pending, then close both sockets
 *   events()                 [(kind, conn, direction, ts, data, n, api_key, api_version)]
 *   stop()                   close every link and end the thread
 * Event kinds: DATA (a copy of bytes sent on), HOLD (a response for Python), EOF (a side's end of
 * stream, passed on as a half-close), ERROR (n: errno), CLOSED (n: request bytes dropped while
 * draining), REFUSED (n: a frame's size that did not fit in max_held, passed on unheld), DRAINED
 * (draining: the client is read no more; n: the request bytes dropped, final from here), DRAINING
 * (drain() came mid-request: the copies before it are what had gone on then).
 * Directions are tap.py's: 1 the client's bytes, 2 the broker's.
 *
 * Bounds: a link holds at most WRITE_HIGH and a chunk per direction waiting for a slow peer (past
 * WRITE_HIGH that side is not read, as relay.py's transports pause), the held frames together at
 * most max_held, and copies queued for Python at most queue_limit bytes (past it the thread waits
 * for events() to be called).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum { DATA, HOLD, EOF_, ERROR_, CLOSED, REFUSED, DRAINED, DRAINING };
enum { CLIENT = 1, SERVER = 2 };
enum { REQ = 0, RESP = 1 };            /* a link's directions: client->server, server->client */
enum { PASS = 0, ALWAYS = 1, SCAN = 2 }; /* what a response frame gets */
#define TABLE 1024                      /* requests awaiting a held response, by correlation id */
/* Python is woken for copies at most every NOTIFY_AFTER s, or past NOTIFY_BYTES queued (a HOLD at
 * once): waking it inside each round trip cost more latency at low load than it saved */
#define NOTIFY_AFTER 0.010
#define NOTIFY_BYTES (1 << 20)
#define NOT_KAFKA (-1)
#define WRITE_HIGH (1 << 20)            /* bytes waiting for a slow peer before its source is not read */

typedef struct Event {
    struct Event *next;
    int kind, direction, api_key, api_version;
    long conn;
    long long n;
    double ts;
    char *data;
    size_t len;
} Event;

typedef struct {
    char *pend;            /* read, not yet written to the peer: pend[pend_off:pend_len] */
    size_t pend_len, pend_off, pend_cap;
    int eof, shut;         /* the source ended; the peer was told (SHUT_WR) */
    unsigned char head[12];
    int head_len, want;
    long long skip;        /* bytes of the current frame still to pass; NOT_KAFKA: all */
    /* responses only */
    char *held;            /* a frame held whole */
    size_t held_len, held_size;
    int hold_kind, hold_api, hold_ver;
    int waiting;           /* a HOLD is with Python */
    char *rest;            /* what followed the frame handed over, read already */
    size_t rest_len;
    int delegate_pending, delegate;
    int head_passed;       /* bytes of head sent on before the frame could be paired */
} Dir;

typedef struct Link Link;
typedef struct { Link *link; int side; } Handle;

struct Link {
    Link *next;
    long conn;
    int fd[2];             /* [REQ] the client's socket (read for requests), [RESP] the broker's */
    unsigned mask[2];      /* what epoll watches on each */
    Handle handle[2];
    Dir d[2];
    struct { int32_t corr; int16_t api, ver; int used; } table[TABLE];
    int expecting;         /* slots used: responses that may have to be held */
    int draining, stopped, closing, dead;
    int hup[2];            /* epoll said hang-up while the socket was not being read */
    int gone[2];           /* so it is out of epoll (a hang-up fires until read) until read again */
    long long not_forwarded;
};

enum { ADD, RELEASE, DRAIN, CLOSE };

typedef struct Command {
    struct Command *next;
    int what;              /* ADD, RELEASE, DRAIN, CLOSE */
    long conn;
    int fd[2];
    char *data;
    size_t len;
} Command;

typedef struct {
    PyObject_HEAD
    pthread_t thread;
    int started;
    volatile int running;
    int epfd, wake_fd, notify_fd;
    pthread_mutex_t mu;
    pthread_cond_t drained;
    Command *commands, **commands_tail;
    Event *events, **events_tail;
    size_t queued;         /* bytes of copies queued for Python */
    int notified;          /* the notify eventfd was written since the last events() */
    double unnotified;     /* when the oldest event Python was not told of was queued (0: none) */
    size_t queue_limit, chunk;
    long long max_held, held;
    Link *links;
    Link *graveyard;       /* closed during an epoll batch, freed after it */
    char *obuf;            /* responses gathered when they are not one run of the chunk read */
    size_t obuf_len, obuf_cap;
    int ident;             /* what goes on so far is one run of the chunk read: ident_start..end */
    const char *ident_start, *ident_end;
} Pump;

/* bytes the relay read, handed to Python as they are (a memoryview over this) */
typedef struct {
    PyObject_HEAD
    char *data;
    Py_ssize_t len;
} Chunk;

static int
Chunk_getbuffer(Chunk *c, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, (PyObject *)c, c->data, c->len, 1, flags);
}

static void
Chunk_dealloc(Chunk *c)
{
    free(c->data);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static PyBufferProcs Chunk_as_buffer = {(getbufferproc)Chunk_getbuffer, NULL};

static PyTypeObject ChunkType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kinspect.native._relay.Chunk",
    .tp_basicsize = sizeof(Chunk),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)Chunk_dealloc,
    .tp_as_buffer = &Chunk_as_buffer,
};

/* a memoryview owning data (freed with it), or NULL (data freed) */
static PyObject *
view_of(char *data, size_t len)
{
    Chunk *c = PyObject_New(Chunk, &ChunkType);
    if (c == NULL) {
        free(data);
        return NULL;
    }
    c->data = data;
    c->len = (Py_ssize_t)len;
    PyObject *view = PyMemoryView_FromObject((PyObject *)c);
    Py_DECREF(c);
    return view;
}

static double
now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static double
monotonic(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static uint32_t
be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static int16_t
be16(const unsigned char *p)
{
    return (int16_t)(((uint16_t)p[0] << 8) | p[1]);
}

/* rewrite.py's carries_addresses, and whether the frame's bytes decide it */
static int
hold_kind(int api, int ver)
{
    if (api == 3 || api == 10 || api == 60)
        return ALWAYS;
    if ((api == 0 && ver >= 10) || (api == 1 && ver >= 16))
        return SCAN;
    return PASS;
}

/* -- KIP-951 endpoints: whether a Produce v10+ or Fetch v16+ response names brokers ---------- */

typedef struct {
    const unsigned char *p, *end;
    int bad;
} Cursor;

static uint64_t
uvarint(Cursor *c)
{
    uint64_t v = 0;
    for (int shift = 0; c->p < c->end && shift < 64; shift += 7) {
        unsigned b = *c->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
    c->bad = 1;
    return 0;
}

static void
skip(Cursor *c, uint64_t n)
{
    if ((uint64_t)(c->end - c->p) < n) {
        c->bad = 1;
        c->p = c->end;
    } else {
        c->p += n;
    }
}

static void
skip_compact(Cursor *c)  /* a compact (nullable) string or bytes */
{
    uint64_t n = uvarint(c);
    if (n)
        skip(c, n - 1);
}

static void
skip_tags(Cursor *c)
{
    uint64_t n = uvarint(c);
    for (uint64_t i = 0; i < n && !c->bad; i++) {
        uvarint(c);
        skip(c, uvarint(c));
    }
}

/* 1 when the response carries NodeEndpoints (tag 0 of the body's tagged fields: the only place
 * these versions name brokers) or does not walk cleanly; 0 when it holds no address for Python to
 * rewrite. Every loop takes at least a byte a turn, so a hostile count ends at the frame's end. */
static int
names_brokers(int api, int ver, const unsigned char *frame, size_t n)
{
    Cursor c = {frame + 8, frame + n, 0};
    if (n < 8)
        return 1;
    skip_tags(&c);  /* the response header's (v1) */
    if (api == 0) {
        uint64_t topics = uvarint(&c);
        for (uint64_t t = 1; t < topics && !c.bad; t++) {
            if (ver >= 13)
                skip(&c, 16);  /* topic_id */
            else
                skip_compact(&c);  /* name */
            uint64_t parts = uvarint(&c);
            for (uint64_t q = 1; q < parts && !c.bad; q++) {
                skip(&c, 4 + 2 + 8 + 8 + 8);  /* index, error_code, base_offset, log_append_time_ms, log_start_offset */
                uint64_t errors = uvarint(&c);
                for (uint64_t e = 1; e < errors && !c.bad; e++) {
                    skip(&c, 4);
                    skip_compact(&c);
                    skip_tags(&c);
                }
                skip_compact(&c);  /* error_message */
                skip_tags(&c);
            }
            skip_tags(&c);
        }
        skip(&c, 4);  /* throttle_time_ms */
    } else {
        skip(&c, 4 + 2 + 4);  /* throttle_time_ms, error_code, session_id */
        uint64_t topics = uvarint(&c);
        for (uint64_t t = 1; t < topics && !c.bad; t++) {
            skip(&c, 16);  /* topic_id */
            uint64_t parts = uvarint(&c);
            for (uint64_t q = 1; q < parts && !c.bad; q++) {
                skip(&c, 4 + 2 + 8 + 8 + 8);  /* partition_index, error_code, three offsets */
                uint64_t aborted = uvarint(&c);
                for (uint64_t a = 1; a < aborted && !c.bad; a++) {
                    skip(&c, 8 + 8);
                    skip_tags(&c);
                }
                skip(&c, 4);  /* preferred_read_replica */
                skip_compact(&c);  /* records */
                skip_tags(&c);
            }
            skip_tags(&c);
        }
    }
    uint64_t tags = uvarint(&c);
    for (uint64_t i = 0; i < tags && !c.bad; i++) {
        uint64_t tag = uvarint(&c), size = uvarint(&c);
        if (tag == 0 && !(size == 1 && c.p < c.end && *c.p == 1))  /* not an empty array */
            return 1;
        skip(&c, size);
    }
    return c.bad || c.p != c.end;
}

static PyObject *
py_names_brokers(PyObject *module, PyObject *args)
{
    int api, ver;
    Py_buffer frame;
    if (!PyArg_ParseTuple(args, "iiy*", &api, &ver, &frame))
        return NULL;
    int r = (api == 0 && ver >= 10) || (api == 1 && ver >= 16)
                ? names_brokers(api, ver, frame.buf, (size_t)frame.len) : 1;
    PyBuffer_Release(&frame);
    return PyBool_FromLong(r);
}

/* -- events, for Python ------------------------------------------------------------------ */

static void
post(Pump *p, Link *l, int kind, int direction, const char *data, size_t len, long long n, int api, int ver,
     int own)
{
    Event *e = calloc(1, sizeof *e);
    if (e == NULL)
        return;
    e->kind = kind;
    e->conn = l->conn;
    e->direction = direction;
    e->ts = now();
    e->n = n;
    e->api_key = api;
    e->api_version = ver;
    if (data != NULL) {
        if (own)
            e->data = (char *)data;
        else if ((e->data = malloc(len ? len : 1)) != NULL)
            memcpy(e->data, data, len);
        e->len = e->data ? len : 0;
    }
    pthread_mutex_lock(&p->mu);
    *p->events_tail = e;
    p->events_tail = &e->next;
    p->queued += e->len + sizeof *e;  /* an event's own memory too: one-byte chunks are bounded alike */
    int tell = !p->notified && (kind == HOLD || p->queued > NOTIFY_BYTES);
    if (tell)
        p->notified = 1;
    else if (!p->notified && p->unnotified == 0)
        p->unnotified = monotonic();
    pthread_mutex_unlock(&p->mu);
    if (tell) {
        uint64_t one = 1;
        ssize_t w = write(p->notify_fd, &one, 8);
        (void)w;
    }
}

/* the events Python was not woken for: told once they are NOTIFY_AFTER old. Returns epoll's
 * timeout (ms) until then, or -1 */
static int
notify_due(Pump *p)
{
    int tell = 0, timeout = -1;
    pthread_mutex_lock(&p->mu);
    if (p->notified)
        p->unnotified = 0;
    if (p->unnotified != 0) {
        double left = p->unnotified + NOTIFY_AFTER - monotonic();
        if (left <= 0) {
            tell = p->notified = 1;
            p->unnotified = 0;
        } else {
            timeout = (int)(left * 1000) + 1;
        }
    }
    pthread_mutex_unlock(&p->mu);
    if (tell) {
        uint64_t one = 1;
        ssize_t w = write(p->notify_fd, &one, 8);
        (void)w;
    }
    return timeout;
}

/* -- sockets --------------------------------------------------------------------------- */

static int
want_read(Link *l, int d)
{
    Dir *x = &l->d[d];
    if (l->closing || x->eof || x->waiting || x->rest_len || x->pend_len - x->pend_off >= WRITE_HIGH)
        return 0;
    return !(d == REQ && l->stopped);
}

static void
watch(Pump *p, Link *l)
{
    for (int side = 0; side < 2; side++) {
        if (l->fd[side] < 0)
            continue;
        Dir *toward = &l->d[1 - side];  /* the direction whose bytes are written to this socket */
        unsigned mask = (want_read(l, side) ? EPOLLIN : 0) | (toward->pend_len > toward->pend_off ? EPOLLOUT : 0);
        struct epoll_event ev = {.events = mask, .data.ptr = &l->handle[side]};
        if (mask == 0 && l->hup[side]) {
            if (!l->gone[side])
                epoll_ctl(p->epfd, EPOLL_CTL_DEL, l->fd[side], NULL);
            l->gone[side] = 1;
        } else if (l->gone[side]) {
            epoll_ctl(p->epfd, EPOLL_CTL_ADD, l->fd[side], &ev);
            l->gone[side] = l->hup[side] = 0;
        } else if (mask != l->mask[side]) {
            epoll_ctl(p->epfd, EPOLL_CTL_MOD, l->fd[side], &ev);
        }
        l->mask[side] = mask;
    }
}

static void fail(Pump *p, Link *l, int side, int err);

/* write buf to the peer of direction d; what does not go now waits in d's pend */
static int
send_on(Pump *p, Link *l, int d, const char *buf, size_t len)
{
    Dir *x = &l->d[d];
    int dst = l->fd[1 - d];
    size_t done = 0;
    if (x->pend_len == x->pend_off && dst >= 0) {
        while (done < len) {
            ssize_t w = send(dst, buf + done, len - done, MSG_NOSIGNAL);
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                    break;
                fail(p, l, 1 - d, errno);
                return -1;
            }
            done += (size_t)w;
        }
    }
    if (done < len) {
        size_t add = len - done, left = x->pend_len - x->pend_off;
        if (x->pend_len + add > x->pend_cap && x->pend_off) {  /* the written front goes first */
            memmove(x->pend, x->pend + x->pend_off, left);
            x->pend_off = 0;
            x->pend_len = left;
        }
        if (x->pend_len + add > x->pend_cap) {
            size_t cap = (x->pend_len + add) * 2;
            char *grown = realloc(x->pend, cap);
            if (grown == NULL) {
                fail(p, l, 1 - d, ENOMEM);
                return -1;
            }
            x->pend = grown;
            x->pend_cap = cap;
        }
        memcpy(x->pend + x->pend_len, buf + done, add);
        x->pend_len += add;
    }
    return 0;
}

static void
close_link(Pump *p, Link *l)
{
    for (int side = 0; side < 2; side++)
        if (l->fd[side] >= 0) {
            if (!l->gone[side])
                epoll_ctl(p->epfd, EPOLL_CTL_DEL, l->fd[side], NULL);
            close(l->fd[side]);
            l->fd[side] = -1;
        }
    for (int d = 0; d < 2; d++) {
        Dir *x = &l->d[d];
        if (x->held) {
            p->held -= (long long)x->held_size;
            free(x->held);
        }
        free(x->pend);
        free(x->rest);
        x->held = x->pend = x->rest = NULL;
    }
    post(p, l, CLOSED, 0, NULL, 0, l->not_forwarded, 0, 0, 0);
    Link **at = &p->links;
    while (*at != l)
        at = &(*at)->next;
    *at = l->next;
    l->dead = 1;
    l->next = p->graveyard;
    p->graveyard = l;
}

static void
bury(Pump *p)
{
    while (p->graveyard) {
        Link *next = p->graveyard->next;
        free(p->graveyard);
        p->graveyard = next;
    }
}

/* closing: nothing more is read; the link closes once what it holds is written */
static void
settle(Pump *p, Link *l)
{
    int ended = l->d[REQ].shut && l->d[RESP].shut;
    int flushed = l->d[REQ].pend_len == l->d[REQ].pend_off && l->d[RESP].pend_len == l->d[RESP].pend_off;
    if ((l->closing && flushed) || ended) {
        close_link(p, l);
        return;
    }
    for (int d = 0; d < 2; d++) {  /* a side ended and all it sent is written: pass its end on */
        Dir *x = &l->d[d];
        if (x->eof && !x->shut && x->pend_len == x->pend_off && !x->held && !x->waiting && !x->rest_len) {
            if (l->fd[1 - d] >= 0)
                shutdown(l->fd[1 - d], SHUT_WR);
            x->shut = 1;
        }
    }
    if (l->d[REQ].shut && l->d[RESP].shut) {
        close_link(p, l);
        return;
    }
    watch(p, l);
}

static void
fail(Pump *p, Link *l, int side, int err)
{
    if (l->closing)
        return;
    post(p, l, ERROR_, side == REQ ? CLIENT : SERVER, NULL, 0, err, 0, 0, 0);
    l->closing = 1;
    /* the broken socket takes nothing more; its partner gets what is pending for it */
    Dir *toward_broken = &l->d[1 - side];
    toward_broken->pend_off = toward_broken->pend_len;
}

/* -- frames ---------------------------------------------------------------------------- */

/* the requests in buf[0:n]: returns how many bytes go on (fewer while draining) */
static size_t
follow_requests(Link *l, const unsigned char *buf, size_t n)
{
    Dir *x = &l->d[REQ];
    size_t pos = 0;
    while (pos < n) {
        if (x->skip == NOT_KAFKA)
            return n;
        if (x->skip) {
            size_t take = (size_t)x->skip < n - pos ? (size_t)x->skip : n - pos;
            x->skip -= (long long)take;
            pos += take;
            continue;
        }
        if (x->head_len == 0 && l->draining) {  /* between requests: no new one goes on */
            l->stopped = 1;
            l->not_forwarded += (long long)(n - pos);
            return pos;
        }
        size_t take = (size_t)(x->want - x->head_len) < n - pos ? (size_t)(x->want - x->head_len) : n - pos;
        memcpy(x->head + x->head_len, buf + pos, take);
        x->head_len += (int)take;
        pos += take;
        if (x->head_len < x->want)
            break;
        int32_t size = (int32_t)be32(x->head);
        if (x->want == 4) {
            if (size <= 0) {  /* not Kafka framing: stop following (every byte still goes on) */
                x->skip = NOT_KAFKA;
                x->head_len = 0;
                return n;
            }
            x->want = 4 + (size < 8 ? size : 8);
            continue;
        }
        if (x->want == 12) {
            int api = be16(x->head + 4), ver = be16(x->head + 6);
            int32_t corr = (int32_t)be32(x->head + 8);
            if (api == 17 && ver == 0)  /* SaslHandshake v0: raw tokens follow */
                l->d[RESP].delegate_pending = 1;
            if (hold_kind(api, ver) != PASS) {
                int slot = (int)((uint32_t)corr % TABLE);
                l->expecting += !l->table[slot].used;
                l->table[slot].corr = corr;
                l->table[slot].api = (int16_t)api;
                l->table[slot].ver = (int16_t)ver;
                l->table[slot].used = 1;
            }
        }
        x->skip = size - (x->want - 4);
        x->head_len = 0;
        x->want = 4;
    }
    return pos;
}

static int
append(Pump *p, const void *data, size_t len)
{
    if (p->obuf_len + len > p->obuf_cap) {
        size_t cap = (p->obuf_len + len) * 2;
        char *grown = realloc(p->obuf, cap);
        if (grown == NULL)
            return -1;
        p->obuf = grown;
        p->obuf_cap = cap;
    }
    memcpy(p->obuf + p->obuf_len, data, len);
    p->obuf_len += len;
    return 0;
}

/* bytes from outside the chunk read (a held frame, a head kept from the last chunk): copied now */
static int
out_copy(Pump *p, const char *data, size_t len)
{
    if (p->ident) {
        p->ident = 0;
        if (p->ident_end != NULL && append(p, p->ident_start, (size_t)(p->ident_end - p->ident_start)) < 0)
            return -1;
    }
    return append(p, data, len);
}

/* bytes to send on to the client: while they follow each other in the chunk read they are only
 * counted (the chunk itself goes, and is handed to Python without a copy); else gathered */
static int
out(Pump *p, const char *data, size_t len)
{
    if (p->ident && (p->ident_end == data || p->ident_end == NULL)) {
        if (p->ident_end == NULL)
            p->ident_start = data;
        p->ident_end = data + len;
        return 0;
    }
    return out_copy(p, data, len);
}

static void
out_reset(Pump *p)
{
    p->obuf_len = 0;
    p->ident = 1;
    p->ident_start = p->ident_end = NULL;
}

/* what out() was given goes to the client, and its copy to Python: the chunk itself when it all
 * went as it came and ``*owned`` (n bytes) is it, which is then Python's (*owned set to NULL) */
static int
flush_out(Pump *p, Link *l, char **owned, size_t n)
{
    const char *data = p->ident ? p->ident_start : p->obuf;
    size_t len = p->ident ? (p->ident_end ? (size_t)(p->ident_end - p->ident_start) : 0) : p->obuf_len;
    int whole = p->ident && owned != NULL && *owned != NULL && data == *owned && len == n;
    out_reset(p);
    if (!len)
        return 0;
    if (send_on(p, l, RESP, data, len) < 0)
        return -1;
    if (whole) {
        post(p, l, DATA, SERVER, *owned, len, 0, 0, 0, 1);
        *owned = NULL;
    } else {
        post(p, l, DATA, SERVER, data, len, 0, 0, 0, 0);
    }
    return 0;
}

/* a held frame is whole: on to the client, or to Python (returns 1: the direction now waits) */
static int
frame_held(Pump *p, Link *l)
{
    Dir *x = &l->d[RESP];
    char *frame = x->held;
    size_t size = x->held_size;
    x->held = NULL;
    p->held -= (long long)size;
    if (x->hold_kind == SCAN && !names_brokers(x->hold_api, x->hold_ver, (const unsigned char *)frame, size)) {
        int r = out_copy(p, frame, size);
        free(frame);
        return r < 0 ? -1 : 0;
    }
    if (flush_out(p, l, NULL, 0) < 0) {
        free(frame);
        return -1;
    }
    post(p, l, HOLD, SERVER, frame, size, 0, x->hold_api, x->hold_ver, 1);
    x->waiting = 1;
    return 1;
}

/* the responses in buf[0:n], gathered into obuf as they go on. Returns how many bytes were
 * taken: fewer than n when a frame went to Python (the rest waits for its release) */
static long
follow_responses(Pump *p, Link *l, const char *buf, size_t n)
{
    Dir *x = &l->d[RESP];
    size_t pos = 0;
    long head_at = -1;  /* where the current frame's head began in buf, if it did */
    while (pos < n) {
        if (x->delegate) {
            if (flush_out(p, l, NULL, 0) < 0)
                return -1;
            post(p, l, HOLD, SERVER, buf + pos, n - pos, 0, -1, -1, 0);
            x->waiting = 1;
            return (long)n;
        }
        if (x->skip == NOT_KAFKA) {
            if (out(p, buf + pos, n - pos) < 0)
                return -1;
            return (long)n;
        }
        if (x->held) {
            size_t take = x->held_size - x->held_len < n - pos ? x->held_size - x->held_len : n - pos;
            memcpy(x->held + x->held_len, buf + pos, take);
            x->held_len += take;
            pos += take;
            if (x->held_len == x->held_size) {
                int r = frame_held(p, l);
                if (r)
                    return r < 0 ? -1 : (long)pos;
            }
            continue;
        }
        if (x->skip) {
            size_t take = (size_t)x->skip < n - pos ? (size_t)x->skip : n - pos;
            if (out(p, buf + pos, take) < 0)
                return -1;
            x->skip -= (long long)take;
            pos += take;
            continue;
        }
        if (x->head_len == 0 && x->delegate_pending) {
            x->delegate_pending = 0;
            x->delegate = 1;
            continue;
        }
        if (x->head_len == 0)
            head_at = (long)pos;
        size_t take = (size_t)(8 - x->head_len) < n - pos ? (size_t)(8 - x->head_len) : n - pos;
        memcpy(x->head + x->head_len, buf + pos, take);
        x->head_len += (int)take;
        pos += take;
        const char *head = head_at >= 0 ? buf + head_at : (const char *)x->head;
        int (*emit)(Pump *, const char *, size_t) = head_at >= 0 ? out : out_copy;
        if (x->head_len < 8) {
            /* no response is to be held: what came of the head goes on now, as relay.py's would
             * (a stream that is not Kafka never stalls here) */
            if (!l->expecting) {
                if (emit(p, head + x->head_passed, (size_t)(x->head_len - x->head_passed)) < 0)
                    return -1;
                x->head_passed = x->head_len;
            }
            break;
        }
        head_at = -1;
        int sent = x->head_passed;
        x->head_len = x->head_passed = 0;
        int32_t size = (int32_t)be32(x->head), corr = (int32_t)be32(x->head + 4);
        if (size < 4) {  /* not Kafka framing: the rest passes untouched */
            x->skip = NOT_KAFKA;
            if (emit(p, head + sent, (size_t)(8 - sent)) < 0)
                return -1;
            continue;
        }
        int slot = (int)((uint32_t)corr % TABLE), kind = PASS, api = 0, ver = 0;
        if (l->table[slot].used && l->table[slot].corr == corr) {
            api = l->table[slot].api;
            ver = l->table[slot].ver;
            kind = sent ? PASS : hold_kind(api, ver);
            l->table[slot].used = 0;
            l->expecting--;
        }
        long long whole = (long long)size + 4;
        if (kind != PASS && p->held + whole > p->max_held) {
            post(p, l, REFUSED, SERVER, NULL, 0, whole, api, ver, 0);
            kind = PASS;
        }
        if (kind == PASS) {
            if (emit(p, head + sent, (size_t)(8 - sent)) < 0)
                return -1;
            x->skip = size - 4;
            continue;
        }
        if ((x->held = malloc((size_t)whole)) == NULL)
            return -1;
        p->held += whole;
        memcpy(x->held, x->head, 8);
        x->held_len = 8;
        x->held_size = (size_t)whole;
        x->hold_kind = kind;
        x->hold_api = api;
        x->hold_ver = ver;
        if (x->held_len == x->held_size) {
            int r = frame_held(p, l);
            if (r)
                return r < 0 ? -1 : (long)pos;
        }
    }
    return (long)pos;
}

/* a chunk of ``n`` bytes kept for Python: no larger than it needs to be */
static char *
fitted(char *buf, size_t n, size_t size)
{
    if (n >= size / 2)
        return buf;
    char *small = realloc(buf, n ? n : 1);
    return small ? small : buf;
}

/* n bytes read from side d (or left over from before a release) in buf, which is the relay's to
 * keep (handed to Python with the copies) or free */
static void
relay(Pump *p, Link *l, int d, char *buf, size_t n, size_t size)
{
    if (d == REQ) {
        int stopped = l->stopped;
        size_t fwd = follow_requests(l, (const unsigned char *)buf, n);
        if (fwd && send_on(p, l, REQ, buf, fwd) == 0) {
            post(p, l, DATA, CLIENT, fitted(buf, fwd, size), fwd, 0, 0, 0, 1);
            buf = NULL;
        }
        if (l->stopped && !stopped)
            post(p, l, DRAINED, CLIENT, NULL, 0, l->not_forwarded, 0, 0, 0);
        free(buf);
        return;
    }
    out_reset(p);
    long taken = follow_responses(p, l, buf, n);
    if (taken < 0) {
        if (!l->closing)
            fail(p, l, RESP, ENOMEM);
        free(buf);
        return;
    }
    if (flush_out(p, l, &buf, n) < 0) {
        free(buf);
        return;
    }
    Dir *x = &l->d[RESP];
    if ((size_t)taken < n && buf != NULL) {
        x->rest = malloc(n - (size_t)taken);
        if (x->rest == NULL) {
            fail(p, l, RESP, ENOMEM);
            free(buf);
            return;
        }
        memcpy(x->rest, buf + taken, n - (size_t)taken);
        x->rest_len = n - (size_t)taken;
    }
    free(buf);
}

static void
readable(Pump *p, Link *l, int side)
{
    char *buf = malloc(p->chunk);
    if (buf == NULL) {
        fail(p, l, side, ENOMEM);
        return;
    }
    ssize_t n;
    do
        n = recv(l->fd[side], buf, p->chunk, 0);
    while (n < 0 && errno == EINTR);
    if (n <= 0)
        free(buf);
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            fail(p, l, side, errno);
        return;
    }
    if (n == 0) {
        Dir *x = &l->d[side];
        x->eof = 1;
        post(p, l, EOF_, side == REQ ? CLIENT : SERVER, NULL, 0, 0, 0, 0, 0);
        if (x->held) {  /* a frame cut by the end: its bytes go on as they came */
            out_reset(p);
            out_copy(p, x->held, x->held_len);
            p->held -= (long long)x->held_size;
            free(x->held);
            x->held = NULL;
            flush_out(p, l, NULL, 0);
        }
        return;
    }
    relay(p, l, side, buf, (size_t)n, p->chunk);
}

static void
writable(Pump *p, Link *l, int side)
{
    Dir *x = &l->d[1 - side];
    while (x->pend_off < x->pend_len) {
        ssize_t w = send(l->fd[side], x->pend + x->pend_off, x->pend_len - x->pend_off, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                x->pend_off = x->pend_len;
                fail(p, l, side, errno);
            }
            return;
        }
        x->pend_off += (size_t)w;
    }
    free(x->pend);
    x->pend = NULL;
    x->pend_off = x->pend_len = x->pend_cap = 0;
}

/* -- commands from Python -------------------------------------------------------------- */

static Link *
find(Pump *p, long conn)
{
    for (Link *l = p->links; l; l = l->next)
        if (l->conn == conn)
            return l;
    return NULL;
}

static void
command(Pump *p, Command *c)
{
    Link *l = c->what == ADD ? NULL : find(p, c->conn);
    if (c->what == ADD) {
        l = calloc(1, sizeof *l);
        if (l == NULL) {
            close(c->fd[0]);
            close(c->fd[1]);
            return;
        }
        l->conn = c->conn;
        for (int side = 0; side < 2; side++) {
            l->fd[side] = c->fd[side];
            l->handle[side] = (Handle){l, side};
            l->d[side].want = side == REQ ? 4 : 8;
            struct epoll_event ev = {.events = 0, .data.ptr = &l->handle[side]};
            epoll_ctl(p->epfd, EPOLL_CTL_ADD, l->fd[side], &ev);
        }
        l->next = p->links;
        p->links = l;
        watch(p, l);
        return;
    }
    if (l == NULL) {
        free(c->data);
        return;
    }
    if (c->what == RELEASE) {  /* Python's bytes go on, then what waited */
        Dir *x = &l->d[RESP];
        x->waiting = 0;
        if (!l->closing && c->len && send_on(p, l, RESP, c->data, c->len) < 0) {
            free(c->data);
            return;
        }
        free(c->data);
        if (x->rest_len && !l->closing) {
            char *rest = x->rest;
            size_t n = x->rest_len;
            x->rest = NULL;
            x->rest_len = 0;
            relay(p, l, RESP, rest, n, n);
        }
    } else if (c->what == DRAIN) {
        l->draining = 1;
        if (l->d[REQ].head_len == 0 && l->d[REQ].skip == 0 && !l->stopped) {
            l->stopped = 1;
            post(p, l, DRAINED, CLIENT, NULL, 0, l->not_forwarded, 0, 0, 0);
        } else {
            post(p, l, DRAINING, CLIENT, NULL, 0, 0, 0, 0, 0);
        }
    } else if (c->what == CLOSE) {
        l->closing = 1;
    }
    settle(p, l);
}

static void
commands(Pump *p)
{
    uint64_t v;
    ssize_t r = read(p->wake_fd, &v, 8);
    (void)r;
    pthread_mutex_lock(&p->mu);
    Command *c = p->commands;
    p->commands = NULL;
    p->commands_tail = &p->commands;
    pthread_mutex_unlock(&p->mu);
    while (c) {
        Command *next = c->next;
        command(p, c);
        free(c);
        c = next;
    }
}  /* links closed here are buried after the batch, with the others */

static void *
loop(void *arg)
{
    Pump *p = arg;
    struct epoll_event evs[64];
    while (p->running) {
        pthread_mutex_lock(&p->mu);
        while (p->queued > p->queue_limit && p->running)
            pthread_cond_wait(&p->drained, &p->mu);
        pthread_mutex_unlock(&p->mu);
        int k = epoll_wait(p->epfd, evs, 64, notify_due(p));
        for (int i = 0; i < k; i++) {
            if (evs[i].data.ptr == NULL) {
                commands(p);
                continue;
            }
            Handle *h = evs[i].data.ptr;
            Link *l = h->link;
            if (l->dead)
                continue;
            unsigned e = evs[i].events;
            if (e & EPOLLOUT)
                writable(p, l, h->side);
            if ((e & (EPOLLIN | EPOLLHUP | EPOLLERR)) && want_read(l, h->side)) {
                readable(p, l, h->side);
            } else if ((e & EPOLLERR) && !l->closing) {  /* broken while not read (a peer is slow) */
                int err = 0;
                socklen_t len = sizeof err;
                getsockopt(l->fd[h->side], SOL_SOCKET, SO_ERROR, &err, &len);
                fail(p, l, h->side, err ? err : EPIPE);
            } else if (e & (EPOLLHUP | EPOLLERR)) {  /* what is left to read waits for its turn */
                l->hup[h->side] = 1;
            }
            if (!l->dead)
                settle(p, l);
        }
        bury(p);
        notify_due(p);
    }
    return NULL;
}

/* -- the Python type ------------------------------------------------------------------- */

static int
Pump_init(Pump *p, PyObject *args, PyObject *kw)
{
    static char *names[] = {"max_held", "chunk", "queue_limit", NULL};
    long long max_held;
    Py_ssize_t chunk = 131072, queue_limit = 64 << 20;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "L|nn", names, &max_held, &chunk, &queue_limit))
        return -1;
    if (p->started) {
        PyErr_SetString(PyExc_RuntimeError, "Pump already started");
        return -1;
    }
    if (chunk < 4096)
        chunk = 4096;
    p->max_held = max_held;
    p->chunk = (size_t)chunk;
    p->queue_limit = (size_t)queue_limit;
    p->commands_tail = &p->commands;
    p->events_tail = &p->events;
    p->epfd = epoll_create1(EPOLL_CLOEXEC);
    p->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    p->notify_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (p->epfd < 0 || p->wake_fd < 0 || p->notify_fd < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->wake_fd, &ev);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->drained, NULL);
    p->running = 1;
    if (pthread_create(&p->thread, NULL, loop, p) != 0) {
        p->running = 0;
        PyErr_SetString(PyExc_OSError, "cannot start the relay thread");
        return -1;
    }
    p->started = 1;
    return 0;
}

static void
send_command(Pump *p, Command *c)
{
    pthread_mutex_lock(&p->mu);
    *p->commands_tail = c;
    p->commands_tail = &c->next;
    pthread_mutex_unlock(&p->mu);
    uint64_t one = 1;
    ssize_t w = write(p->wake_fd, &one, 8);
    (void)w;
}

static PyObject *
new_command(Pump *p, int what, long conn, int fd0, int fd1, const char *data, Py_ssize_t len)
{
    if (!p->started || !p->running) {
        PyErr_SetString(PyExc_RuntimeError, "the Pump is stopped");
        return NULL;
    }
    Command *c = calloc(1, sizeof *c);
    if (c == NULL || (data && (c->data = malloc(len ? (size_t)len : 1)) == NULL)) {
        free(c);
        return PyErr_NoMemory();
    }
    c->what = what;
    c->conn = conn;
    c->fd[0] = fd0;
    c->fd[1] = fd1;
    if (data) {
        memcpy(c->data, data, (size_t)len);
        c->len = (size_t)len;
    }
    send_command(p, c);
    Py_RETURN_NONE;
}

static PyObject *
Pump_add(Pump *p, PyObject *args)
{
    long conn;
    int client, server;
    if (!PyArg_ParseTuple(args, "lii", &conn, &client, &server))
        return NULL;
    return new_command(p, ADD, conn, client, server, NULL, 0);
}

static PyObject *
Pump_release(Pump *p, PyObject *args)
{
    long conn;
    Py_buffer data;
    if (!PyArg_ParseTuple(args, "ly*", &conn, &data))
        return NULL;
    PyObject *r = new_command(p, RELEASE, conn, -1, -1, data.buf, data.len);
    PyBuffer_Release(&data);
    return r;
}

static PyObject *
conn_command(Pump *p, PyObject *args, int what)
{
    long conn;
    if (!PyArg_ParseTuple(args, "l", &conn))
        return NULL;
    return new_command(p, what, conn, -1, -1, NULL, 0);
}

static PyObject *
Pump_drain(Pump *p, PyObject *args)
{
    return conn_command(p, args, DRAIN);
}

static PyObject *
Pump_close(Pump *p, PyObject *args)
{
    return conn_command(p, args, CLOSE);
}

static PyObject *
Pump_events(Pump *p, PyObject *unused)
{
    uint64_t v;
    ssize_t r = read(p->notify_fd, &v, 8);
    (void)r;
    pthread_mutex_lock(&p->mu);
    Event *e = p->events;
    p->events = NULL;
    p->events_tail = &p->events;
    p->queued = 0;
    p->notified = 0;
    p->unnotified = e != NULL ? 0 : p->unnotified;
    pthread_cond_signal(&p->drained);
    pthread_mutex_unlock(&p->mu);
    PyObject *list = PyList_New(0);
    while (e) {
        Event *next = e->next;
        if (list != NULL) {
            PyObject *data = e->data ? view_of(e->data, e->len) : (Py_INCREF(Py_None), Py_None);
            e->data = NULL;
            PyObject *t = data ? Py_BuildValue("(ilidNLii)", e->kind, e->conn, e->direction, e->ts, data, e->n,
                                               e->api_key, e->api_version) : NULL;
            if (t == NULL || PyList_Append(list, t) < 0)
                Py_CLEAR(list);
            Py_XDECREF(t);
        }
        free(e->data);
        free(e);
        e = next;
    }
    return list;
}

static void
stop(Pump *p)
{
    if (!p->started)
        return;
    pthread_mutex_lock(&p->mu);
    p->running = 0;
    pthread_cond_signal(&p->drained);
    pthread_mutex_unlock(&p->mu);
    uint64_t one = 1;
    ssize_t w = write(p->wake_fd, &one, 8);
    (void)w;
    Py_BEGIN_ALLOW_THREADS
    pthread_join(p->thread, NULL);
    Py_END_ALLOW_THREADS
    p->started = 0;
    while (p->links)
        close_link(p, p->links);
    bury(p);
    Command *c = p->commands;
    while (c) {
        Command *next = c->next;
        if (c->what == ADD) {
            close(c->fd[0]);
            close(c->fd[1]);
        }
        free(c->data);
        free(c);
        c = next;
    }
    p->commands = NULL;
    p->commands_tail = &p->commands;
}

static PyObject *
Pump_stop(Pump *p, PyObject *unused)
{
    stop(p);
    Py_RETURN_NONE;
}

static PyObject *
Pump_fileno(Pump *p, PyObject *unused)
{
    return PyLong_FromLong(p->notify_fd);
}

static void
Pump_dealloc(Pump *p)
{
    stop(p);
    Event *e = p->events;
    while (e) {
        Event *next = e->next;
        free(e->data);
        free(e);
        e = next;
    }
    if (p->epfd > 0)
        close(p->epfd);
    if (p->wake_fd > 0)
        close(p->wake_fd);
    if (p->notify_fd > 0)
        close(p->notify_fd);
    free(p->obuf);
    Py_TYPE(p)->tp_free((PyObject *)p);
}

static PyMethodDef Pump_methods[] = {
    {"add", (PyCFunction)Pump_add, METH_VARARGS, "add(conn, client_fd, server_fd): relay a link (the fds are the pump's now)"},
    {"release", (PyCFunction)Pump_release, METH_VARARGS, "release(conn, data): the bytes to send for the response handed over"},
    {"drain", (PyCFunction)Pump_drain, METH_VARARGS, "drain(conn): forward the request under way, then read the client no more"},
    {"close", (PyCFunction)Pump_close, METH_VARARGS, "close(conn): write what is pending, then close both sockets"},
    {"events", (PyCFunction)Pump_events, METH_NOARGS, "events(): what happened since the last call"},
    {"stop", (PyCFunction)Pump_stop, METH_NOARGS, "stop(): close every link, end the thread"},
    {"fileno", (PyCFunction)Pump_fileno, METH_NOARGS, "an eventfd, readable when events() has something"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject PumpType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kinspect.native._relay.Pump",
    .tp_basicsize = sizeof(Pump),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Pump_init,
    .tp_dealloc = (destructor)Pump_dealloc,
    .tp_methods = Pump_methods,
    .tp_doc = "the relay thread (see the module's notes)",
};

static PyMethodDef functions[] = {
    {"names_brokers", py_names_brokers, METH_VARARGS,
     "names_brokers(api_key, api_version, frame): whether a Produce v10+ or Fetch v16+ response frame "
     "carries KIP-951 NodeEndpoints (or does not walk cleanly); True for other APIs"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_relay", "The proxy's byte path in C (kinspect/proxy/pump.py uses it).", -1,
    functions, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__relay(void)
{
    if (PyType_Ready(&PumpType) < 0 || PyType_Ready(&ChunkType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&PumpType);
    PyModule_AddObject(m, "Pump", (PyObject *)&PumpType);
    PyModule_AddIntConstant(m, "DATA", DATA);
    PyModule_AddIntConstant(m, "HOLD", HOLD);
    PyModule_AddIntConstant(m, "EOF", EOF_);
    PyModule_AddIntConstant(m, "ERROR", ERROR_);
    PyModule_AddIntConstant(m, "CLOSED", CLOSED);
    PyModule_AddIntConstant(m, "REFUSED", REFUSED);
    PyModule_AddIntConstant(m, "DRAINED", DRAINED);
    PyModule_AddIntConstant(m, "DRAINING", DRAINING);
    return m;
}
