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
#include "_json_out.h"

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


/* -- schema-decoded keys and values (records/packed.py's seam, schemas/stage.py) ----------
 *
 * With a schema table, a key or value framed as Confluent's V0 (0x00, a 4-byte big-endian id,
 * the payload) is written as the JSON text of its decoded value, and its schema object after the
 * record's headers ("key_schema", "value_schema"), as schemas/records.py's apply_record leaves
 * the record. The table maps an id (int) to (reader, about): ``about`` the schema object's JSON
 * text; ``reader`` a capsule of JSON_READER_CAPSULE (called here directly), or a callable
 * reader(payload) -> (value's JSON, about's JSON) | None. An id the table lacks is asked of
 * resolve(id) -> entry | None. Whatever C does not write as Python would (a GUID, a schema id in
 * a header, an id with no entry, a payload its reader does not take) makes the whole batch go
 * the Python way: to_json gives None.
 */
typedef struct {
    PyObject *table, *resolve;
    Py_ssize_t decoded;
} SchemaTable;

/* Header names that carry a schema id (schemas/framing.py): records with one go the Python way. */
static const char *const schema_headers[] = {
    "__key_schema_id", "__value_schema_id", "apicurio.key.contentId", "apicurio.key.globalId",
    "apicurio.value.contentId", "apicurio.value.globalId", NULL,
};

static int
is_schema_header(const unsigned char *key, Py_ssize_t size)
{
    for (int i = 0; schema_headers[i]; i++)
        if ((Py_ssize_t)strlen(schema_headers[i]) == size && !memcmp(schema_headers[i], key, size))
            return 1;
    return 0;
}

#define TOO_HARD 0  /* the batch goes the Python way */

/* A key or value: 1 written (*about: a new reference to its schema object's JSON text when it
 * was framed, else NULL); TOO_HARD; -1 with an exception set. */
static int
put_value(Out *out, const unsigned char *s, Py_ssize_t n, SchemaTable *schemas, PyObject **about)
{
    *about = NULL;
    if (schemas == NULL || s == NULL || n < 5 || s[0] > 1)
        return put_bytes(out, s, n) ? -1 : 1;
    if (s[0] == 1)
        return n < 17 ? (put_bytes(out, s, n) ? -1 : 1) : TOO_HARD;  /* a GUID: Python's */
    unsigned long id = (unsigned long)s[1] << 24 | (unsigned long)s[2] << 16 | (unsigned long)s[3] << 8 | s[4];
    PyObject *key = PyLong_FromUnsignedLong(id);
    if (key == NULL)
        return -1;
    PyObject *entry = PyDict_GetItemWithError(schemas->table, key);  /* borrowed */
    Py_XINCREF(entry);
    if (entry == NULL && !PyErr_Occurred())
        entry = PyObject_CallOneArg(schemas->resolve, key);
    Py_DECREF(key);
    if (entry == NULL)
        return -1;
    int result = TOO_HARD;
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2)
        goto done;
    PyObject *reader = PyTuple_GET_ITEM(entry, 0), *shown = PyTuple_GET_ITEM(entry, 1);
    if (PyCapsule_IsValid(reader, JSON_READER_CAPSULE)) {
        const JsonReader *c = PyCapsule_GetPointer(reader, JSON_READER_CAPSULE);
        if (!PyBytes_Check(shown))
            goto done;
        Py_ssize_t rewind = out->at - PyBytes_AS_STRING(out->bytes);
        result = c->write(c->program, s + 5, n - 5, out);
        if (result == 0)
            out->at = PyBytes_AS_STRING(out->bytes) + rewind;
        if (result == 1) {
            *about = shown;
            Py_INCREF(shown);
        }
        goto done;
    }
    PyObject *payload = PyBytes_FromStringAndSize((const char *)s + 5, n - 5);
    PyObject *got = payload == NULL ? NULL : PyObject_CallOneArg(reader, payload);
    Py_XDECREF(payload);
    if (got == NULL) {
        result = -1;
        goto done;
    }
    if (PyTuple_Check(got) && PyTuple_GET_SIZE(got) == 2 && PyBytes_Check(PyTuple_GET_ITEM(got, 0)) &&
        PyBytes_Check(PyTuple_GET_ITEM(got, 1))) {
        PyObject *text = PyTuple_GET_ITEM(got, 0);
        Py_ssize_t size = PyBytes_GET_SIZE(text);
        if (reserve(out, size)) {
            result = -1;
        } else {
            memcpy(out->at, PyBytes_AS_STRING(text), size);
            out->at += size;
            *about = PyTuple_GET_ITEM(got, 1);
            Py_INCREF(*about);
            result = 1;
        }
    }
    Py_DECREF(got);
