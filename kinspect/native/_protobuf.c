/* Protobuf payloads straight to JSON text (schemas/protobuf_json.py's walker, in C).
 *
 * Walker(spec).walk(payload, message_id) -> bytes | None
 * walker.bind(resolve); walker.read_json(payload, indexes) -> (full name, bytes) | None
 * walker.framed(about_of)(payload after the id) -> (bytes, about_of(name)) | None
 * walker.capsule(message_id): a JsonReader capsule (_json_out.h) for the index list [0]
 *
 * spec is the tables JsonTables builds from a schema's descriptors (its docstring says the
 * layout and what the JSON is). A message is read in two steps: a scan of its bytes records
 * each known field's occurrences (last one wins for scalars, all of them for messages and
 * repeated fields, oneofs resolved), then its fields are written in number order. A singular
 * message's occurrences are scanned one after the other, as one merged message. Every length,
 * tag and varint is checked against the bytes left; anything the Python path would not show
 * exactly like this gives None. Occurrences and per-message slots live on two stacks popped as
 * each message ends, so memory is bounded by the payload's size and MAX_DEPTH.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "_json_out.h"  /* Out and the JsonReader capsule (records/packed.py's seam) */
#pragma GCC diagnostic pop

#define MAX_DEPTH 64
#define MAX_OUT ((size_t)1 << 28)  /* 256 MiB of JSON: beyond, the Python path */
#define DENSE_LIMIT 4096
#define F_REPEATED 1
#define F_PRESENCE 2
#define F_MAP 4
#define ONEOF_SHIFT 8
#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

enum { T_DOUBLE = 1, T_FLOAT, T_INT64, T_UINT64, T_INT32, T_FIXED64, T_FIXED32, T_BOOL, T_STRING,
       T_GROUP, T_MESSAGE, T_BYTES, T_UINT32, T_ENUM, T_SFIXED32, T_SFIXED64, T_SINT32, T_SINT64 };

typedef struct {
    Py_ssize_t count;
    int closed, null;
    int32_t *numbers;
    char **names;  /* JSON strings, quoted; NULL: a value with options */
    Py_ssize_t *lens;
} Enum;

typedef struct {
    uint32_t number;
    int type, wt, flags, oneof;  /* oneof: 0 none, else index + 1 */
    int32_t sub, en;
    char *key;  /* "name": */
    Py_ssize_t key_len;
} Field;

typedef struct {
    int supported, noneofs;
    Py_ssize_t nfields;
    Field *fields;
    int32_t *dense;  /* number -> field index (-1), numbers below ndense */
    uint32_t ndense;
} Message;

typedef struct {
    uint32_t start, end;
    int32_t next;
    uint8_t wt;
} Occ;

typedef struct {
    PyObject_HEAD
    Py_ssize_t nmessages, nenums;
    Message *messages;
    Enum *enums;
    PyObject *names;    /* read_json's: tuple(indexes) -> (full name, message id) */
    PyObject *resolve;  /* resolve(indexes) -> (full name, message id) | None, for names' misses */
    struct Scratch {    /* the last walk's buffers, kept for the next (under the GIL, one at a time) */
        Occ *occ;
        int32_t *slots;
        char *out;
        size_t cap_occ, cap_slots, cap_out;
    } scratch;
} Walker;

typedef struct {
    const uint8_t *buf;
    Walker *w;
    Occ *occ;
    size_t nocc, cap_occ;
    int32_t *slots;
    size_t nslots, cap_slots;
    char *out;
    size_t len, cap;
} Ctx;

/* -- growing buffers ---------------------------------------------------------------------- */

static int
stack_grow(void **data, size_t *cap, size_t need, size_t item)
{
    if (need <= *cap)
        return 0;
    size_t cap2 = *cap ? *cap : 64;
    while (cap2 < need)
        cap2 *= 2;
    if (cap2 > MAX_OUT / item * 4)
        return -1;
    void *data2 = PyMem_Realloc(*data, cap2 * item);
    if (data2 == NULL)
        return -1;
    *data = data2;
    *cap = cap2;
    return 0;
}

static inline int
room(Ctx *c, size_t n)
{
    if (c->len + n <= c->cap)
        return 0;
    if (c->len + n > MAX_OUT)
        return -1;
    return stack_grow((void **)&c->out, &c->cap, c->len + n, 1);
}

static inline int
put(Ctx *c, const char *s, size_t n)
{
    if (room(c, n) < 0)
        return -1;
    memcpy(c->out + c->len, s, n);
    c->len += n;
    return 0;
}

static inline int
putc1(Ctx *c, char ch)
{
    if (room(c, 1) < 0)
        return -1;
    c->out[c->len++] = ch;
    return 0;
}

static inline int32_t
push_occ(Ctx *c, uint32_t start, uint32_t end, uint8_t wt)
{
    if (c->nocc >= INT32_MAX || stack_grow((void **)&c->occ, &c->cap_occ, c->nocc + 1, sizeof(Occ)) < 0)
        return -1;
    Occ *o = &c->occ[c->nocc];
    o->start = start;
    o->end = end;
    o->wt = wt;
    o->next = -1;
    return (int32_t)c->nocc++;
}

/* -- reading ------------------------------------------------------------------------------ */

static inline int
varint(const uint8_t *buf, uint32_t *pos, uint32_t end, uint64_t *value)
{
    uint64_t result = 0;
    uint32_t p = *pos;
    if (p < end && buf[p] < 0x80) {
        *value = buf[p];
        *pos = p + 1;
        return 0;
    }
    for (int i = 0; i < 10; i++) {
        if (p >= end)
            return -1;
        uint8_t byte = buf[p++];
        result |= (uint64_t)(byte & 0x7F) << (7 * i);
        if (byte < 0x80) {
            *value = result;
            *pos = p;
            return 0;
        }
    }
    return -1;
}

