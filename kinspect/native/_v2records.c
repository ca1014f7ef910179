/* The records of a v2 batch, in C: the fast path of kinspect/records/batch.py's _decode_records.
 *
 * decode(data, pos, end, base_offset, base_timestamp, fixed_timestamp[, limit[, bad_keys[, keep]]])
 *     -> list | (list, position) | (list, position, bad key count) | None
 *
 * Returns the same list of record dicts the Python loop builds, or None as soon as anything is
 * irregular (a length that does not fit, a varint out of bounds, an offset or timestamp beyond
 * 64 bits). None means "let the Python loop decode this batch": it reports every problem with
 * its path and byte, so this file never has to.
 * Every read is checked against the end of the record it belongs to. With ``limit``, at most
 * that many records are decoded and the result is (list, position after the last of them).
 *
 * A header key that is not UTF-8 is irregular too, unless a list ``bad_keys`` is given: then
 * the key is decoded as Python's bytes.decode("utf-8", "replace") does, the first ``keep``
 * (default: all) such keys of the call are appended to the list as (index of the record in this
 * call, header number, position of the record's length varint), and the result is
 * (list, position after, how many keys were bad): the caller builds the warnings the Python
 * loop gives (only those that will be shown) and counts the rest.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static PyObject *k_offset, *k_timestamp, *k_key, *k_value, *k_headers;
/* {"offset": None, "timestamp": None, "key": None, "value": None, "headers": None}: copying it
 * and replacing the values costs a third of building each record's dict key by key. */
static PyObject *record_template, *header_template;

/* A zigzag varint of at most max_bytes (5: int32, 10: int64) from p[*pos..limit). */
static inline int
read_varint(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t limit, int max_bytes,
            int64_t *out)
{
    uint64_t raw = 0;
    Py_ssize_t i = *pos;
    for (int shift = 0; shift < 7 * max_bytes; shift += 7) {
        if (i >= limit)
            return -1;
        unsigned char byte = p[i++];
        if (shift == 63 && (byte & 0x7E))
            return -1;  /* more than 64 bits */
        raw |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80) {
            if (max_bytes == 5 && (raw >> 32))
                return -1;
            *pos = i;
            *out = (int64_t)((raw >> 1) ^ (0 - (raw & 1)));
            return 0;
        }
    }
    return -1;
}

/* bytes, None (length -1), or -1 with *obj NULL when the length is invalid here. */
static inline int
read_nullable_bytes(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t limit, PyObject **obj)
{
    int64_t size;
    *obj = NULL;
    if (read_varint(p, pos, limit, 5, &size))
        return -1;
    if (size == -1) {
        *obj = Py_NewRef(Py_None);
        return 0;
    }
    if (size < 0 || size > limit - *pos)
        return -1;
    *obj = PyBytes_FromStringAndSize((const char *)p + *pos, (Py_ssize_t)size);
    if (*obj == NULL)
        return -2;  /* out of memory: a real error */
    *pos += (Py_ssize_t)size;
    return 0;
}

/* Whether a key decoded with errors="replace" from raw[0..size) was not valid UTF-8: the
 * decoder writes U+FFFD for each invalid sequence, and a valid U+FFFD in the bytes (EF BF BD) is
 * the only other source of one. An EF byte is never swallowed by an invalid sequence before it
 * (it is not a continuation byte), so the bytes were valid iff the counts are equal. */
static int
key_was_replaced(PyObject *key, const unsigned char *raw, Py_ssize_t size)
{
    int kind = PyUnicode_KIND(key);
    if (kind == PyUnicode_1BYTE_KIND)
        return 0;  /* U+FFFD does not fit one byte: nothing was replaced */
    const void *chars = PyUnicode_DATA(key);
    Py_ssize_t length = PyUnicode_GET_LENGTH(key), replaced = 0, literal = 0;
    for (Py_ssize_t i = 0; i < length; i++)
        replaced += PyUnicode_READ(kind, chars, i) == 0xFFFD;
    if (replaced == 0)
        return 0;
    for (Py_ssize_t i = 0; i + 2 < size; i++) {
        if (raw[i] == 0xEF && raw[i + 1] == 0xBF && raw[i + 2] == 0xBD) {
            literal++;
            i += 2;
        }
    }
    return replaced > literal;
}

/* Where the bad header keys of one call go (bad_keys: NULL, then a bad key is irregular). */
typedef struct {
    PyObject *bad_keys;
    Py_ssize_t keep;   /* entries appended at most */
    Py_ssize_t count;  /* bad keys seen, appended or not */
} BadKeys;

/* 0: decoded into *out; -1: irregular (fall back); -2: a Python error is set. ``index`` and
 * ``start`` (the record's index in this call, the position of its length) name bad keys. */
