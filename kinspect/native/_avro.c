/* An Avro value's JSON text, straight from its binary encoding: the fast path of
 * kinspect/schemas/avro_json.py (its twin, read_json_py, gives the same bytes or None).
 *
 * program(code, texts) -> capsule      (code: the int32s avro_json.compile_program gives)
 * read_json(capsule, payload) -> bytes | None
 *
 * The schema is compiled once, in Python, into a flat program (avro_json.py says its layout);
 * this file walks it over a payload, writing JSON as decode --json writes fastavro's values
 * (render/jsonl.py through orjson). None means "let fastavro read it": anything this file does
 * not write exactly as that path would (a map with a key twice or more than MAP_KEYS keys, a
 * boolean byte other than 0 and 1, a varint past 64 bits) and anything wrong with the payload
 * (a length or count past the bytes left, more than MAX_EMPTY_ITEMS items of no bytes, data
 * nesting deeper than MAX_DEPTH, a string not UTF-8, bytes after the value). Then the Python
 * path reads the value and reports its problem with an offset. The capsule (JSON_READER_CAPSULE,
 * _json_out.h) is also what _v2records.to_json calls for each framed value of a packed batch.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include "_json_out.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__ || !defined(__SIZEOF_INT128__)
#error "little-endian floats and 128-bit integers are assumed: without them the Python twin runs"
#endif

/* the opcodes: avro_json.py's NULL ... RECORD */
enum { OP_NULL, OP_BOOLEAN, OP_LONG, OP_FLOAT, OP_DOUBLE, OP_BYTES, OP_STRING, OP_FIXED, OP_ENUM,
       OP_ARRAY, OP_MAP, OP_UNION, OP_RECORD, OP_COUNT };

#define MAX_DEPTH 64             /* as schemas/avro.py's MAX_DEPTH */
#define MAX_EMPTY_ITEMS 100000   /* as schemas/avro.py's MAX_EMPTY_ITEMS */
#define MAP_KEYS 64              /* a map's keys are checked for repeats pairwise */

typedef struct {
    JsonReader reader;  /* first: the capsule's pointer is this struct's */
    int32_t *code;
    Py_ssize_t code_size;
    char *texts;
    Py_ssize_t texts_size;
} Program;

typedef struct {
    const Program *program;
    const unsigned char *p;
    Py_ssize_t pos, end;
    Py_ssize_t empty;  /* array items that took no bytes so far */
    Out *out;
} Walk;

#define STOP 0   /* the value goes the Python way */
#define FAILED -1  /* an exception is set */

static inline int
read_long(Walk *w, int64_t *value)
{
    uint64_t raw = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (w->pos >= w->end)
            return STOP;
        unsigned char byte = w->p[w->pos++];
        if (shift == 63 && byte > 1)
            return STOP;  /* more than 64 bits */
        raw |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80) {
            *value = (int64_t)((raw >> 1) ^ (0 - (raw & 1)));
            return 1;
        }
    }
    return STOP;
}

/* A length that must fit in the bytes left. */
static inline int
read_size(Walk *w, Py_ssize_t *size)
{
    int64_t n;
    if (read_long(w, &n) != 1 || n < 0 || n > w->end - w->pos)
        return STOP;
    *size = (Py_ssize_t)n;
    return 1;
}

static inline int
put_raw(Out *out, const char *text, Py_ssize_t size)
{
    if (reserve(out, size))
        return FAILED;
    memcpy(out->at, text, size);
    out->at += size;
    return 1;
}

/* A double as orjson writes it: the shortest digits that read back as it (Python's repr has the
 * same), fixed notation for decimal exponents -5 to 15 (with ".0" when whole), else d.ddde±x;
 * NaN and the infinities as null. */
typedef unsigned __int128 u128;

static u128 powers_of_ten_128[22];
static const double powers_of_ten[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
                                       1e11, 1e12, 1e13, 1e14, 1e15, 1e16};
static const double negative_powers_of_ten[] = {1e0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6};

/* Are there integers d with low <= d * 2^f / 10^k <= high (strictly inside unless closed)? Their
 * range in *first and *last when asked. */