static int
valid_utf8(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t b = s[i];
        if (b < 0x80) {
            uint64_t word;
            if (i + 8 <= n && (memcpy(&word, s + i, 8), (word & HIGHS) == 0))
                i += 8;
            else
                i++;
            continue;
        }
        size_t more;
        uint32_t cp;
        if (b >= 0xC2 && b <= 0xDF) {
            more = 1;
            cp = b & 0x1F;
        } else if (b >= 0xE0 && b <= 0xEF) {
            more = 2;
            cp = b & 0x0F;
        } else if (b >= 0xF0 && b <= 0xF4) {
            more = 3;
            cp = b & 0x07;
        } else {
            return 0;
        }
        if (n - i <= more)
            return 0;
        for (size_t k = 1; k <= more; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if ((more == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (more == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        i += more + 1;
    }
    return 1;
}

static inline uint32_t
le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t
le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static inline int
field_index(const Message *m, uint64_t number)
{
    if (number < m->ndense)
        return m->dense[number];
    Py_ssize_t lo = 0, hi = m->nfields;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (m->fields[mid].number < number)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < m->nfields && m->fields[lo].number == number ? (int)lo : -1;
}

/* -- writing scalars ---------------------------------------------------------------------- */

static const char HEX[] = "0123456789abcdef";

/* Whether any byte of the word is below 0x20, '"' or '\\' (word-at-a-time tests). */
static inline int
needs_escape(uint64_t x)
{
    uint64_t quote = x ^ (ONES * '"'), slash = x ^ (ONES * '\\');
    return ((((x - ONES * 0x20) & ~x) | ((quote - ONES) & ~quote) | ((slash - ONES) & ~slash)) & HIGHS) != 0;
}

static int
put_str(Ctx *c, const uint8_t *s, size_t n)
{
    if (room(c, n * 6 + 2) < 0)
        return -1;
    char *o = c->out + c->len;
    *o++ = '"';
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t word;
        memcpy(&word, s + i, 8);
        if (needs_escape(word))
            break;
        memcpy(o, &word, 8);
        o += 8;
    }
    for (; i < n; i++) {
        uint8_t ch = s[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\') {
            *o++ = (char)ch;
            continue;
        }
        *o++ = '\\';
        switch (ch) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '\b': *o++ = 'b'; break;
        case '\t': *o++ = 't'; break;
        case '\n': *o++ = 'n'; break;
        case '\f': *o++ = 'f'; break;
        case '\r': *o++ = 'r'; break;
        default:
            *o++ = 'u'; *o++ = '0'; *o++ = '0';
            *o++ = HEX[ch >> 4]; *o++ = HEX[ch & 15];
        }
    }
    *o++ = '"';
    c->len = (size_t)(o - c->out);
    return 0;
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int
put_b64(Ctx *c, const uint8_t *s, size_t n)
{
    if (room(c, (n + 2) / 3 * 4 + 2) < 0)
        return -1;
    char *o = c->out + c->len;
    *o++ = '"';
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        *o++ = B64[v >> 18]; *o++ = B64[v >> 12 & 63]; *o++ = B64[v >> 6 & 63]; *o++ = B64[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)s[i] << 16;
        *o++ = B64[v >> 18]; *o++ = B64[v >> 12 & 63]; *o++ = '='; *o++ = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8;
        *o++ = B64[v >> 18]; *o++ = B64[v >> 12 & 63]; *o++ = B64[v >> 6 & 63]; *o++ = '=';
    }
    *o++ = '"';
    c->len = (size_t)(o - c->out);
    return 0;
}

static int
put_u64(Ctx *c, uint64_t v, int negative, int quoted)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (room(c, 24) < 0)
        return -1;
    char *o = c->out + c->len;
    if (quoted)
        *o++ = '"';
    if (negative)
        *o++ = '-';
    while (n)
        *o++ = tmp[--n];
    if (quoted)
        *o++ = '"';
    c->len = (size_t)(o - c->out);
    return 0;
}

static inline int
put_i64(Ctx *c, int64_t v, int quoted)
{
    return v < 0 ? put_u64(c, (uint64_t)0 - (uint64_t)v, 1, quoted) : put_u64(c, (uint64_t)v, 0, quoted);
}

typedef unsigned __int128 u128;

/* Whether some multiple of 10^-f lies in the interval [low, high] / 2^shift (ends included
 * when even), scale = 10^f. */
static inline int
holds(u128 low, u128 high, int even, int shift, u128 scale)
{
    u128 lo = low * scale, hi = high * scale;
    u128 lo_n = even ? (lo + (((u128)1 << shift) - 1)) >> shift : (lo >> shift) + 1;
    u128 hi_n = even ? hi >> shift : (hi - 1) >> shift;
    return lo_n <= hi_n;
}

/* The shortest decimal that reads back as v, the nearest to v of those, for 1e-3 <= v < 2^52,
 * where it is written plainly: exact integer arithmetic on v = m * 2^e (e < 0, so the interval
 * of decimals that round to v, scaled by 2^(2 - e), has integer bounds). Each count of decimal
 * places f is tried from 0 up; the first that holds a decimal in the interval is the shortest.
 * Returns 0, or -1 when v is outside that range (then Python's repr is asked). */
static int
put_plain_double(Ctx *c, double v)
{
    if (!(v >= 1e-3 && v < 4503599627370496.0))
        return -1;
    uint64_t bits;
    memcpy(&bits, &v, 8);
    int exponent = (int)(bits >> 52 & 0x7FF);
    if (exponent == 0)
        return -1;
    uint64_t m = (bits & 0xFFFFFFFFFFFFFull) | 0x10000000000000ull;
    int shift = 1075 - exponent + 2;  /* v * 2^shift = 4m */
    if (shift <= 2 || shift > 100)
        return -1;
    int even = (m & 1) == 0;
    u128 mid = (u128)m << 2, high = mid + 2;
    u128 low = m == 0x10000000000000ull ? mid - 1 : mid - 2;  /* below a power of two: half the gap */
    static u128 powers[21];
    if (powers[0] == 0) {
        powers[0] = 1;
        for (int i = 1; i <= 20; i++)
            powers[i] = powers[i - 1] * 10;
    }
    /* Whether f places hold a decimal of the interval grows with f. 17 significant digits
     * always do; most doubles need 16 or 17, so those are looked at first, then halving. */
    static const double tens[] = {1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12,
                                  1e13, 1e14, 1e15, 1e16};
    int e10 = v < 1e-2 ? -3 : v < 1e-1 ? -2 : v < 1 ? -1 : 0;
    while (e10 >= 0 && e10 < 15 && v >= tens[e10])
        e10++;  /* v < 10^(e10 + 1) */
    int f17 = 16 - e10, first, last;
#define HOLDS(f) holds(low, high, even, shift, powers[f])
    if (f17 < 0 || f17 > 20)
        return -1;
    if (f17 >= 1 && HOLDS(f17 - 1)) {
        first = 0;
        last = f17 - 1;
        if (f17 >= 2 && !HOLDS(f17 - 2))
            first = last;
    } else {
        if (!HOLDS(f17))
            return -1;
        first = last = f17;
    }
    while (first < last) {
        int f = (first + last) / 2;
        if (HOLDS(f))
            last = f;
        else
            first = f + 1;
    }
#undef HOLDS
    if (first > 20)
        return -1;
    {
        int f = first;
        u128 lo = low * powers[f], hi = high * powers[f], at = mid * powers[f];
        u128 lo_n = even ? (lo + (((u128)1 << shift) - 1)) >> shift : (lo >> shift) + 1;
        u128 hi_n = even ? hi >> shift : (hi - 1) >> shift;
        u128 exact = at >> shift, rest = at & (((u128)1 << shift) - 1), half = (u128)1 << (shift - 1);
        if (rest > half || (rest == half && (exact & 1)))
            exact++;  /* the nearest, a tie to the even digit */
        if (exact < lo_n)
            exact = lo_n;
        if (exact > hi_n)
            exact = hi_n;
        uint64_t near = (uint64_t)exact;  /* at most 18 digits */
        char digits[48];
        int n = 0;
        do {
            digits[n++] = (char)('0' + (int)(near % 10));
            near /= 10;
        } while (near);
        while (n <= f)
            digits[n++] = '0';
        if (room(c, (size_t)n + 4) < 0)
            return -2;
        char *o = c->out + c->len;
        for (int i = n - 1; i >= f; i--)
            *o++ = digits[i];
        *o++ = '.';
        if (f == 0)
            *o++ = '0';
        for (int i = f - 1; i >= 0; i--)
            *o++ = digits[i];
        c->len = (size_t)(o - c->out);
        return 0;
    }
}