static int
read_headers(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t limit, PyObject **out,
             BadKeys *bad, Py_ssize_t index, Py_ssize_t start)
{
    int64_t count, size;
    *out = NULL;
    if (read_varint(p, pos, limit, 5, &count))
        return -1;
    if (count == 0) {
        *out = PyTuple_New(0);
        return *out == NULL ? -2 : 0;
    }
    if (count < 0 || count > (limit - *pos) / 2)
        return -1;
    PyObject *headers = PyList_New(0);
    if (headers == NULL)
        return -2;
    for (int64_t n = 0; n < count; n++) {
        if (read_varint(p, pos, limit, 5, &size) || size < 0 || size > limit - *pos)
            goto irregular;
        const unsigned char *raw = p + *pos;
        PyObject *key = PyUnicode_DecodeUTF8((const char *)raw, (Py_ssize_t)size, "replace");
        if (key == NULL)
            goto error;  /* "replace" raises nothing but MemoryError */
        if (key_was_replaced(key, raw, (Py_ssize_t)size)) {
            if (bad->bad_keys == NULL) {
                Py_DECREF(key);
                goto irregular;
            }
            if (bad->count < bad->keep) {
                PyObject *entry = Py_BuildValue("(nLn)", index, (long long)n, start);
                if (entry == NULL || PyList_Append(bad->bad_keys, entry)) {
                    Py_XDECREF(entry);
                    Py_DECREF(key);
                    goto error;
                }
                Py_DECREF(entry);
            }
            bad->count++;
        }
        *pos += (Py_ssize_t)size;
        PyObject *value;
        int status = read_nullable_bytes(p, pos, limit, &value);
        if (status) {
            Py_DECREF(key);
            if (status == -2)
                goto error;
            goto irregular;
        }
        PyObject *header = PyDict_Copy(header_template);
        if (header == NULL || PyDict_SetItem(header, k_key, key) ||
            PyDict_SetItem(header, k_value, value) || PyList_Append(headers, header)) {
            Py_XDECREF(header);
            Py_DECREF(key);
            Py_DECREF(value);
            goto error;
        }
        Py_DECREF(header);
        Py_DECREF(key);
        Py_DECREF(value);
    }
    *out = headers;
    return 0;
irregular:
    Py_DECREF(headers);
    return -1;
error:
    Py_DECREF(headers);
    return -2;
}

static PyObject *
decode(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 6 || nargs > 9 || !PyBytes_Check(args[0]) || (nargs >= 8 && !PyList_Check(args[7]))) {
        PyErr_SetString(PyExc_TypeError,
                        "decode(data: bytes, pos, end, base_offset, base_timestamp, fixed_timestamp"
                        "[, limit[, bad_keys: list[, keep]]])");
        return NULL;
    }
    BadKeys bad = {nargs >= 8 ? args[7] : NULL, PY_SSIZE_T_MAX, 0};
    Py_ssize_t limit = nargs >= 7 ? PyLong_AsSsize_t(args[6]) : PY_SSIZE_T_MAX;
    if (nargs == 9)
        bad.keep = PyLong_AsSsize_t(args[8]);
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    long long base_offset = PyLong_AsLongLong(args[3]);
    long long base_timestamp = PyLong_AsLongLong(args[4]);
    PyObject *fixed_timestamp = args[5] == Py_None ? NULL : args[5];
    if (PyErr_Occurred()) {  /* beyond 64 bits: Python's integers take it */
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (pos < 0 || end > PyBytes_GET_SIZE(args[0]) || pos > end)
        Py_RETURN_NONE;

    PyObject *records = PyList_New(0);
    if (records == NULL)
        return NULL;
    PyObject *key = NULL, *value = NULL, *headers = NULL, *offset = NULL, *timestamp = NULL;
    PyObject *result = NULL;
    int status;
    /* Records with headers are containers the cyclic GC tracks (the record dict, its list of
     * headers): none is garbage, yet its passes over them, as the list grows, took three
     * quarters of this loop's time (2.3 of 3 us a record with one header). No Python code runs
     * in here, so pausing it is invisible; the next collection after the call sees them once. */
    int gc_was_enabled = PyGC_Disable();
    while (pos < end && PyList_GET_SIZE(records) < limit) {
        int64_t length, timestamp_delta, offset_delta;
        long long sum;
        Py_ssize_t start = pos;
        if (read_varint(p, &pos, end, 5, &length) || length < 6 || length > end - pos)
            goto irregular;
        Py_ssize_t record_end = pos + (Py_ssize_t)length;
        pos += 1;  /* attributes: unused by Kafka */
        if (read_varint(p, &pos, record_end, 10, &timestamp_delta) ||
            read_varint(p, &pos, record_end, 5, &offset_delta))
            goto irregular;
        if ((status = read_nullable_bytes(p, &pos, record_end, &key)) ||
            (status = read_nullable_bytes(p, &pos, record_end, &value)) ||
            (status = read_headers(p, &pos, record_end, &headers, &bad, PyList_GET_SIZE(records),
                                   start)))
            goto failed;
        if (pos != record_end || __builtin_add_overflow(base_offset, offset_delta, &sum))
            goto irregular;
        if ((offset = PyLong_FromLongLong(sum)) == NULL)
            goto error;
        if (fixed_timestamp != NULL) {
            timestamp = Py_NewRef(fixed_timestamp);
        } else {
            if (__builtin_add_overflow(base_timestamp, timestamp_delta, &sum))
                goto irregular;
            if ((timestamp = PyLong_FromLongLong(sum)) == NULL)
                goto error;
        }
        PyObject *record = PyDict_Copy(record_template);
        if (record == NULL)
            goto error;
        if (PyDict_SetItem(record, k_offset, offset) || PyDict_SetItem(record, k_timestamp, timestamp) ||
            PyDict_SetItem(record, k_key, key) || PyDict_SetItem(record, k_value, value) ||
            PyDict_SetItem(record, k_headers, headers) || PyList_Append(records, record)) {
            Py_DECREF(record);
            goto error;
        }
        Py_DECREF(record);
        Py_CLEAR(key);
        Py_CLEAR(value);
        Py_CLEAR(headers);
        Py_CLEAR(offset);
        Py_CLEAR(timestamp);
    }
    if (nargs >= 8)
        result = Py_BuildValue("(Nnn)", records, pos, bad.count);
    else if (nargs == 7)
        result = Py_BuildValue("(Nn)", records, pos);
    else
        result = records;
    goto done;

failed:
    if (status == -2)
        goto error;
irregular:
    result = Py_NewRef(Py_None);
error:  /* result stays NULL: the Python error set propagates */
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(headers);
    Py_XDECREF(offset);
    Py_XDECREF(timestamp);
    Py_DECREF(records);
done:
    if (gc_was_enabled)
        PyGC_Enable();
    return result;
}

