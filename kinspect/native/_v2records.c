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

static PyMethodDef methods[] = {
    {"decode", (PyCFunction)(void (*)(void))decode, METH_FASTCALL,
     "decode(data, pos, end, base_offset, base_timestamp, fixed_timestamp[, limit[, bad_keys[, keep]]])"
     " -> list | tuple | None\n\n"
     "The records of a v2 batch in data[pos:end], or None when anything is irregular; with limit,\n"
     "(at most limit records, the position after them). With a list bad_keys, a header key that\n"
     "is not UTF-8 is decoded with errors=\"replace\", the first keep of them are appended as\n"
     "(record index in this call, header number, record position), and the result is\n"
     "(records, position after, bad keys in all)."},
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
    return PyModule_Create(&module_def);
}
