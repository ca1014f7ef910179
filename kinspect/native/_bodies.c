/* Walks over bodies, in C.
 *
 * walk(buf, start, end, program, raw, items, prefix): a body's regular case decoded in one call
 * (twin: kinspect/wire/bodywalk.py's walk_py; the program and what it returns are described
 * there): (body, record sets) or None where the generated decoder has anything to report.
 *
 * error_codes(body, out): appends to the list ``out`` every int (exactly int: not bool) that is
 * not zero and sits under a str key ending in "error_code", depth first in the dicts' and lists'
 * own order, looking into dicts and lists only (exactly those types), and not into a list under
 * the key "records". A Metadata response of thousands of partitions is walked in microseconds:
 * the Python walk was a call per dict and list (95k calls on a 322 MB capture).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyObject *suffix;   /* "error_code" */
static PyObject *records;  /* "records" */

static int walk(PyObject *body, PyObject *out);

/* walk() of a borrowed container, held while it is walked */
static int
walk_held(PyObject *child, PyObject *out)
{
    Py_INCREF(child);
    int failed = walk(child, out);
    Py_DECREF(child);
    return failed;
}

static int
walk_list(PyObject *list, PyObject *out)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *item = PyList_GET_ITEM(list, i);
        if ((PyDict_CheckExact(item) || PyList_CheckExact(item)) && walk_held(item, out))
            return -1;
    }
    return 0;
}

static int
walk_dict(PyObject *dict, PyObject *out)
{
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        int is_str = PyUnicode_CheckExact(key);
        if (PyLong_CheckExact(value)) {
            if (!is_str)
                continue;
            int nonzero = PyObject_IsTrue(value);
            if (nonzero < 0)
                return -1;
            if (!nonzero)
                continue;
            Py_ssize_t match = PyUnicode_Tailmatch(key, suffix, 0, PY_SSIZE_T_MAX, 1);
            if (match < 0)
                return -1;
            if (match && PyList_Append(out, value) < 0)
                return -1;
        } else if ((PyDict_CheckExact(value)
                    || (PyList_CheckExact(value) && !(is_str && PyUnicode_Compare(key, records) == 0)))
                   && walk_held(value, out)) {
            return -1;
        }
    }
    return 0;
}

static int
walk(PyObject *body, PyObject *out)
{
    if (Py_EnterRecursiveCall(" while collecting error codes"))
        return -1;
    int failed = PyList_CheckExact(body) ? walk_list(body, out)
               : PyDict_CheckExact(body) ? walk_dict(body, out) : 0;
    Py_LeaveRecursiveCall();
    return failed;
}

static PyObject *
error_codes(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "error_codes(body, out: list)");
        return NULL;
    }
    if (walk(args[0], args[1]))
        return NULL;
    Py_RETURN_NONE;
}


/* -- walk: a body's regular case ---------------------------------------------------------- */

enum { BOOL, INT8, INT16, UINT16, INT32, UINT32, INT64, FLOAT64, UUID, STRING, BYTES, RECORDS, STRUCT };
enum { ARRAY = 1, NULLABLE = 2, COMPACT = 4 };
#define IRREGULAR 1
#define PATH_ROOM 1024

typedef struct {
    PyObject *bufobj;
    const unsigned char *buf;
    Py_ssize_t end;
    int raw;
    long long items;
    PyObject *prefix;
    PyObject *sets;
    char path[PATH_ROOM];  /* the tail after prefix, UTF-8 */
    size_t plen;
} Walk;

static const char ARROW[] = " \xe2\x86\x92 ";  /* " → " */

static int walk_struct(Walk *w, Py_ssize_t *pos, PyObject *program, int flexible, PyObject *o);

/* appends " → key" or " → key[i]" to the path; IRREGULAR when it does not fit */
static int
path_push(Walk *w, PyObject *key, Py_ssize_t index)
{
    Py_ssize_t n;
    const char *text = PyUnicode_AsUTF8AndSize(key, &n);
    if (text == NULL)
        return -1;
    int wrote;
    size_t room = PATH_ROOM - w->plen;
    if (index < 0)
        wrote = snprintf(w->path + w->plen, room, "%s%.*s", ARROW, (int)n, text);
    else
        wrote = snprintf(w->path + w->plen, room, "%s%.*s[%zd]", ARROW, (int)n, text, index);
    if (wrote < 0 || (size_t)wrote >= room) {
        w->path[w->plen] = 0;
        return IRREGULAR;
    }
    w->plen += (size_t)wrote;
    return 0;
}