/* A finite double as orjson writes it: the shortest round-trip digits (Python's repr), plainly
 * written from 1e-5 up to 1e16, else d.ddde±x with no padded exponent. */
static int
put_double(Ctx *c, double v)
{
    size_t mark = c->len;
    if (v < 0 && v > -4503599627370496.0 && v <= -1e-3) {
        if (putc1(c, '-') < 0)
            return -1;
        int rc = put_plain_double(c, -v);
        if (rc == 0)
            return 0;
        if (rc == -2)
            return -1;
        c->len = mark;
    } else if (v >= 1e-3) {
        int rc = put_plain_double(c, v);
        if (rc == 0)
            return 0;
        if (rc == -2)
            return -1;
    }
    char *repr = PyOS_double_to_string(v, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (repr == NULL) {
        PyErr_Clear();
        return -1;
    }
    int rc = 0;
    char *e = strchr(repr, 'e');
    if (e == NULL) {
        rc = put(c, repr, strlen(repr));
    } else {
        int exponent = atoi(e + 1);
        if (exponent == -5) {  /* d.ddde-05 -> 0.0000dddd */
            char *p = repr;
            if (*p == '-')
                rc |= putc1(c, *p++);
            rc |= put(c, "0.0000", 6);
            for (; p < e; p++)
                if (*p != '.')
                    rc |= putc1(c, *p);
        } else {
            rc |= put(c, repr, (size_t)(e - repr) + 1);
            const char *x = e + 1;
            if (*x == '+' || *x == '-')
                rc |= putc1(c, *x++);
            while (*x == '0' && x[1] != '\0')
                x++;
            rc |= put(c, x, strlen(x));
        }
    }
    PyMem_Free(repr);
    return rc ? -1 : 0;
}

static int
put_special(Ctx *c, double v)
{
    if (v != v)
        return put(c, "\"NaN\"", 5);
    return v > 0 ? put(c, "\"Infinity\"", 10) : put(c, "\"-Infinity\"", 11);
}

/* protobuf's ToShortestFloat: the fewest digits (6 to 9) that read back as the same float. */
static double
shortest_float(float f)
{
    double original = (double)f;
    char tmp[40];
    double rounded = original;
    for (int precision = 6; precision <= 17; precision++) {
        snprintf(tmp, sizeof tmp, "%.*g", precision, original);
        rounded = strtod(tmp, NULL);
        if ((double)(float)rounded == original)
            break;
    }
    return rounded;
}

/* -- messages ----------------------------------------------------------------------------- */

static int emit_message(Ctx *c, int32_t mid, int32_t head, int depth);

#define SLOT(base, i) (c->slots[(base) + (i)])

static int
scan(Ctx *c, int32_t mid, int32_t head, int depth, size_t base, int entry)
{
    const Message *m = &c->w->messages[mid];
    const uint8_t *buf = c->buf;
    size_t cases = base + 2 * (size_t)m->nfields;
    for (int32_t seg = head; seg >= 0; seg = c->occ[seg].next) {
        uint32_t pos = c->occ[seg].start, end = c->occ[seg].end;
        while (pos < end) {
            uint64_t tag, value;
            if (varint(buf, &pos, end, &tag) < 0 || tag > 0xFFFFFFFFu || tag >> 3 == 0)
                return -1;
            uint8_t wt = tag & 7;
            uint32_t start = pos;
            if (wt == 0) {
                if (varint(buf, &pos, end, &value) < 0)
                    return -1;
            } else if (wt == 1 || wt == 5) {
                uint32_t size = wt == 1 ? 8 : 4;
                if (end - pos < size)
                    return -1;
                pos += size;
            } else if (wt == 2) {
                if (varint(buf, &pos, end, &value) < 0 || value > end - pos)
                    return -1;
                start = pos;
                pos += (uint32_t)value;
            } else {
                return -1;
            }
            int index = field_index(m, tag >> 3);
            if (index < 0) {
                if (entry)
                    return -1;  /* upb moves such a map entry aside */
                continue;
            }
            const Field *f = &m->fields[index];
            if (wt != f->wt && !(wt == 2 && f->flags & F_REPEATED && f->wt != 2))
                return -1;
            if (f->type == T_STRING && !valid_utf8(buf + start, pos - start))
                return -1;
            int32_t o = push_occ(c, start, pos, wt);
            if (o < 0)
                return -1;
            if (f->oneof && SLOT(cases, f->oneof - 1) != index) {
                int32_t old = SLOT(cases, f->oneof - 1);
                if (old >= 0) {
                    int32_t gone = SLOT(base, 2 * old);
                    SLOT(base, 2 * old) = SLOT(base, 2 * old + 1) = -1;
                    if (m->fields[old].type == T_MESSAGE) {  /* parsed before it was replaced */
                        size_t mark = c->len;
                        if (emit_message(c, m->fields[old].sub, gone, depth + 1) < 0)
                            return -1;
                        c->len = mark;
                    }
                }
                SLOT(base, 2 * index) = SLOT(base, 2 * index + 1) = -1;
                SLOT(cases, f->oneof - 1) = index;
            }
            int32_t tail = SLOT(base, 2 * index + 1);
            if (tail >= 0 && (f->flags & F_REPEATED || f->type == T_MESSAGE)) {
                c->occ[tail].next = o;
            } else {
                SLOT(base, 2 * index) = o;
            }
            SLOT(base, 2 * index + 1) = o;
        }
    }
    return 0;
}

/* One value of a scalar field at [start, end) (for wire type 0, the varint's bytes). */
typedef struct {
    uint64_t bits;
    const uint8_t *data;
    size_t size;
} Raw;

static inline int
raw_of(const Ctx *c, const Field *f, uint32_t start, uint32_t end, Raw *raw)
{
    raw->data = c->buf + start;
    raw->size = end - start;
    if (f->wt == 0) {
        uint32_t p = start;
        if (varint(c->buf, &p, end, &raw->bits) < 0)
            return -1;
        switch (f->type) {
        case T_INT32: case T_ENUM: case T_UINT32: raw->bits &= 0xFFFFFFFFu; break;
        case T_SINT32: raw->bits &= 0xFFFFFFFFu; break;
        case T_BOOL: raw->bits = raw->bits != 0; break;
        }
    } else if (f->wt == 1) {
        raw->bits = le64(raw->data);
    } else if (f->wt == 5) {
        raw->bits = le32(raw->data);
    } else {
        raw->bits = raw->size;
    }
    return 0;
}

static int
put_enum(Ctx *c, const Enum *e, int32_t number)
{
    if (e->null)
        return put(c, "null", 4);
    Py_ssize_t lo = 0, hi = e->count;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (e->numbers[mid] < number)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < e->count && e->numbers[lo] == number) {
        if (e->names[lo] == NULL)
            return -1;  /* a value with options: json_format's */
        return put(c, e->names[lo], (size_t)e->lens[lo]);
    }
    if (e->closed)
        return -1;
    return put_i64(c, number, 0);
}