static inline int
candidates(u128 low, u128 high, int closed, int f, int k, u128 *first, u128 *last)
{
    u128 power = powers_of_ten_128[k], one = (u128)1 << f;
    u128 lo = low * power, hi = high * power;
    u128 lo_d = closed ? (lo + one - 1) >> f : (lo >> f) + 1;
    u128 hi_d = closed ? hi >> f : ((hi + one - 1) >> f) - 1;
    if (first != NULL) {
        *first = lo_d;
        *last = hi_d;
    }
    return lo_d <= hi_d;
}

/* The common case without dtoa (most of a run's time with it): |value| in [1e-5, 1e15), written
 * in fixed notation. value = M * 2^E exactly; in units of 2^(E-2) it is 4M and the decimals that
 * read back as it lie in [low, high] (open when M is odd: a tie reads back to the even
 * neighbour). For k = 0, 1, ... decimals, the integers d with low <= d * 2^F / 10^k <= high
 * (F = 2 - E) are found with exact 128-bit arithmetic; the first k that has one gives the
 * shortest text, and of its d the one nearest to value, as dtoa's shortest mode gives (and
 * orjson, and Python's repr). 1 written; 0: use dtoa (a tie, or past 128 bits). */
static int
put_fixed_double(Out *out, double value)
{
    double magnitude = fabs(value);
    if (!(magnitude >= 1e-5 && magnitude < 1e15))
        return 0;
    uint64_t bits;
    memcpy(&bits, &magnitude, 8);
    int biased = (int)(bits >> 52);
    uint64_t fraction = bits & ((1ULL << 52) - 1), m = fraction | (1ULL << 52);
    int f = 2 - (biased - 1075);  /* 1e15 < 2^50: E <= -3, so F >= 5; 1e-5: F <= 71 */
    u128 mid = (u128)m * 4, high = mid + 2, low = fraction == 0 && biased > 1 ? mid - 1 : mid - 2;
    int closed = (m & 1) == 0;
    u128 one = (u128)1 << f;
    /* candidates at k decimals exist from some k on: the first is found by bisection, starting
     * from one with 18 significant digits (17 always do) */
    int e10 = 0;
    while (e10 < 15 && magnitude >= powers_of_ten[e10 + 1])
        e10++;
    while (e10 > -6 && magnitude < negative_powers_of_ten[-e10])
        e10--;
    int top = 17 - e10, bottom = -1;  /* candidates at top, none at bottom */
    if (top > 21 || !candidates(low, high, closed, f, top, NULL, NULL))
        return 0;
    /* most doubles (random ones) take 16 or 17 digits: look there first */
    if (candidates(low, high, closed, f, top - 2, NULL, NULL)) {
        top -= 2;
        if (!candidates(low, high, closed, f, top - 1, NULL, NULL))
            bottom = top - 1;
    } else {
        bottom = top - 2;
    }
    while (top - bottom > 1) {
        int k = (top + bottom) / 2;
        if (candidates(low, high, closed, f, k, NULL, NULL))
            top = k;
        else
            bottom = k;
    }
    int k = top;
    u128 lo_d, hi_d, at = mid * powers_of_ten_128[k];
    candidates(low, high, closed, f, k, &lo_d, &hi_d);
    if ((at & (one - 1)) == one >> 1)
        return 0;  /* value lies halfway between two candidates */
    u128 near = (at + (one >> 1)) >> f;
    uint64_t d = (uint64_t)(near < lo_d ? lo_d : near > hi_d ? hi_d : near);
    {
        char buffer[24], *digits = buffer + sizeof buffer;
        while (d >= 100) {
            digits -= 2;
            memcpy(digits, two_digits + 2 * (d % 100), 2);
            d /= 100;
        }
        if (d >= 10) {
            digits -= 2;
            memcpy(digits, two_digits + 2 * d, 2);
        } else {
            *--digits = (char)('0' + d);
        }
        int n = (int)(buffer + sizeof buffer - digits);
        if (reserve(out, n + 24))
            return -1;
        if (value < 0)
            *out->at++ = '-';
        if (n <= k) {  /* 0.000ddd */
            *out->at++ = '0';
            *out->at++ = '.';
            for (int i = n; i < k; i++)
                *out->at++ = '0';
            memcpy(out->at, digits, n);
            out->at += n;
        } else {
            memcpy(out->at, digits, n - k);
            out->at += n - k;
            *out->at++ = '.';
            if (k) {
                memcpy(out->at, digits + n - k, k);
                out->at += k;
            } else {
                *out->at++ = '0';
            }
        }
    }
    return 1;
}