/* an unsigned varint of at most five bytes */
static int
read_uvarint(Walk *w, Py_ssize_t *pos, long long *value)
{
    Py_ssize_t p = *pos;
    unsigned long long v = 0;
    for (int i = 0; i < 5; i++) {
        if (p >= w->end)
            return IRREGULAR;
        unsigned char byte = w->buf[p++];
        v |= (unsigned long long)(byte & 0x7F) << (7 * i);
        if (!(byte & 0x80)) {
            *value = (long long)v;
            *pos = p;
            return 0;
        }
    }
    return IRREGULAR;
}

/* a length prefix: compact (uvarint - 1), else a signed int32 (wide) or int16 */
static int
read_length(Walk *w, Py_ssize_t *pos, int flags, int wide, long long *n)
{
    Py_ssize_t p = *pos;
    if (flags & COMPACT) {
        if (read_uvarint(w, pos, n))
            return IRREGULAR;
        *n -= 1;
        return 0;
    }
    const unsigned char *b = w->buf + p;
    if (wide) {
        if (w->end - p < 4)
            return IRREGULAR;
        *n = (int32_t)((uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]);
        *pos = p + 4;
    } else {
        if (w->end - p < 2)
            return IRREGULAR;
        *n = (int16_t)((uint16_t)(b[0] << 8 | b[1]));
        *pos = p + 2;
    }
    return 0;
}

static const Py_ssize_t FIXED_SIZE[] = {1, 1, 2, 2, 4, 4, 8, 8, 16};

static uint64_t
big_endian(const unsigned char *b, int size)
{
    uint64_t v = 0;
    for (int i = 0; i < size; i++)
        v = v << 8 | b[i];
    return v;
}

/* a fixed-size value at *pos (new reference), NULL with *irregular set when it does not fit */
static PyObject *
fixed_value(Walk *w, Py_ssize_t *pos, int code, int *irregular)
{
    Py_ssize_t size = FIXED_SIZE[code];
    if (w->end - *pos < size) {
        *irregular = 1;
        return NULL;
    }
    const unsigned char *b = w->buf + *pos;
    *pos += size;
    uint64_t v = big_endian(b, (int)size);
    switch (code) {
    case BOOL: return PyBool_FromLong(v != 0);
    case INT8: return PyLong_FromLong((int8_t)v);
    case INT16: return PyLong_FromLong((int16_t)v);
    case UINT16: return PyLong_FromLong((long)v);
    case INT32: return PyLong_FromLong((int32_t)v);
    case UINT32: return PyLong_FromUnsignedLong((unsigned long)v);
    case INT64: return PyLong_FromLongLong((int64_t)v);
    case FLOAT64: {
        double d;
        memcpy(&d, &v, 8);
        return PyFloat_FromDouble(d);
    }
    default: {  /* UUID: 8-4-4-4-12 lowercase hex */
        static const char hex[] = "0123456789abcdef";
        char text[36];
        int t = 0;
        for (int i = 0; i < 16; i++) {
            if (i == 4 || i == 6 || i == 8 || i == 10)
                text[t++] = '-';
            text[t++] = hex[b[i] >> 4];
            text[t++] = hex[b[i] & 15];
        }
        return PyUnicode_FromStringAndSize(text, 36);
    }
    }
}

/* a string, bytes or record set at *pos into *value (new reference; Py_None when null) */
static int
variable_value(Walk *w, Py_ssize_t *pos, int code, int flags, PyObject *key, PyObject *obj,
               PyObject **value)
{
    long long n;
    if (read_length(w, pos, flags, code != STRING, &n))
        return IRREGULAR;
    if (n < 0) {
        if (n != -1 || !(flags & NULLABLE))
            return IRREGULAR;
        *value = Py_NewRef(Py_None);
        return 0;
    }
    if (n > w->end - *pos)
        return IRREGULAR;
    const char *at = (const char *)w->buf + *pos;
    if (code == STRING) {
        *value = PyUnicode_DecodeUTF8(at, (Py_ssize_t)n, NULL);
        if (*value == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                return -1;
            PyErr_Clear();
            *value = PyBytes_FromStringAndSize(at, (Py_ssize_t)n);
        }
    } else if (code == RECORDS && !w->raw) {
        size_t saved = w->plen;
        int pushed = path_push(w, key, -1);
        if (pushed)
            return pushed;
        PyObject *path = PyUnicode_FromFormat("%U%s", w->prefix, w->path);
        w->plen = saved;
        w->path[saved] = 0;
        if (path == NULL)
            return -1;
        PyObject *entry = Py_BuildValue("(OOnLN)", obj, key, *pos, n, path);
        if (entry == NULL || PyList_Append(w->sets, entry) < 0) {
            Py_XDECREF(entry);
            return -1;
        }
        Py_DECREF(entry);
        *value = Py_NewRef(Py_None);
    } else {
        *value = PyBytes_FromStringAndSize(at, (Py_ssize_t)n);
    }
    if (*value == NULL)
        return -1;
    *pos += (Py_ssize_t)n;
    return 0;
}