/* -- packed records: scan() and to_json() --------------------------------------------------
 *
 * decode --json and --summary keep a regular batch's records as their bytes (records/packed.py):
 * scan() says whether a batch qualifies and gives what the checks need; to_json() writes the
 * records' JSON text straight from the bytes, byte for byte what orjson writes for the dicts
 * decode() builds (render/jsonl.py: bytes as text when UTF-8, else {"b64": ...}).
 */

/* A length-prefixed span: data, or NULL with size -1 (null). -1 when the length is invalid. */
static inline int
read_span(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t limit, const unsigned char **data,
          Py_ssize_t *size)
{
    int64_t n;
    if (read_varint(p, pos, limit, 5, &n))
        return -1;
    if (n == -1) {
        *data = NULL;
        *size = -1;
        return 0;
    }
    if (n < 0 || n > limit - *pos)
        return -1;
    *data = p + *pos;
    *size = (Py_ssize_t)n;
    *pos += (Py_ssize_t)n;
    return 0;
}

/* One header from p[*pos..limit): the key (never null) and the value. */
static inline int
read_header(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t limit, const unsigned char **key,
            Py_ssize_t *key_size, const unsigned char **value, Py_ssize_t *value_size)
{
    return read_span(p, pos, limit, key, key_size) || *key == NULL ||
           read_span(p, pos, limit, value, value_size) ? -1 : 0;
}

typedef struct {
    int64_t timestamp_delta, offset_delta, header_count;
    const unsigned char *key, *value;  /* NULL: null */
    Py_ssize_t key_size, value_size;
    Py_ssize_t headers_at, end;        /* the first header; the byte after the record */
} Frame;

/* One record framed exactly as decode() reads it: 0, or -1 where decode() would give up. */
static int
frame_record(const unsigned char *p, Py_ssize_t pos, Py_ssize_t end, Frame *f)
{
    int64_t length;
    if (read_varint(p, &pos, end, 5, &length) || length < 6 || length > end - pos)
        return -1;
    f->end = pos + (Py_ssize_t)length;
    pos += 1;  /* attributes */
    if (read_varint(p, &pos, f->end, 10, &f->timestamp_delta) ||
        read_varint(p, &pos, f->end, 5, &f->offset_delta) ||
        read_span(p, &pos, f->end, &f->key, &f->key_size) ||
        read_span(p, &pos, f->end, &f->value, &f->value_size) ||
        read_varint(p, &pos, f->end, 5, &f->header_count) ||
        f->header_count < 0 || f->header_count > (f->end - pos) / 2)
        return -1;
    f->headers_at = pos;
    for (int64_t n = 0; n < f->header_count; n++) {
        const unsigned char *key, *value;
        Py_ssize_t key_size, value_size;
        if (read_header(p, &pos, f->end, &key, &key_size, &value, &value_size))
            return -1;
    }
    return pos == f->end ? 0 : -1;
}

/* The length of the UTF-8 sequence at s[0] (s[0] >= 0x80; ``left`` bytes from s), or 0 when it
 * is not valid as Python's strict decoder has it: no overlongs, surrogates or code points past
 * U+10FFFF. */