static int
put_double(Out *out, double value)
{
    if (!isfinite(value))
        return put_raw(out, "null", 4);
    int fixed = put_fixed_double(out, value);
    if (fixed)
        return fixed;
    char *repr = PyOS_double_to_string(value, 'r', 0, 0, NULL);
    if (repr == NULL)
        return FAILED;
    char digits[32], text[48];
    int count = 0, point = -1, exponent = 0, negative = repr[0] == '-';
    const char *c = repr + negative;
    for (; *c && *c != 'e'; c++) {
        if (*c == '.')
            point = count;
        else if (count < 30)
            digits[count++] = *c;
    }
    if (*c == 'e')
        exponent = atoi(c + 1);
    PyMem_Free(repr);
    if (point < 0)
        point = count;
    int lead = 0;  /* leading zeros (0.001: "0001") */
    while (lead < count - 1 && digits[lead] == '0')
        lead++;
    int k = point - lead - 1 + exponent;  /* the decimal exponent of the first digit */
    char *d = digits + lead;
    int n = count - lead;
    while (n > 1 && d[n - 1] == '0')
        n--;
    char *at = text;
    if (negative)
        *at++ = '-';
    if (n == 1 && d[0] == '0') {
        memcpy(at, "0.0", 3);
        at += 3;
    } else if (k >= -5 && k <= 15) {
        if (k < 0) {
            *at++ = '0';
            *at++ = '.';
            for (int i = -1; i > k; i--)
                *at++ = '0';
            memcpy(at, d, n);
            at += n;
        } else {
            for (int i = 0; i <= k; i++)
                *at++ = i < n ? d[i] : '0';
            *at++ = '.';
            if (n > k + 1) {
                memcpy(at, d + k + 1, n - k - 1);
                at += n - k - 1;
            } else {
                *at++ = '0';
            }
        }
    } else {
        *at++ = d[0];
        if (n > 1) {
            *at++ = '.';
            memcpy(at, d + 1, n - 1);
            at += n - 1;
        }
        at += sprintf(at, "e%c%d", k < 0 ? '-' : '+', k < 0 ? -k : k);
    }
    return put_raw(out, text, at - text);
}

static int walk(Walk *w, int32_t node, int depth);

/* Array or map blocks: a count (negative: its absolute value, then the block's size), items,
 * up to a count of 0. */
static int
walk_blocks(Walk *w, int32_t items, int depth, int is_map)
{
    const unsigned char *keys[MAP_KEYS];
    Py_ssize_t key_sizes[MAP_KEYS];
    Py_ssize_t total = 0;
    int got;
    if ((got = put_raw(w->out, is_map ? "{" : "[", 1)) != 1)
        return got;
    for (;;) {
        int64_t count, size;
        if (read_long(w, &count) != 1)
            return STOP;
        if (count == 0)
            break;
        if (count < 0) {
            if (count == INT64_MIN || read_long(w, &size) != 1)
                return STOP;
            count = -count;
        }
        /* each item takes a byte or counts as empty: more would end in STOP anyway */
        if (count > (w->end - w->pos) + (MAX_EMPTY_ITEMS - w->empty))
            return STOP;
        for (int64_t i = 0; i < count; i++, total++) {
            if (total && (got = put_raw(w->out, ",", 1)) != 1)
                return got;
            if (is_map) {
                Py_ssize_t n;
                if (total >= MAP_KEYS || read_size(w, &n) != 1)
                    return STOP;
                const unsigned char *key = w->p + w->pos;
                w->pos += n;
                for (Py_ssize_t j = 0; j < total; j++)
                    if (key_sizes[j] == n && !memcmp(keys[j], key, n))
                        return STOP;  /* Python's dict keeps the last value at the first place */
                keys[total] = key;
                key_sizes[total] = n;
                got = put_text(w->out, key, n);
                if (got != 1)
                    return got;
                if ((got = put_raw(w->out, ":", 1)) != 1)
                    return got;
            }
            Py_ssize_t before = w->pos;
            if ((got = walk(w, items, depth + 1)) != 1)
                return got;
            if (w->pos == before && ++w->empty > MAX_EMPTY_ITEMS)
                return STOP;
        }
    }
    return put_raw(w->out, is_map ? "}" : "]", 1);
}