/* stores value (a new reference, stolen) under key */
static int
store(PyObject *o, PyObject *key, PyObject *value)
{
    int failed = PyDict_SetItem(o, key, value);
    Py_DECREF(value);
    return failed;
}

static int
walk_array(Walk *w, Py_ssize_t *pos, int code, PyObject *key, int flags, PyObject *members,
           int flexible, PyObject *o)
{
    long long n;
    if (read_length(w, pos, flags, 1, &n))
        return IRREGULAR;
    if (n < 0) {
        if (n != -1 || !(flags & NULLABLE))
            return IRREGULAR;
        return PyDict_SetItem(o, key, Py_None);
    }
    long long smallest = code <= UUID ? FIXED_SIZE[code] : 1;
    if (n * smallest > w->end - *pos || n > w->items)
        return IRREGULAR;
    w->items -= n;
    PyObject *items = PyList_New((Py_ssize_t)n);
    if (items == NULL)
        return -1;
    if (store(o, key, Py_NewRef(items)) < 0) {
        Py_DECREF(items);
        return -1;
    }
    /* the list is in the body already: unfilled slots must hold something until filled */
    for (Py_ssize_t i = 0; i < n; i++)
        PyList_SET_ITEM(items, i, Py_NewRef(Py_None));
    int failed = 0;
    size_t saved = w->plen;
    for (Py_ssize_t i = 0; i < n && !failed; i++) {
        PyObject *value = NULL;
        int irregular = 0;
        if (code == STRUCT) {
            value = PyDict_New();
            if (value == NULL) {
                failed = -1;
                break;
            }
            failed = path_push(w, key, i);
            if (!failed)
                failed = walk_struct(w, pos, members, flexible, value);
            w->plen = saved;
            w->path[saved] = 0;
        } else if (code >= STRING) {
            failed = variable_value(w, pos, code, flags, key, items, &value);
        } else {
            value = fixed_value(w, pos, code, &irregular);
            failed = irregular ? IRREGULAR : value == NULL ? -1 : 0;
        }
        if (value != NULL) {  /* the None placeholder goes */
            PyObject *placeholder = PyList_GET_ITEM(items, i);
            PyList_SET_ITEM(items, i, value);
            Py_DECREF(placeholder);
        }
    }
    Py_DECREF(items);
    return failed;
}

/* one field of a struct into o */
static int
walk_field(Walk *w, Py_ssize_t *pos, PyObject *field, int flexible, PyObject *o)
{
    if (!PyTuple_CheckExact(field) || PyTuple_GET_SIZE(field) != 4) {
        PyErr_SetString(PyExc_TypeError, "walk: a field is (code, key, flags, members)");
        return -1;
    }
    int code = (int)PyLong_AsLong(PyTuple_GET_ITEM(field, 0));
    PyObject *key = PyTuple_GET_ITEM(field, 1);
    int flags = (int)PyLong_AsLong(PyTuple_GET_ITEM(field, 2));
    PyObject *members = PyTuple_GET_ITEM(field, 3);
    if (PyErr_Occurred())
        return -1;
    if (code < BOOL || code > STRUCT) {
        PyErr_SetString(PyExc_ValueError, "walk: unknown field code");
        return -1;
    }
    if (flags & ARRAY)
        return walk_array(w, pos, code, key, flags, members, flexible, o);
    if (code == STRUCT) {
        if (flags & NULLABLE) {
            if (*pos >= w->end)
                return IRREGULAR;
            *pos += 1;
            if (w->buf[*pos - 1] > 127)
                return PyDict_SetItem(o, key, Py_None);
        }
        PyObject *child = PyDict_New();
        if (child == NULL || store(o, key, Py_NewRef(child)) < 0) {
            Py_XDECREF(child);
            return -1;
        }
        size_t saved = w->plen;
        int failed = path_push(w, key, -1);
        if (!failed)
            failed = walk_struct(w, pos, members, flexible, child);
        w->plen = saved;
        w->path[saved] = 0;
        Py_DECREF(child);
        return failed;
    }
    if (code >= STRING) {
        PyObject *value = NULL;
        int failed = variable_value(w, pos, code, flags, key, o, &value);
        return failed ? failed : store(o, key, value);
    }
    int irregular = 0;
    PyObject *value = fixed_value(w, pos, code, &irregular);
    return irregular ? IRREGULAR : value == NULL ? -1 : store(o, key, value);
}