static inline int
utf8_sequence(const unsigned char *s, Py_ssize_t left)
{
    unsigned char c = s[0];
    if (c < 0xC2)
        return 0;
    if (c < 0xE0)
        return left >= 2 && (s[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c < 0xF0)
        return left >= 3 && (s[1] & 0xC0) == 0x80 && (s[2] & 0xC0) == 0x80 &&
               (c != 0xE0 || s[1] >= 0xA0) && (c != 0xED || s[1] <= 0x9F) ? 3 : 0;
    if (c < 0xF5)
        return left >= 4 && (s[1] & 0xC0) == 0x80 && (s[2] & 0xC0) == 0x80 &&
               (s[3] & 0xC0) == 0x80 && (c != 0xF0 || s[1] >= 0x90) &&
               (c != 0xF4 || s[1] <= 0x8F) ? 4 : 0;
    return 0;
}

static int
utf8_valid(const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        int length = utf8_sequence(s + i, n - i);
        if (!length)
            return 0;
        i += length;
    }
    return 1;
}

/* The arguments scan() and to_json() share: data, pos, end, base_offset, base_timestamp,
 * fixed_timestamp (None: each record's own). */
typedef struct {
    const unsigned char *p;
    Py_ssize_t pos, end;
    long long base_offset, base_timestamp, fixed_timestamp;
    int fixed;
} Packed;

/* 1: read; 0: arguments C leaves to Python (numbers past 64 bits, a window outside data).
 * data and size: args[0]'s bytes. */
static int
read_packed_args(PyObject *const *args, const char *data, Py_ssize_t size, Packed *b)
{
    b->p = (const unsigned char *)data;
    b->pos = PyLong_AsSsize_t(args[1]);
    b->end = PyLong_AsSsize_t(args[2]);
    b->base_offset = PyLong_AsLongLong(args[3]);
    b->base_timestamp = PyLong_AsLongLong(args[4]);
    b->fixed = args[5] != Py_None;
    b->fixed_timestamp = b->fixed ? PyLong_AsLongLong(args[5]) : 0;
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return b->pos >= 0 && b->end <= size && b->pos <= b->end;
}

/* Record number ``count`` at b->pos, framed, with its offset and timestamp: 0, or -1 when the
 * batch can't be packed (irregular, a header key not UTF-8, a delta not ``count``). */
static int
next_packed(const Packed *b, Py_ssize_t count, Frame *f, long long *offset, long long *timestamp)
{
    if (frame_record(b->p, b->pos, b->end, f) || f->offset_delta != count ||
        __builtin_add_overflow(b->base_offset, f->offset_delta, offset))
        return -1;
    *timestamp = b->fixed_timestamp;
    if (!b->fixed && __builtin_add_overflow(b->base_timestamp, f->timestamp_delta, timestamp))
        return -1;
    Py_ssize_t at = f->headers_at;
    for (int64_t n = 0; n < f->header_count; n++) {
        const unsigned char *key = NULL, *value = NULL;
        Py_ssize_t key_size = 0, value_size = 0;
        if (read_header(b->p, &at, f->end, &key, &key_size, &value, &value_size) ||
            !utf8_valid(key, key_size))
            return -1;
    }
    return 0;
}

/* The records of b->p[b->pos..b->end) counted, with the largest timestamp: 0, or -1 when they
 * can't be packed (see next_packed) or there are more than ``limit``. */
static int
scan_records(Packed *b, Py_ssize_t limit, Py_ssize_t *count, long long *largest)
{
    long long offset, timestamp;
    *count = 0;
    *largest = 0;
    while (b->pos < b->end) {
        Frame f;
        if (*count >= limit || next_packed(b, *count, &f, &offset, &timestamp))
            return -1;
        if (*count == 0 || timestamp > *largest)
            *largest = timestamp;
        b->pos = f.end;
        (*count)++;
    }
    return 0;
}

/* scan(data, pos, end, base_offset, base_timestamp, fixed_timestamp, limit)
 *     -> (count, largest timestamp or None) | None
 * Not None when decode() would decode every record of data[pos:end] in one call of ``limit``,
 * every header key is UTF-8 and the offset deltas are 0, 1, 2, ...; the largest timestamp is
 * None with a fixed one, or without records. data: bytes, or any contiguous buffer (a view of
 * a mapped segment: validate scans a batch where it lies, without copying it). */
static PyObject *
scan(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "scan(data: bytes-like, pos, end, base_offset, base_timestamp, "
                                         "fixed_timestamp, limit)");
        return NULL;
    }
    Py_buffer view = {0};
    const char *data;
    Py_ssize_t size;
    if (PyBytes_Check(args[0])) {
        data = PyBytes_AS_STRING(args[0]);
        size = PyBytes_GET_SIZE(args[0]);
    } else {
        if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
            return NULL;
        data = view.buf;
        size = view.len;
    }
    PyObject *result = Py_None;
    Packed b;
    Py_ssize_t limit = PyLong_AsSsize_t(args[6]);
    if (!read_packed_args(args, data, size, &b))
        goto done;
    Py_ssize_t count = 0;
    long long largest = 0;
    if (scan_records(&b, limit, &count, &largest))
        goto done;
    result = b.fixed || count == 0 ? Py_BuildValue("(nO)", count, Py_None)
                                   : Py_BuildValue("(nL)", count, largest);
    if (view.obj != NULL)
        PyBuffer_Release(&view);
    return result;
done:
    if (view.obj != NULL)
        PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