static int
walk(Walk *w, int32_t node, int depth)
{
    const int32_t *code = w->program->code;
    const char *texts = w->program->texts;
    Out *out = w->out;
    int64_t n;
    Py_ssize_t size;
    int got;
    if (depth > MAX_DEPTH)
        return STOP;
    switch (code[node]) {
    case OP_NULL:
        return put_raw(out, "null", 4);
    case OP_BOOLEAN:
        if (w->pos >= w->end || w->p[w->pos] > 1)
            return STOP;
        return w->p[w->pos++] ? put_raw(out, "true", 4) : put_raw(out, "false", 5);
    case OP_LONG:
        if (read_long(w, &n) != 1)
            return STOP;
        if (reserve(out, 24))
            return FAILED;
        put_int(out, n);
        return 1;
    case OP_FLOAT: {
        float f;
        if (w->end - w->pos < 4)
            return STOP;
        memcpy(&f, w->p + w->pos, 4);  /* little-endian, as Avro's */
        w->pos += 4;
        return put_double(out, (double)f);
    }
    case OP_DOUBLE: {
        double d;
        if (w->end - w->pos < 8)
            return STOP;
        memcpy(&d, w->p + w->pos, 8);
        w->pos += 8;
        return put_double(out, d);
    }
    case OP_BYTES:
    case OP_STRING:
        if (read_size(w, &size) != 1)
            return STOP;
        w->pos += size;
        if (code[node] == OP_STRING)
            return put_text(out, w->p + w->pos - size, size);  /* 0 when not UTF-8: STOP */
        return put_bytes(out, w->p + w->pos - size, size) ? FAILED : 1;
    case OP_FIXED:
        size = code[node + 1];
        if (size > w->end - w->pos)
            return STOP;
        w->pos += size;
        return put_bytes(out, w->p + w->pos - size, size) ? FAILED : 1;
    case OP_ENUM:
        if (read_long(w, &n) != 1 || n < 0 || n >= code[node + 1])
            return STOP;
        return put_raw(out, texts + code[node + 2 + 2 * n], code[node + 3 + 2 * n]);
    case OP_ARRAY:
    case OP_MAP:
        return walk_blocks(w, code[node + 1], depth, code[node] == OP_MAP);
    case OP_UNION:
        if (read_long(w, &n) != 1 || n < 0 || n >= code[node + 1])
            return STOP;
        return walk(w, code[node + 2 + n], depth + 1);
    case OP_RECORD:
        if (code[node + 1] == 0)
            return put_raw(out, "{}", 2);
        for (int32_t i = 0; i < code[node + 1]; i++) {
            const int32_t *field = code + node + 2 + 3 * i;
            if ((got = put_raw(out, texts + field[0], field[1])) != 1 ||
                (got = walk(w, field[2], depth + 1)) != 1)
                return got;
        }
        return put_raw(out, "}", 1);
    }
    return STOP;
}

/* JsonReader.write: the JSON text of data[0..size) at out->at. */
static int
write_json(const void *program, const unsigned char *data, Py_ssize_t size, Out *out)
{
    Walk w = {program, data, 0, size, 0, out};
    int got = walk(&w, 0, 0);
    return got == 1 && w.pos != size ? STOP : got;
}

static void
free_program(PyObject *capsule)
{
    Program *program = PyCapsule_GetPointer(capsule, JSON_READER_CAPSULE);
    if (program != NULL) {
        PyMem_Free(program->code);
        PyMem_Free(program->texts);
        PyMem_Free(program);
    }
}

/* Is every node's every operand inside the program (node indexes, text spans, counts)? */
static int
program_valid(const int32_t *code, Py_ssize_t size, Py_ssize_t texts_size)
{
    for (Py_ssize_t at = 0; at < size;) {
        int32_t op = code[at];
        Py_ssize_t length = 1;
        if (op < 0 || op >= OP_COUNT)
            return 0;
        if (op == OP_FIXED || op == OP_ARRAY || op == OP_MAP)
            length = 2;
        else if (op == OP_ENUM || op == OP_UNION || op == OP_RECORD) {
            if (at + 1 >= size || code[at + 1] < 0 || code[at + 1] > (size - at) / 2)
                return 0;
            length = 2 + (Py_ssize_t)code[at + 1] * (op == OP_ENUM ? 2 : op == OP_UNION ? 1 : 3);
        }
        if (at + length > size)
            return 0;
        for (Py_ssize_t i = 2; i < length; i++) {
            int32_t v = code[at + i];
            int is_node = op == OP_UNION || (op == OP_RECORD && (i - 2) % 3 == 2);
            int is_offset = (op == OP_ENUM && i % 2 == 0) || (op == OP_RECORD && (i - 2) % 3 == 0);
            if (v < 0 || (is_node && v >= size) || (is_offset && v > texts_size) ||
                (!is_node && !is_offset && v > texts_size - code[at + i - 1]))
                return 0;
        }
        if ((op == OP_ARRAY || op == OP_MAP) && (code[at + 1] < 0 || code[at + 1] >= size))
            return 0;
        if (op == OP_FIXED && code[at + 1] < 0)
            return 0;
        at += length;
    }
    return size > 0;
}