static int
put_scalar(Ctx *c, const Field *f, const Raw *raw)
{
    switch (f->type) {
    case T_DOUBLE: {
        double d;
        memcpy(&d, &raw->bits, 8);
        return isfinite(d) ? put_double(c, d) : put_special(c, d);
    }
    case T_FLOAT: {
        uint32_t b = (uint32_t)raw->bits;
        float fl;
        memcpy(&fl, &b, 4);
        return isfinite(fl) ? put_double(c, shortest_float(fl)) : put_special(c, (double)fl);
    }
    case T_INT64: case T_SFIXED64: return put_i64(c, (int64_t)raw->bits, 1);
    case T_UINT64: case T_FIXED64: return put_u64(c, raw->bits, 0, 1);
    case T_SINT64: return put_i64(c, (int64_t)(raw->bits >> 1) ^ -(int64_t)(raw->bits & 1), 1);
    case T_INT32: case T_SFIXED32: return put_i64(c, (int32_t)(uint32_t)raw->bits, 0);
    case T_UINT32: case T_FIXED32: return put_u64(c, raw->bits & 0xFFFFFFFFu, 0, 0);
    case T_SINT32: {
        uint32_t b = (uint32_t)raw->bits;
        return put_i64(c, (int32_t)(b >> 1) ^ -(int32_t)(b & 1), 0);
    }
    case T_BOOL: return raw->bits ? put(c, "true", 4) : put(c, "false", 5);
    case T_STRING: return put_str(c, raw->data, raw->size);
    case T_BYTES: return put_b64(c, raw->data, raw->size);
    case T_ENUM: return put_enum(c, &c->w->enums[f->en], (int32_t)(uint32_t)raw->bits);
    }
    return -1;
}

static int
emit_packed(Ctx *c, const Field *f, uint32_t pos, uint32_t end, size_t *count)
{
    Raw raw;
    while (pos < end) {
        uint32_t start = pos;
        if (f->wt == 0) {
            uint64_t ignored;
            if (varint(c->buf, &pos, end, &ignored) < 0)
                return -1;
        } else {
            uint32_t size = f->wt == 1 ? 8 : 4;
            if (end - pos < size)
                return -1;
            pos += size;
        }
        if ((*count)++ && putc1(c, ',') < 0)
            return -1;
        if (raw_of(c, f, start, pos, &raw) < 0 || put_scalar(c, f, &raw) < 0)
            return -1;
    }
    return 0;
}

typedef struct {
    size_t text, text_end;  /* "key":value in c->out */
    size_t key, key_len;    /* the key's text, in the payload or in c->out */
    int in_payload;
    size_t order;
} Entry;

static const Ctx *sorting;