/* The JSON text being written: a bytes object grown as needed, shrunk to fit at the end. */
typedef struct {
    PyObject *bytes;
    char *at, *limit;
} Out;

static int
grow(Out *out, Py_ssize_t more)
{
    char *start = PyBytes_AS_STRING(out->bytes);
    Py_ssize_t used = out->at - start, size = out->limit - start;
    Py_ssize_t want = size * 2 > used + more ? size * 2 : used + more + 4096;
    if (_PyBytes_Resize(&out->bytes, want))
        return -1;
    start = PyBytes_AS_STRING(out->bytes);
    out->at = start + used;
    out->limit = start + want;
    return 0;
}

/* Room for ``more`` bytes at out->at: 0, or -1 (out of memory; out->bytes is gone). */
static inline int
reserve(Out *out, Py_ssize_t more)
{
    return out->limit - out->at >= more ? 0 : grow(out, more);
}

#define PUT(out, text) (memcpy((out)->at, text, sizeof(text) - 1), (out)->at += sizeof(text) - 1)

static const char two_digits[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static inline void
put_int(Out *out, long long value)
{
    char digits[24], *end = digits + sizeof digits, *at = end;
    unsigned long long magnitude = value < 0 ? 0ULL - (unsigned long long)value : (unsigned long long)value;
    while (magnitude >= 100) {  /* two digits a division */
        unsigned int pair = (unsigned int)(magnitude % 100);
        magnitude /= 100;
        at -= 2;
        memcpy(at, two_digits + 2 * pair, 2);
    }
    if (magnitude >= 10) {
        at -= 2;
        memcpy(at, two_digits + 2 * magnitude, 2);
    } else {
        *--at = (char)('0' + magnitude);
    }
    if (value < 0)
        *out->at++ = '-';
    memcpy(out->at, at, end - at);
    out->at += end - at;
}

/* How orjson writes each byte inside a string: 0 as it is, else the character after the
 * backslash ('u': \u00XX). */
static char escapes[256];
static const char hex_digits[] = "0123456789abcdef";

/* The high bit of each of the 8 bytes that is a control character, '"', '\\' or not ASCII,
 * and of no other (no carries cross bytes: the low 7 bits are tested apart from the high one). */
static inline uint64_t
special_bytes(uint64_t word)
{
    const uint64_t ones = 0x0101010101010101ULL, low7 = 0x7F7F7F7F7F7F7F7FULL,
                   highs = 0x8080808080808080ULL;
    uint64_t quote = word ^ (ones * '"'), backslash = word ^ (ones * '\\');
    uint64_t control = ~(((word & low7) + ones * 0x60) | word);
    uint64_t is_quote = ~(((quote & low7) + low7) | quote);
    uint64_t is_backslash = ~(((backslash & low7) + low7) | backslash);
    return (control | is_quote | is_backslash | word) & highs;
}

/* An ASCII byte that needs escaping, as orjson writes it. */
static inline char *
put_escape(char *at, unsigned char c)
{
    char e = escapes[c];
    if (e == 'u') {
        memcpy(at, "\\u00", 4);
        at[4] = hex_digits[c >> 4];
        at[5] = hex_digits[c & 15];
        return at + 6;
    }
    at[0] = '\\';
    at[1] = e;
    return at + 2;
}

#define ESCAPE_BLOCK 65536

/* A JSON string of s[0..n) when it is UTF-8: 1; else 0, nothing written; -1: out of memory.
 * One pass: 8 bytes at a time up to the first that needs a look, which is escaped, or checked
 * as the start of a UTF-8 sequence and copied whole. */
static int
put_text(Out *out, const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t rewind = out->at - PyBytes_AS_STRING(out->bytes), i = 0;
    if (reserve(out, 2))
        return -1;
    *out->at++ = '"';
    while (i < n) {
        Py_ssize_t block_end = n - i < ESCAPE_BLOCK ? n : i + ESCAPE_BLOCK;
        if (reserve(out, (block_end - i) * 6 + 16))  /* an input byte: 6 output bytes at most */
            return -1;
        char *at = out->at;
        while (i < block_end) {
#if defined(__SSE2__)
            if (i + 16 <= n) {  /* 16 bytes a compare: record values are mostly long plain runs */
                __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
                _mm_storeu_si128((__m128i *)at, v);  /* what precedes the first special byte stays */
                /* signed: below 0x20 is a control character or a byte from 0x80 (not ASCII) */
                __m128i special = _mm_or_si128(_mm_cmplt_epi8(v, _mm_set1_epi8(0x20)),
                                               _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                                            _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))));
                unsigned int mask = (unsigned int)_mm_movemask_epi8(special);
                if (!mask) {
                    at += 16;
                    i += 16;
                    continue;
                }
                if (!_mm_movemask_epi8(v)) {  /* ASCII: escape each special byte */
                    unsigned char block[32];  /* the 16 bytes, then zeros: each copy reads 16 */
                    _mm_storeu_si128((__m128i *)block, v);
                    _mm_storeu_si128((__m128i *)(block + 16), _mm_setzero_si128());
                    int from = 0;
                    do {
                        int k = __builtin_ctz(mask);
                        memcpy(at, block + from, 16);
                        at = put_escape(at + (k - from), block[k]);
                        from = k + 1;
                        mask &= mask - 1;
                    } while (mask);
                    memcpy(at, block + from, 16);
                    at += 16 - from;
                    i += 16;
                    continue;
                }
                int plain = __builtin_ctz(mask);
                at += plain;
                i += plain;
            }
#endif
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            if (i + 8 <= n) {
                uint64_t word, special;
                memcpy(&word, s + i, 8);
                memcpy(at, &word, 8);  /* what precedes the first special byte stays */
                special = special_bytes(word);
                if (!special) {
                    at += 8;
                    i += 8;
                    continue;
                }
                if (!(word & 0x8080808080808080ULL)) {  /* ASCII: escape each special byte */
                    int from = 0;
                    do {
                        int k = __builtin_ctzll(special) >> 3;
                        uint64_t rest = word >> (8 * from);  /* bytes from..7, then zeros */
                        memcpy(at, &rest, 8);
                        at = put_escape(at + (k - from), s[i + k]);
                        from = k + 1;
                        special &= special - 1;
                    } while (special);
                    uint64_t rest = from < 8 ? word >> (8 * from) : 0;
                    memcpy(at, &rest, 8);
                    at += 8 - from;
                    i += 8;
                    continue;
                }
                int plain = __builtin_ctzll(special) >> 3;
                at += plain;
                i += plain;
            }
#endif
            unsigned char c = s[i];
            if (c >= 0x80) {
                int length = utf8_sequence(s + i, n - i);
                if (!length) {
                    out->at = PyBytes_AS_STRING(out->bytes) + rewind;
                    return 0;
                }
                memcpy(at, s + i, length);
                at += length;
                i += length;
                continue;
            }
            if (escapes[c])
                at = put_escape(at, c);
            else
                *at++ = (char)c;
            i++;
        }
        out->at = at;
    }
    if (reserve(out, 1))
        return -1;
    *out->at++ = '"';
    return 1;
}