/* the tagged fields ending a flexible struct: known ones decoded within their size */
static int
walk_tags(Walk *w, Py_ssize_t *pos, PyObject *tags, int flexible, PyObject *o)
{
    long long count;
    if (read_uvarint(w, pos, &count))
        return IRREGULAR;
    for (long long i = 0; i < count; i++) {
        long long tag, size;
        if (read_uvarint(w, pos, &tag) || read_uvarint(w, pos, &size) || size > w->end - *pos)
            return IRREGULAR;
        PyObject *number = PyLong_FromLongLong(tag);
        if (number == NULL)
            return -1;
        PyObject *field = PyDict_GetItemWithError(tags, number);  /* borrowed */
        Py_DECREF(number);
        if (field == NULL)
            return PyErr_Occurred() ? -1 : IRREGULAR;
        Py_ssize_t stop = *pos + (Py_ssize_t)size, end = w->end;
        w->end = stop;
        int failed = walk_field(w, pos, field, flexible, o);
        w->end = end;
        if (failed)
            return failed;
        if (*pos != stop)
            return IRREGULAR;
    }
    return 0;
}

/* a struct's program is (its regular fields, {tag: field} of its known tagged fields) */
static int
walk_struct(Walk *w, Py_ssize_t *pos, PyObject *program, int flexible, PyObject *o)
{
    if (!PyTuple_CheckExact(program) || PyTuple_GET_SIZE(program) != 2
            || !PyTuple_CheckExact(PyTuple_GET_ITEM(program, 0))
            || !PyDict_CheckExact(PyTuple_GET_ITEM(program, 1))) {
        PyErr_SetString(PyExc_TypeError, "walk: a struct is (fields, tags)");
        return -1;
    }
    if (Py_EnterRecursiveCall(" while walking a body"))
        return -1;
    PyObject *fields = PyTuple_GET_ITEM(program, 0);
    int failed = 0;
    for (Py_ssize_t f = 0; f < PyTuple_GET_SIZE(fields) && !failed; f++)
        failed = walk_field(w, pos, PyTuple_GET_ITEM(fields, f), flexible, o);
    if (!failed && flexible) {
        if (*pos >= w->end)
            failed = IRREGULAR;
        else if (w->buf[*pos])
            failed = walk_tags(w, pos, PyTuple_GET_ITEM(program, 1), flexible, o);
        else
            *pos += 1;
    }
    Py_LeaveRecursiveCall();
    return failed;
}

static PyObject *
walk_body(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7 || !PyBytes_CheckExact(args[0]) || !PyTuple_CheckExact(args[3])
            || PyTuple_GET_SIZE(args[3]) != 2 || !PyUnicode_CheckExact(args[6])) {
        PyErr_SetString(PyExc_TypeError, "walk(buf: bytes, start, end, program, raw, items, prefix: str)");
        return NULL;
    }
    Walk w;
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    long long items = PyLong_AsLongLong(args[5]);
    int raw = PyObject_IsTrue(args[4]);
    int flexible = PyObject_IsTrue(PyTuple_GET_ITEM(args[3], 0));
    if (PyErr_Occurred() || raw < 0 || flexible < 0)
        return NULL;
    if (start < 0 || end > PyBytes_GET_SIZE(args[0])) {
        PyErr_SetString(PyExc_ValueError, "walk: start and end must lie within buf");
        return NULL;
    }
    if (start > end)  /* a body that is not there: the generated decoder says so */
        Py_RETURN_NONE;
    w.bufobj = args[0];
    w.buf = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    w.end = end;
    w.raw = raw;
    w.items = items;
    w.prefix = args[6];
    w.plen = 0;
    w.path[0] = 0;
    w.sets = PyList_New(0);
    PyObject *body = PyDict_New();
    if (w.sets == NULL || body == NULL)
        goto fail;
    Py_ssize_t pos = start;
    int failed = walk_struct(&w, &pos, PyTuple_GET_ITEM(args[3], 1), flexible, body);
    if (failed < 0)
        goto fail;
    if (failed || pos != end) {
        Py_DECREF(body);
        Py_DECREF(w.sets);
        Py_RETURN_NONE;
    }
    return Py_BuildValue("(NN)", body, w.sets);
fail:
    Py_XDECREF(body);
    Py_XDECREF(w.sets);
    return NULL;
}

static PyMethodDef methods[] = {
    {"walk", (PyCFunction)(void (*)(void))walk_body, METH_FASTCALL,
     "walk(buf, start, end, program, raw, items, prefix) -> (body, record sets) or None"},
    {"error_codes", (PyCFunction)(void (*)(void))error_codes, METH_FASTCALL,
     "error_codes(body, out) -> None: the non-zero error codes of a decoded body, appended to out"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_bodies",
    .m_doc = "Walks over bodies, fast.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__bodies(void)
{
    suffix = PyUnicode_InternFromString("error_code");
    records = PyUnicode_InternFromString("records");
    if (suffix == NULL || records == NULL)
        return NULL;
    return PyModule_Create(&module_def);
}