static int
entry_cmp(const void *a, const void *b)
{
    const Entry *x = a, *y = b;
    const char *kx = x->in_payload ? (const char *)sorting->buf + x->key : sorting->out + x->key;
    const char *ky = y->in_payload ? (const char *)sorting->buf + y->key : sorting->out + y->key;
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int r = memcmp(kx, ky, n);
    if (r)
        return r;
    if (x->key_len != y->key_len)
        return x->key_len < y->key_len ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* One map entry as "key":value at c->out's end; its key's text noted for sorting. */
static int
emit_entry(Ctx *c, int32_t mid, int32_t one, int depth, Entry *entry)
{
    const Message *m = &c->w->messages[mid];
    if (depth > MAX_DEPTH || !m->supported || m->nfields != 2 || m->fields[0].number != 1 ||
        m->fields[1].number != 2)
        return -1;
    size_t mark_occ = c->nocc, base = c->nslots;
    if (stack_grow((void **)&c->slots, &c->cap_slots, base + 4, sizeof(int32_t)) < 0)
        return -1;
    c->nslots = base + 4;
    for (int i = 0; i < 4; i++)
        c->slots[base + i] = -1;
    if (scan(c, mid, one, depth, base, 1) < 0)
        return -1;
    const Field *key = &m->fields[0], *value = &m->fields[1];
    Raw raw = {0, c->buf, 0};
    int32_t k = SLOT(base, 1);  /* the last occurrence */
    if (k >= 0 && raw_of(c, key, c->occ[k].start, c->occ[k].end, &raw) < 0)
        return -1;
    entry->text = c->len;
    if (key->type == T_STRING) {
        entry->in_payload = 1;
        entry->key = (size_t)(raw.data - c->buf);
        entry->key_len = raw.size;
        if (put_str(c, raw.data, raw.size) < 0)
            return -1;
    } else {
        if (putc1(c, '"') < 0)
            return -1;
        entry->in_payload = 0;
        entry->key = c->len;
        int rc;
        switch (key->type) {
        case T_INT64: case T_SFIXED64: rc = put_i64(c, (int64_t)raw.bits, 0); break;
        case T_UINT64: case T_FIXED64: rc = put_u64(c, raw.bits, 0, 0); break;
        case T_SINT64: rc = put_i64(c, (int64_t)(raw.bits >> 1) ^ -(int64_t)(raw.bits & 1), 0); break;
        case T_BOOL: case T_INT32: case T_SFIXED32: case T_UINT32: case T_FIXED32: case T_SINT32:
            rc = put_scalar(c, key, &raw);
            break;
        default: rc = -1;
        }
        if (rc < 0)
            return -1;
        entry->key_len = c->len - entry->key;
        if (putc1(c, '"') < 0)
            return -1;
    }
    if (putc1(c, ':') < 0)
        return -1;
    int32_t v = SLOT(base, 2);
    if (value->type == T_MESSAGE) {
        if (emit_message(c, value->sub, v, depth + 1) < 0)
            return -1;
    } else {
        Raw shown = {0, c->buf, 0};
        int32_t last = SLOT(base, 3);
        if (last >= 0 && raw_of(c, value, c->occ[last].start, c->occ[last].end, &shown) < 0)
            return -1;
        if (put_scalar(c, value, &shown) < 0)
            return -1;
    }
    entry->text_end = c->len;
    c->nocc = mark_occ;
    c->nslots = base;
    return 0;
}

static int
emit_map(Ctx *c, const Field *f, int32_t head, int depth)
{
    size_t start = c->len, n = 0, cap = 0;
    Entry *entries = NULL;
    int rc = -1;
    for (int32_t o = head; o >= 0; o = c->occ[o].next) {
        if (stack_grow((void **)&entries, &cap, n + 1, sizeof(Entry)) < 0)
            goto done;
        int32_t one = push_occ(c, c->occ[o].start, c->occ[o].end, 2);
        if (one < 0 || emit_entry(c, f->sub, one, depth + 1, &entries[n]) < 0)
            goto done;
        c->nocc--;  /* the entry's own segment */
        entries[n].order = n;
        n++;
    }
    sorting = c;
    qsort(entries, n, sizeof(Entry), entry_cmp);
    size_t total = 2;
    for (size_t i = 0; i < n; i++)
        total += entries[i].text_end - entries[i].text + 1;
    char *joined = PyMem_Malloc(total);
    if (joined == NULL)
        goto done;
    size_t at = 0;
    joined[at++] = '{';
    for (size_t i = 0; i < n; i++) {
        if (i + 1 < n) {
            Entry a = entries[i], b = entries[i + 1];
            a.order = b.order = 0;
            if (entry_cmp(&a, &b) == 0)
                continue;  /* the same key again later: the later entry wins */
        }
        if (at > 1)
            joined[at++] = ',';
        size_t size = entries[i].text_end - entries[i].text;
        memcpy(joined + at, c->out + entries[i].text, size);
        at += size;
    }
    joined[at++] = '}';
    c->len = start;
    rc = put(c, joined, at);
    PyMem_Free(joined);
done:
    PyMem_Free(entries);
    return rc;
}

static int
emit_field(Ctx *c, const Field *f, int32_t head, int32_t last, int depth)
{
    if (f->flags & F_MAP)
        return emit_map(c, f, head, depth);
    if (f->flags & F_REPEATED) {
        size_t count = 0;
        if (putc1(c, '[') < 0)
            return -1;
        for (int32_t o = head; o >= 0; o = c->occ[o].next) {
            const Occ *occ = &c->occ[o];
            if (occ->wt == 2 && f->wt != 2) {
                if (emit_packed(c, f, occ->start, occ->end, &count) < 0)
                    return -1;
                continue;
            }
            if (count++ && putc1(c, ',') < 0)
                return -1;
            if (f->type == T_MESSAGE) {
                int32_t one = push_occ(c, occ->start, occ->end, 2);
                if (one < 0 || emit_message(c, f->sub, one, depth + 1) < 0)
                    return -1;
                c->nocc--;
            } else {
                Raw raw;
                if (raw_of(c, f, occ->start, occ->end, &raw) < 0 || put_scalar(c, f, &raw) < 0)
                    return -1;
            }
        }
        if (count == 0)
            return 1;  /* nothing to show */
        return putc1(c, ']');
    }
    if (f->type == T_MESSAGE)
        return emit_message(c, f->sub, head, depth + 1);
    Raw raw;
    if (raw_of(c, f, c->occ[last].start, c->occ[last].end, &raw) < 0)
        return -1;
    if (!(f->flags & F_PRESENCE) && raw.bits == 0)
        return 1;
    return put_scalar(c, f, &raw);
}

/* The message whose bytes are the segments chained from head (none: an empty message). */
static int
emit_message(Ctx *c, int32_t mid, int32_t head, int depth)
{
    const Message *m = &c->w->messages[mid];
    if (depth > MAX_DEPTH || !m->supported)
        return -1;
    size_t mark_occ = c->nocc, base = c->nslots;
    size_t nslots = 2 * (size_t)m->nfields + (size_t)m->noneofs;
    if (stack_grow((void **)&c->slots, &c->cap_slots, base + nslots, sizeof(int32_t)) < 0)
        return -1;
    c->nslots = base + nslots;
    for (size_t i = 0; i < nslots; i++)
        c->slots[base + i] = -1;
    if (scan(c, mid, head, depth, base, 0) < 0)
        return -1;
    if (putc1(c, '{') < 0)
        return -1;
    int shown = 0;
    for (Py_ssize_t i = 0; i < m->nfields; i++) {
        int32_t first = SLOT(base, 2 * i);
        if (first < 0)
            continue;
        const Field *f = &m->fields[i];
        size_t mark = c->len;
        if ((shown && putc1(c, ',') < 0) || put(c, f->key, (size_t)f->key_len) < 0)
            return -1;
        int rc = emit_field(c, f, first, SLOT(base, 2 * i + 1), depth);
        if (rc < 0)
            return -1;
        if (rc > 0)
            c->len = mark;
        else
            shown = 1;
    }
    if (putc1(c, '}') < 0)
        return -1;
    c->nocc = mark_occ;
    c->nslots = base;
    return 0;
}

/* -- the Walker type ---------------------------------------------------------------------- */

static void
walker_clear(Walker *w)
{
    for (Py_ssize_t i = 0; i < w->nmessages && w->messages; i++) {
        Message *m = &w->messages[i];
        for (Py_ssize_t k = 0; k < m->nfields && m->fields; k++)
            PyMem_Free(m->fields[k].key);
        PyMem_Free(m->fields);
        PyMem_Free(m->dense);
    }
    for (Py_ssize_t i = 0; i < w->nenums && w->enums; i++) {
        Enum *e = &w->enums[i];
        for (Py_ssize_t k = 0; k < e->count && e->names; k++)
            PyMem_Free(e->names[k]);
        PyMem_Free(e->names);
        PyMem_Free(e->numbers);
        PyMem_Free(e->lens);
    }
    PyMem_Free(w->messages);
    PyMem_Free(w->enums);
    w->messages = NULL;
    w->enums = NULL;
    w->nmessages = w->nenums = 0;
}

static void
walker_dealloc(Walker *w)
{
    walker_clear(w);
    PyMem_Free(w->scratch.occ);
    PyMem_Free(w->scratch.slots);
    PyMem_Free(w->scratch.out);
    Py_CLEAR(w->names);
    Py_CLEAR(w->resolve);
    Py_TYPE(w)->tp_free((PyObject *)w);
}

/* A Python str as a JSON string (with suffix), in PyMem memory. */
static char *
json_text(PyObject *text, const char *suffix, Py_ssize_t *len)
{
    Py_ssize_t size;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &size);
    if (utf8 == NULL)
        return NULL;
    Ctx c = {0};
    if (put_str(&c, (const uint8_t *)utf8, (size_t)size) < 0 || put(&c, suffix, strlen(suffix)) < 0) {
        PyMem_Free(c.out);
        PyErr_NoMemory();
        return NULL;
    }
    *len = (Py_ssize_t)c.len;
    return c.out;
}