static const char base64_digits[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int
put_base64(Out *out, const unsigned char *s, Py_ssize_t n)
{
    if (reserve(out, (n + 2) / 3 * 4 + 12))
        return -1;
    PUT(out, "{\"b64\":\"");
    char *at = out->at;
    Py_ssize_t i = 0;
    for (; i + 3 <= n; i += 3) {
        unsigned int v = (unsigned int)s[i] << 16 | (unsigned int)s[i + 1] << 8 | s[i + 2];
        at[0] = base64_digits[v >> 18];
        at[1] = base64_digits[(v >> 12) & 63];
        at[2] = base64_digits[(v >> 6) & 63];
        at[3] = base64_digits[v & 63];
        at += 4;
    }
    if (i < n) {
        unsigned int v = (unsigned int)s[i] << 16 | (i + 1 < n ? (unsigned int)s[i + 1] << 8 : 0);
        at[0] = base64_digits[v >> 18];
        at[1] = base64_digits[(v >> 12) & 63];
        at[2] = i + 1 < n ? base64_digits[(v >> 6) & 63] : '=';
        at[3] = '=';
        at += 4;
    }
    out->at = at;
    PUT(out, "\"}");
    return 0;
}

/* bytes or None as render/jsonl.py writes them: null, a string when UTF-8, else {"b64": ...} */
static int
put_bytes(Out *out, const unsigned char *s, Py_ssize_t n)
{
    if (s == NULL) {
        if (reserve(out, 4))
            return -1;
        PUT(out, "null");
        return 0;
    }
    int text = put_text(out, s, n);
    return text < 0 ? -1 : text ? 0 : put_base64(out, s, n);
}

/* to_json(data, pos, end, base_offset, base_timestamp, fixed_timestamp) -> bytes | None
 * The JSON array of the records of data[pos:end], or None where scan() would give None for
 * the offsets, lengths and header keys. */
static PyObject *
to_json(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6 || !PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "to_json(data: bytes, pos, end, base_offset, base_timestamp, "
                                         "fixed_timestamp)");
        return NULL;
    }
    Packed b;
    if (!read_packed_args(args, PyBytes_AS_STRING(args[0]), PyBytes_GET_SIZE(args[0]), &b))
        Py_RETURN_NONE;
    const unsigned char *p = b.p;
    Py_ssize_t size = (b.end - b.pos) + (b.end - b.pos) / 4 + 4096;
    Out out = {PyBytes_FromStringAndSize(NULL, size), NULL, NULL};
    if (out.bytes == NULL)
        return NULL;
    out.at = PyBytes_AS_STRING(out.bytes);
    out.limit = out.at + size;
    *out.at++ = '[';
    for (Py_ssize_t count = 0; b.pos < b.end; count++) {
        Frame f;
        long long offset, timestamp;
        if (next_packed(&b, count, &f, &offset, &timestamp))
            goto irregular;
        if (reserve(&out, 80))
            goto error;
        if (count)
            *out.at++ = ',';
        PUT(&out, "{\"offset\":");
        put_int(&out, offset);
        PUT(&out, ",\"timestamp\":");
        put_int(&out, timestamp);
        PUT(&out, ",\"key\":");
        if (put_bytes(&out, f.key, f.key_size) || reserve(&out, 16))
            goto error;
        PUT(&out, ",\"value\":");
        if (put_bytes(&out, f.value, f.value_size) || reserve(&out, 16))
            goto error;
        PUT(&out, ",\"headers\":[");
        Py_ssize_t at = f.headers_at;
        for (int64_t n = 0; n < f.header_count; n++) {
            const unsigned char *key = NULL, *value = NULL;
            Py_ssize_t key_size = 0, value_size = 0;
            read_header(p, &at, f.end, &key, &key_size, &value, &value_size);  /* read before */
            if (reserve(&out, 16))
                goto error;
            if (n)
                *out.at++ = ',';
            PUT(&out, "{\"key\":");
            int text = put_text(&out, key, key_size);  /* UTF-8: next_packed checked */
            if (text < 0 || reserve(&out, 16))
                goto error;
            if (!text)
                goto irregular;
            PUT(&out, ",\"value\":");
            if (put_bytes(&out, value, value_size) || reserve(&out, 4))
                goto error;
            *out.at++ = '}';
        }
        if (reserve(&out, 4))
            goto error;
        PUT(&out, "]}");
        b.pos = f.end;
    }
    if (reserve(&out, 1))
        goto error;
    *out.at++ = ']';
    if (_PyBytes_Resize(&out.bytes, out.at - PyBytes_AS_STRING(out.bytes)))
        return NULL;
    return out.bytes;