static PyObject *
program(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyBytes_Check(args[0]) || !PyBytes_Check(args[1]) ||
        PyBytes_GET_SIZE(args[0]) % 4) {
        PyErr_SetString(PyExc_TypeError, "program(code: bytes of int32, texts: bytes)");
        return NULL;
    }
    Py_ssize_t code_size = PyBytes_GET_SIZE(args[0]) / 4, texts_size = PyBytes_GET_SIZE(args[1]);
    if (!program_valid((const int32_t *)PyBytes_AS_STRING(args[0]), code_size, texts_size)) {
        PyErr_SetString(PyExc_ValueError, "not a valid program");
        return NULL;
    }
    Program *p = PyMem_Calloc(1, sizeof(Program));
    if (p == NULL)
        return PyErr_NoMemory();
    p->code = PyMem_Malloc(code_size * 4 + 1);
    p->texts = PyMem_Malloc(texts_size + 1);
    if (p->code == NULL || p->texts == NULL) {
        PyMem_Free(p->code);
        PyMem_Free(p->texts);
        PyMem_Free(p);
        return PyErr_NoMemory();
    }
    memcpy(p->code, PyBytes_AS_STRING(args[0]), code_size * 4);
    memcpy(p->texts, PyBytes_AS_STRING(args[1]), texts_size);
    p->code_size = code_size;
    p->texts_size = texts_size;
    p->reader.write = write_json;
    p->reader.program = p;
    PyObject *capsule = PyCapsule_New(p, JSON_READER_CAPSULE, free_program);
    if (capsule == NULL) {
        PyMem_Free(p->code);
        PyMem_Free(p->texts);
        PyMem_Free(p);
    }
    return capsule;
}

static PyObject *
read_json(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyCapsule_IsValid(args[0], JSON_READER_CAPSULE)) {
        PyErr_SetString(PyExc_TypeError, "read_json(program: capsule, payload: bytes-like)");
        return NULL;
    }
    const Program *p = PyCapsule_GetPointer(args[0], JSON_READER_CAPSULE);
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Py_ssize_t size = view.len + view.len / 2 + 64;
    Out out = {PyBytes_FromStringAndSize(NULL, size), NULL, NULL};
    if (out.bytes == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    out.at = PyBytes_AS_STRING(out.bytes);
    out.limit = out.at + size;
    int got = write_json(p, view.buf, view.len, &out);
    PyBuffer_Release(&view);
    if (got != 1) {
        Py_XDECREF(out.bytes);
        if (got == STOP)
            Py_RETURN_NONE;
        return NULL;
    }
    if (_PyBytes_Resize(&out.bytes, out.at - PyBytes_AS_STRING(out.bytes)))
        return NULL;
    return out.bytes;
}

static PyMethodDef methods[] = {
    {"program", (PyCFunction)(void (*)(void))program, METH_FASTCALL,
     "program(code, texts) -> capsule\n\nA compiled schema (schemas/avro_json.py), ready to read."},
    {"read_json", (PyCFunction)(void (*)(void))read_json, METH_FASTCALL,
     "read_json(program, payload) -> bytes | None\n\n"
     "The value's JSON text as decode --json writes fastavro's value, or None (see the source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_avro",
    .m_doc = "Avro values written as JSON text, straight from their bytes.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__avro(void)
{
    json_out_init();
    powers_of_ten_128[0] = 1;
    for (int k = 1; k < 22; k++)
        powers_of_ten_128[k] = powers_of_ten_128[k - 1] * 10;
    return PyModule_Create(&module_def);
}