static int
bad_spec(const char *what)
{
    PyErr_Format(PyExc_ValueError, "protobuf walker spec: %s", what);
    return -1;
}

static int
load_enum(Enum *e, PyObject *spec)
{
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 3 || !PyTuple_Check(PyTuple_GET_ITEM(spec, 2)))
        return bad_spec("an enum is (closed, null, values)");
    e->closed = PyObject_IsTrue(PyTuple_GET_ITEM(spec, 0));
    e->null = PyObject_IsTrue(PyTuple_GET_ITEM(spec, 1));
    PyObject *values = PyTuple_GET_ITEM(spec, 2);
    Py_ssize_t n = PyTuple_GET_SIZE(values);
    e->numbers = PyMem_Calloc((size_t)n + 1, sizeof(int32_t));
    e->names = PyMem_Calloc((size_t)n + 1, sizeof(char *));
    e->lens = PyMem_Calloc((size_t)n + 1, sizeof(Py_ssize_t));
    if (!e->numbers || !e->names || !e->lens) {
        PyErr_NoMemory();
        return -1;
    }
    e->count = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(values, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2)
            return bad_spec("an enum value is (number, name)");
        long number = PyLong_AsLong(PyTuple_GET_ITEM(item, 0));
        if (number == -1 && PyErr_Occurred())
            return -1;
        if (number < INT32_MIN || number > INT32_MAX || (i && number <= e->numbers[i - 1]))
            return bad_spec("enum numbers are sorted int32s");
        e->numbers[i] = (int32_t)number;
        PyObject *name = PyTuple_GET_ITEM(item, 1);
        if (name != Py_None && (e->names[i] = json_text(name, "", &e->lens[i])) == NULL)
            return -1;
    }
    return 0;
}

static int
load_message(Walker *w, Message *m, PyObject *spec)
{
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 3 || !PyTuple_Check(PyTuple_GET_ITEM(spec, 2)))
        return bad_spec("a message is (name, supported, fields)");
    m->supported = PyObject_IsTrue(PyTuple_GET_ITEM(spec, 1));
    PyObject *fields = PyTuple_GET_ITEM(spec, 2);
    Py_ssize_t n = PyTuple_GET_SIZE(fields);
    m->fields = PyMem_Calloc((size_t)n + 1, sizeof(Field));
    if (m->fields == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    m->nfields = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(fields, i);
        Field *f = &m->fields[i];
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 6)
            return bad_spec("a field is (number, name, type, flags, sub, enum)");
        long number = PyLong_AsLong(PyTuple_GET_ITEM(item, 0));
        long type = PyLong_AsLong(PyTuple_GET_ITEM(item, 2));
        long flags = PyLong_AsLong(PyTuple_GET_ITEM(item, 3));
        long sub = PyLong_AsLong(PyTuple_GET_ITEM(item, 4));
        long en = PyLong_AsLong(PyTuple_GET_ITEM(item, 5));
        if (PyErr_Occurred())
            return -1;
        if (number < 1 || number > 0x1FFFFFFF || (i && (uint32_t)number <= m->fields[i - 1].number))
            return bad_spec("field numbers are sorted, from 1 to 2^29 - 1");
        if (type < T_DOUBLE || type > T_SINT64 || flags < 0 || flags >= (1L << 24))
            return bad_spec("a field's type or flags");
        if ((type == T_MESSAGE) != (sub >= 0) || sub >= w->nmessages || (type == T_ENUM) != (en >= 0) ||
            en >= w->nenums)
            return bad_spec("a field's message or enum");
        f->number = (uint32_t)number;
        f->type = (int)type;
        f->flags = (int)flags;
        f->oneof = (int)(flags >> ONEOF_SHIFT);
        f->sub = (int32_t)sub;
        f->en = (int32_t)en;
        switch (type) {
        case T_DOUBLE: case T_FIXED64: case T_SFIXED64: f->wt = 1; break;
        case T_FLOAT: case T_FIXED32: case T_SFIXED32: f->wt = 5; break;
        case T_STRING: case T_MESSAGE: case T_BYTES: f->wt = 2; break;
        case T_GROUP: f->wt = 3; break;
        default: f->wt = 0;
        }
        if (f->oneof > m->noneofs)
            m->noneofs = f->oneof;
        if ((f->key = json_text(PyTuple_GET_ITEM(item, 1), ":", &f->key_len)) == NULL)
            return -1;
    }
    uint32_t top = n ? m->fields[n - 1].number + 1 : 0;
    m->ndense = top < DENSE_LIMIT ? top : DENSE_LIMIT;
    m->dense = PyMem_Malloc(((size_t)m->ndense + 1) * sizeof(int32_t));
    if (m->dense == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (uint32_t k = 0; k < m->ndense; k++)
        m->dense[k] = -1;
    for (Py_ssize_t i = 0; i < n; i++)
        if (m->fields[i].number < m->ndense)
            m->dense[m->fields[i].number] = (int32_t)i;
    return 0;
}