irregular:
    Py_DECREF(out.bytes);
    Py_RETURN_NONE;
error:
    Py_XDECREF(out.bytes);
    return NULL;
}

/* CRC-32C (Castagnoli, reflected 0x82F63B78), as kinspect/records/crc.py gives it: the SSE4.2
 * instruction where the CPU has it, else a table a byte at a time. */
static uint32_t crc32c_table[256];
static int crc32c_hardware;

static void
crc32c_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc32c_table[i] = c;
    }
#if defined(__x86_64__) && defined(__GNUC__)
    crc32c_hardware = __builtin_cpu_supports("sse4.2");
#endif
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("sse4.2"))) static uint32_t
crc32c_sse42(uint32_t c, const unsigned char *p, Py_ssize_t n)
{
    uint64_t c64 = c;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c64 = __builtin_ia32_crc32di(c64, word);
    }
    c = (uint32_t)c64;
    for (; n > 0; p++, n--)
        c = __builtin_ia32_crc32qi(c, *p);
    return c;
}
#endif

static uint32_t
crc32c_of(const unsigned char *p, Py_ssize_t n)
{
    uint32_t c = 0xFFFFFFFFu;
#if defined(__x86_64__) && defined(__GNUC__)
    if (crc32c_hardware)
        return ~crc32c_sse42(c, p, n);
#endif
    while (n-- > 0)
        c = crc32c_table[(c ^ *p++) & 0xFF] ^ (c >> 8);
    return ~c;
}

static inline int64_t
be_int(const unsigned char *p, int size)
{
    uint64_t v = 0;
    for (int i = 0; i < size; i++)
        v = v << 8 | p[i];
    int shift = 64 - 8 * size;
    return shift ? (int64_t)(v << shift) >> shift : (int64_t)v;
}

/* frame(data, limit, max_batches) -> (list, stop)
 * The whole v2 batches a record set starts with, framed and their CRCs checked: a tuple per
 * batch of (position, base_offset, batch_length, partition_leader_epoch, crc, attributes,
 * last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence,
 * records_count, packed), where packed is what scan(data, position + 61, end, base_offset,
 * base_timestamp, fixed timestamp, limit) gives for an uncompressed batch that is not a control
 * batch, and None for the others; and where they stop: the end of data, or the first unit that
 * is not a whole v2 batch with its CRC right (a cut-off batch at the end of a Fetch response,
 * another magic, a bad CRC), or after ``max_batches`` batches (the most the caller may hold: a
 * set of a million tiny batches never becomes a million tuples). The record-set walker in
 * Python reports what is there. */