done:
    Py_DECREF(entry);
    if (result == 1 && *about != NULL)
        schemas->decoded++;
    return result;
}

/* ``,"name":`` and the schema object's JSON text; the reference is given up. */
static int
put_about(Out *out, const char *name, PyObject *about)
{
    Py_ssize_t size = PyBytes_GET_SIZE(about);
    int failed = reserve(out, size + 20);
    if (!failed) {
        size_t length = strlen(name);
        memcpy(out->at, name, length);
        out->at += length;
        memcpy(out->at, PyBytes_AS_STRING(about), size);
        out->at += size;
    }
    Py_DECREF(about);
    return failed ? -1 : 0;
}

/* to_json(data, pos, end, base_offset, base_timestamp, fixed_timestamp[, table, resolve])
 *     -> bytes | (bytes, values decoded) | None
 * The JSON array of the records of data[pos:end], or None where scan() would give None for
 * the offsets, lengths and header keys. With a schema table (see above): (the array, how many
 * keys and values were written decoded), or None where the batch goes the Python way. */
static PyObject *
to_json(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if ((nargs != 6 && nargs != 8) || !PyBytes_Check(args[0]) || (nargs == 8 && !PyDict_Check(args[6]))) {
        PyErr_SetString(PyExc_TypeError, "to_json(data: bytes, pos, end, base_offset, base_timestamp, "
                                         "fixed_timestamp[, table: dict, resolve])");
        return NULL;
    }
    SchemaTable table = {nargs == 8 ? args[6] : NULL, nargs == 8 ? args[7] : NULL, 0};
    SchemaTable *schemas = nargs == 8 ? &table : NULL;
    Packed b;
    if (!read_packed_args(args, PyBytes_AS_STRING(args[0]), PyBytes_GET_SIZE(args[0]), &b))
        Py_RETURN_NONE;
    const unsigned char *p = b.p;
    /* decoded values take about twice their bytes (field names): fewer copies as it grows */
    Py_ssize_t size = (b.end - b.pos) * (schemas ? 3 : 1) + (b.end - b.pos) / 4 + 4096;
    Out out = {PyBytes_FromStringAndSize(NULL, size), NULL, NULL};
    if (out.bytes == NULL)
        return NULL;
    out.at = PyBytes_AS_STRING(out.bytes);
    out.limit = out.at + size;
    *out.at++ = '[';
    PyObject *key_about = NULL, *value_about = NULL;
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
        int put = put_value(&out, f.key, f.key_size, schemas, &key_about);
        if (put < 0 || (put && reserve(&out, 16)))
            goto error;
        if (!put)
            goto irregular;
        PUT(&out, ",\"value\":");
        put = put_value(&out, f.value, f.value_size, schemas, &value_about);
        if (put < 0 || (put && reserve(&out, 16)))
            goto error;
        if (!put)
            goto irregular;
        PUT(&out, ",\"headers\":[");
        Py_ssize_t at = f.headers_at;
        for (int64_t n = 0; n < f.header_count; n++) {
            const unsigned char *key = NULL, *value = NULL;
            Py_ssize_t key_size = 0, value_size = 0;
            read_header(p, &at, f.end, &key, &key_size, &value, &value_size);  /* read before */
            if (schemas != NULL && is_schema_header(key, key_size))
                goto irregular;
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
        *out.at++ = ']';
        if (key_about != NULL && put_about(&out, ",\"key_schema\":", key_about)) {
            key_about = NULL;
            goto error;
        }
        key_about = NULL;
        if (value_about != NULL && put_about(&out, ",\"value_schema\":", value_about)) {
            value_about = NULL;
            goto error;
        }
        value_about = NULL;
        if (reserve(&out, 4))
            goto error;
        *out.at++ = '}';
        b.pos = f.end;
    }
    if (reserve(&out, 1))
        goto error;
    *out.at++ = ']';
    if (_PyBytes_Resize(&out.bytes, out.at - PyBytes_AS_STRING(out.bytes)))
        return NULL;
    if (schemas == NULL)
        return out.bytes;
    PyObject *result = Py_BuildValue("(Nn)", out.bytes, table.decoded);
    return result;
irregular:
    Py_XDECREF(key_about);
    Py_XDECREF(value_about);
    Py_DECREF(out.bytes);
    Py_RETURN_NONE;
error:
    Py_XDECREF(key_about);
    Py_XDECREF(value_about);
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
     "to_json(data, pos, end, base_offset, base_timestamp, fixed_timestamp[, table, resolve])"
     " -> bytes | (bytes, decoded) | None\n\n"
     "The JSON array of packed records, as orjson writes the dicts decode() builds; with a schema\n"
     "table, framed keys and values decoded as schemas/records.py leaves them (see the source)."},
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
    json_out_init();
    return PyModule_Create(&module_def);
}