static int
walker_init(Walker *w, PyObject *args, PyObject *kwds)
{
    PyObject *spec;
    if (!PyArg_ParseTuple(args, "O:Walker", &spec))
        return -1;
    walker_clear(w);
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 2 || !PyTuple_Check(PyTuple_GET_ITEM(spec, 0)) ||
        !PyTuple_Check(PyTuple_GET_ITEM(spec, 1)))
        return bad_spec("(messages, enums)");
    PyObject *messages = PyTuple_GET_ITEM(spec, 0), *enums = PyTuple_GET_ITEM(spec, 1);
    Py_ssize_t nm = PyTuple_GET_SIZE(messages), ne = PyTuple_GET_SIZE(enums);
    w->messages = PyMem_Calloc((size_t)nm + 1, sizeof(Message));
    w->enums = PyMem_Calloc((size_t)ne + 1, sizeof(Enum));
    if (!w->messages || !w->enums) {
        PyErr_NoMemory();
        return -1;
    }
    w->nmessages = nm;
    w->nenums = ne;
    for (Py_ssize_t i = 0; i < ne; i++)
        if (load_enum(&w->enums[i], PyTuple_GET_ITEM(enums, i)) < 0)
            return -1;
    for (Py_ssize_t i = 0; i < nm; i++)
        if (load_message(w, &w->messages[i], PyTuple_GET_ITEM(messages, i)) < 0)
            return -1;
    return 0;
}

/* The message's JSON text into c (c->buf the payload): 0, or -1 where the Python path must say. */
#define KEPT_SCRATCH ((size_t)1 << 20)

static int
walk_into(Ctx *c, Walker *w, long mid, const uint8_t *buf, size_t size)
{
    c->buf = buf;
    c->w = w;
    c->occ = w->scratch.occ;
    c->cap_occ = w->scratch.cap_occ;
    c->slots = w->scratch.slots;
    c->cap_slots = w->scratch.cap_slots;
    c->out = w->scratch.out;
    c->cap = w->scratch.cap_out;
    w->scratch = (struct Scratch){0};
    if (mid < 0 || mid >= w->nmessages || size >= UINT32_MAX)
        return -1;
    int32_t top = push_occ(c, 0, (uint32_t)size, 2);
    if (top < 0 || room(c, size * 2 + 64) < 0)
        return -1;
    return emit_message(c, (int32_t)mid, top, 0);
}

/* The walk's buffers back to the walker, for the next walk; big ones are freed. */
static void
ctx_free(Ctx *c)
{
    Walker *w = c->w;
    if (w == NULL || w->scratch.out || w->scratch.occ || w->scratch.slots ||
        c->cap > KEPT_SCRATCH || c->cap_occ * sizeof(Occ) > KEPT_SCRATCH ||
        c->cap_slots * sizeof(int32_t) > KEPT_SCRATCH) {
        PyMem_Free(c->out);
        PyMem_Free(c->occ);
        PyMem_Free(c->slots);
        return;
    }
    w->scratch = (struct Scratch){c->occ, c->slots, c->out, c->cap_occ, c->cap_slots, c->cap};
}

static PyObject *
walk_bytes(Walker *w, PyObject *payload, long mid)
{
    Py_buffer view;
    if (PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Ctx c = {0};
    PyObject *result = walk_into(&c, w, mid, view.buf, (size_t)view.len) == 0
        ? PyBytes_FromStringAndSize(c.out, (Py_ssize_t)c.len) : Py_NewRef(Py_None);
    ctx_free(&c);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *
walker_walk(Walker *w, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "walk(payload, message)");
        return NULL;
    }
    long mid = PyLong_AsLong(args[1]);
    if (mid == -1 && PyErr_Occurred())
        return NULL;
    return walk_bytes(w, args[0], mid);
}

#define MAX_NAMES 1024

static PyObject *
walker_bind(Walker *w, PyObject *resolve)
{
    PyObject *names = PyDict_New();
    if (names == NULL)
        return NULL;
    Py_XSETREF(w->names, names);
    Py_XSETREF(w->resolve, Py_NewRef(resolve));
    Py_RETURN_NONE;
}

/* A new reference to names[key] ((full name, message id), or None), asking resolve on a miss. */
static PyObject *
name_entry(Walker *w, PyObject *key)
{
    PyObject *entry = PyDict_GetItemWithError(w->names, key);  /* borrowed */
    Py_XINCREF(entry);
    if (entry == NULL && !PyErr_Occurred()) {
        entry = PyObject_CallOneArg(w->resolve, key);
        if (entry != NULL && PyDict_GET_SIZE(w->names) < MAX_NAMES && PyDict_SetItem(w->names, key, entry) < 0)
            Py_CLEAR(entry);
    }
    return entry;
}

/* read_json(payload, indexes) -> (full name, JSON bytes) | None: ProtoReader.read_json. */
static PyObject *
walker_read_json(Walker *w, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "read_json(payload, indexes)");
        return NULL;
    }
    if (w->names == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "read_json before bind");
        return NULL;
    }
    PyObject *key = PyList_CheckExact(args[1]) ? PyList_AsTuple(args[1]) : PySequence_Tuple(args[1]);
    if (key == NULL)
        return NULL;
    PyObject *entry = name_entry(w, key);
    Py_DECREF(key);
    if (entry == NULL)
        return NULL;
    PyObject *result = NULL;
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    long mid = PyLong_AsLong(PyTuple_GET_ITEM(entry, 1));
    if (mid == -1 && PyErr_Occurred())
        goto done;
    PyObject *text = walk_bytes(w, args[0], mid);
    if (text == NULL || text == Py_None) {
        result = text;
        goto done;
    }
    result = PyTuple_Pack(2, PyTuple_GET_ITEM(entry, 0), text);
    Py_DECREF(text);
done:
    Py_DECREF(entry);
    return result;
}

/* The JsonReader capsule: values framed with the message-index list [0] (one byte 0, or the
 * count 1 and 0), read as message ``mid``; any other list is not taken (0). */
typedef struct {
    JsonReader reader;
    Walker *w;
    long mid;
} FirstMessage;

static int
first_message_write(const void *program, const unsigned char *data, Py_ssize_t size, Out *out)
{
    const FirstMessage *p = program;
    Py_ssize_t skip = size >= 1 && data[0] == 0 ? 1 : size >= 2 && data[0] == 2 && data[1] == 0 ? 2 : 0;
    if (skip == 0)
        return 0;
    Ctx c = {0};
    int result = 0;
    if (walk_into(&c, p->w, p->mid, data + skip, (size_t)(size - skip)) == 0) {
        if (reserve(out, (Py_ssize_t)c.len) < 0) {
            result = -1;
        } else {
            memcpy(out->at, c.out, c.len);
            out->at += c.len;
            result = 1;
        }
    }
    ctx_free(&c);
    return result;
}

static void
first_message_free(PyObject *capsule)
{
    FirstMessage *p = PyCapsule_GetPointer(capsule, JSON_READER_CAPSULE);
    if (p != NULL) {
        Py_DECREF(p->w);
        PyMem_Free(p);
    }
}