static PyObject *
frame(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "frame(data: bytes-like, limit, max_batches)");
        return NULL;
    }
    Py_ssize_t limit = PyLong_AsSsize_t(args[1]), max_batches = PyLong_AsSsize_t(args[2]);
    if ((limit == -1 || max_batches == -1) && PyErr_Occurred())
        return NULL;
    Py_buffer view = {0};
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *p = view.buf;
    Py_ssize_t size = view.len, pos = 0;
    PyObject *batches = PyList_New(0);
    if (batches == NULL)
        goto error;
    while (pos < size && PyList_GET_SIZE(batches) < max_batches) {
        Py_ssize_t left = size - pos;
        if (left < 61)
            break;
        int64_t length = be_int(p + pos + 8, 4);
        if (length < 49 || length > left - 12 || p[pos + 16] != 2)
            break;
        Py_ssize_t end = pos + 12 + (Py_ssize_t)length;
        uint32_t crc = (uint32_t)be_int(p + pos + 17, 4);
        if (crc32c_of(p + pos + 21, end - pos - 21) != crc)
            break;
        int attributes = (int)be_int(p + pos + 21, 2);
        long long base_offset = be_int(p + pos, 8), base_timestamp = be_int(p + pos + 27, 8);
        long long max_timestamp = be_int(p + pos + 35, 8);
        PyObject *packed;
        if ((attributes & 0x07) == 0 && !(attributes & 0x20)) {
            int fixed = (attributes & 0x08) != 0;
            Packed b = {p, pos + 61, end, base_offset, base_timestamp, max_timestamp, fixed};
            Py_ssize_t count;
            long long largest;
            if (scan_records(&b, limit, &count, &largest))
                packed = Py_NewRef(Py_None);
            else
                packed = fixed || count == 0 ? Py_BuildValue("(nO)", count, Py_None)
                                             : Py_BuildValue("(nL)", count, largest);
        } else {
            packed = Py_NewRef(Py_None);
        }
        if (packed == NULL)
            goto error;
        PyObject *batch = Py_BuildValue(
            "(nLiiIiiLLLiiiN)", pos, base_offset, (int)length, (int)be_int(p + pos + 12, 4), crc,
            attributes, (int)be_int(p + pos + 23, 4), base_timestamp, max_timestamp,
            (long long)be_int(p + pos + 43, 8), (int)be_int(p + pos + 51, 2),
            (int)be_int(p + pos + 53, 4), (int)be_int(p + pos + 57, 4), packed);
        if (batch == NULL)
            goto error;
        int failed = PyList_Append(batches, batch);
        Py_DECREF(batch);
        if (failed)
            goto error;
        pos = end;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(Nn)", batches, pos);
error:
    Py_XDECREF(batches);
    PyBuffer_Release(&view);
    return NULL;
}

static PyMethodDef methods[] = {
    {"decode", (PyCFunction)(void (*)(void))decode, METH_FASTCALL,
     "decode(data, pos, end, base_offset, base_timestamp, fixed_timestamp[, limit[, bad_keys[, keep]]])"
     " -> list | tuple | None\n\n"
     "The records of a v2 batch in data[pos:end], or None when anything is irregular; with limit,\n"
     "(at most limit records, the position after them). With a list bad_keys, a header key that\n"
     "is not UTF-8 is decoded with errors=\"replace\", the first keep of them are appended as\n"
     "(record index in this call, header number, record position), and the result is\n"
     "(records, position after, bad keys in all)."},
    {"scan", (PyCFunction)(void (*)(void))scan, METH_FASTCALL,
     "scan(data, pos, end, base_offset, base_timestamp, fixed_timestamp, limit)"
     " -> (count, largest timestamp) | None\n\n"
     "Whether the records of data[pos:end] can be kept packed: regular, at most limit of them,\n"
     "UTF-8 header keys, offset deltas 0, 1, 2, ..."},
    {"to_json", (PyCFunction)(void (*)(void))to_json, METH_FASTCALL,
     "to_json(data, pos, end, base_offset, base_timestamp, fixed_timestamp) -> bytes | None\n\n"
     "The JSON array of packed records, as orjson writes the dicts decode() builds."},
    {"frame", (PyCFunction)(void (*)(void))frame, METH_FASTCALL,
     "frame(data, limit, max_batches) -> (list, stop)\n\n"
     "The whole v2 batches with matching CRCs a record set starts with, at most max_batches: a\n"
     "tuple per batch of its position, its 13 header fields and, for an uncompressed batch that\n"
     "is not a control batch, what scan(..., limit) gives for its records (else None); and where\n"
     "they stop."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_v2records",
    .m_doc = "Fast path for the records of a v2 record batch.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__v2records(void)
{
    if (!(k_offset = PyUnicode_InternFromString("offset")) ||
        !(k_timestamp = PyUnicode_InternFromString("timestamp")) ||
        !(k_key = PyUnicode_InternFromString("key")) ||
        !(k_value = PyUnicode_InternFromString("value")) ||
        !(k_headers = PyUnicode_InternFromString("headers")))
        return NULL;
    record_template = Py_BuildValue("{OOOOOOOOOO}", k_offset, Py_None, k_timestamp, Py_None, k_key,
                                    Py_None, k_value, Py_None, k_headers, Py_None);
    header_template = Py_BuildValue("{OOOO}", k_key, Py_None, k_value, Py_None);
    if (record_template == NULL || header_template == NULL)
        return NULL;
    crc32c_init();
    for (int c = 0; c < 0x20; c++)
        escapes[c] = 'u';
    escapes['\b'] = 'b';
    escapes['\t'] = 't';
    escapes['\n'] = 'n';
    escapes['\f'] = 'f';
    escapes['\r'] = 'r';
    escapes['"'] = '"';
    escapes['\\'] = '\\';
    return PyModule_Create(&module_def);
}