static PyObject *
walker_capsule(Walker *w, PyObject *arg)
{
    long mid = PyLong_AsLong(arg);
    if (mid == -1 && PyErr_Occurred())
        return NULL;
    FirstMessage *p = PyMem_Malloc(sizeof(FirstMessage));
    if (p == NULL)
        return PyErr_NoMemory();
    p->reader.write = first_message_write;
    p->reader.program = p;
    p->w = (Walker *)Py_NewRef(w);
    p->mid = mid;
    PyObject *capsule = PyCapsule_New(&p->reader, JSON_READER_CAPSULE, first_message_free);
    if (capsule == NULL) {
        Py_DECREF(p->w);
        PyMem_Free(p);
    }
    return capsule;
}

/* Framed(walker, about_of)(payload) -> (JSON bytes, schema object's JSON) | None: the seam's
 * reader for a file of several messages (records/packed.py): the message-index list (Confluent's
 * zig-zag count, 0 meaning [0], then the indexes), the message it names, its JSON text, and
 * about_of(full name)'s schema object, kept per name. None for anything else. */
typedef struct {
    PyObject_HEAD
    Walker *w;
    PyObject *about_of, *abouts;
} Framed;

#define MAX_INDEXES 64

static PyObject *
framed_key(const uint8_t *s, uint32_t size, uint32_t *pos)
{
    uint64_t raw;
    if (varint(s, pos, size, &raw) < 0 || raw > 2 * MAX_INDEXES || (raw & 1))
        return NULL;
    Py_ssize_t count = (Py_ssize_t)(raw >> 1);
    PyObject *key = PyTuple_New(count ? count : 1);
    if (key == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < count || (count == 0 && i == 0); i++) {
        uint64_t index = 0;
        if (count && (varint(s, pos, size, &raw) < 0 || (raw & 1) || (index = raw >> 1) > INT32_MAX)) {
            Py_DECREF(key);
            return NULL;
        }
        PyObject *number = PyLong_FromUnsignedLongLong(index);
        if (number == NULL) {
            Py_DECREF(key);
            return NULL;
        }
        PyTuple_SET_ITEM(key, i, number);
    }
    return key;
}

static PyObject *
framed_call(Framed *f, PyObject *args, PyObject *kwds)
{
    PyObject *payload;
    if (!PyArg_UnpackTuple(args, "Framed", 1, 1, &payload))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL, *entry = NULL, *text = NULL;
    uint32_t pos = 0;
    if ((size_t)view.len >= UINT32_MAX) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *key = framed_key(view.buf, (uint32_t)view.len, &pos);
    if (key == NULL) {
        result = PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
        goto done;
    }
    entry = name_entry(f->w, key);
    Py_DECREF(key);
    if (entry == NULL)
        goto done;
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    long mid = PyLong_AsLong(PyTuple_GET_ITEM(entry, 1));
    if (mid == -1 && PyErr_Occurred())
        goto done;
    Ctx c = {0};
    if (walk_into(&c, f->w, mid, (const uint8_t *)view.buf + pos, (size_t)(view.len - pos)) == 0)
        text = PyBytes_FromStringAndSize(c.out, (Py_ssize_t)c.len);
    else
        result = Py_NewRef(Py_None);
    ctx_free(&c);
    if (text == NULL)
        goto done;
    PyObject *name = PyTuple_GET_ITEM(entry, 0);
    PyObject *about = PyDict_GetItemWithError(f->abouts, name);  /* borrowed */
    Py_XINCREF(about);
    if (about == NULL && !PyErr_Occurred()) {
        about = PyObject_CallOneArg(f->about_of, name);
        if (about != NULL && PyDict_GET_SIZE(f->abouts) < MAX_NAMES && PyDict_SetItem(f->abouts, name, about) < 0)
            Py_CLEAR(about);
    }
    if (about != NULL) {
        result = PyTuple_Pack(2, text, about);
        Py_DECREF(about);
    }
done:
    Py_XDECREF(text);
    Py_XDECREF(entry);
    PyBuffer_Release(&view);
    return result;
}

static void
framed_dealloc(Framed *f)
{
    Py_XDECREF(f->w);
    Py_XDECREF(f->about_of);
    Py_XDECREF(f->abouts);
    Py_TYPE(f)->tp_free((PyObject *)f);
}

static PyTypeObject FramedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kinspect.native._protobuf.Framed",
    .tp_basicsize = sizeof(Framed),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A walker's reader of framed payloads (the message-index list first); made by Walker.framed.",
    .tp_call = (ternaryfunc)framed_call,
    .tp_dealloc = (destructor)framed_dealloc,
};

static PyObject *
walker_framed(Walker *w, PyObject *about_of)
{
    if (w->names == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "framed before bind");
        return NULL;
    }
    Framed *f = PyObject_New(Framed, &FramedType);
    if (f == NULL)
        return NULL;
    f->w = (Walker *)Py_NewRef(w);
    f->about_of = Py_NewRef(about_of);
    f->abouts = PyDict_New();
    if (f->abouts == NULL) {
        Py_DECREF(f);
        return NULL;
    }
    return (PyObject *)f;
}

static PyMethodDef walker_methods[] = {
    {"walk", (PyCFunction)(void (*)(void))walker_walk, METH_FASTCALL,
     "walk(payload, message) -> JSON bytes, or None where the Python path must say"},
    {"bind", (PyCFunction)walker_bind, METH_O,
     "bind(resolve): read_json's names, resolve(indexes) -> (full name, message id) | None"},
    {"read_json", (PyCFunction)(void (*)(void))walker_read_json, METH_FASTCALL,
     "read_json(payload, indexes) -> (full name, JSON bytes) | None"},
    {"framed", (PyCFunction)walker_framed, METH_O,
     "framed(about_of) -> reader(payload after the id) -> (JSON bytes, about_of(name)) | None"},
    {"capsule", (PyCFunction)walker_capsule, METH_O,
     "capsule(message) -> a JsonReader capsule for values framed with the message-index list [0]"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject WalkerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kinspect.native._protobuf.Walker",
    .tp_basicsize = sizeof(Walker),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Walker(spec): Protobuf payloads to proto3 JSON text, by schemas/protobuf_json.py's tables.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)walker_init,
    .tp_dealloc = (destructor)walker_dealloc,
    .tp_methods = walker_methods,
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_protobuf",
    .m_doc = "Protobuf payloads to JSON text.",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__protobuf(void)
{
    if (PyType_Ready(&WalkerType) < 0 || PyType_Ready(&FramedType) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL)
        return NULL;
    if (PyModule_AddObjectRef(module, "Walker", (PyObject *)&WalkerType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
