/* TLS in C: a direction's steady state (the twin of kinspect/tls/keys.py's RecordKeys._open_run),
 * record framing (frame), a hello's extensions (hello_extensions) and the key log's index
 * (keylog_scan, keylog_merge), below.
 *
 * open_run(decrypt, mode, iv, seq, data, plain) -> (used, seq, other)
 *   decrypt: the AEAD's decrypt(nonce, ciphertext, additional data) (cryptography's AESGCM or
 *   ChaCha20Poly1305); mode: 0 TLS 1.3, 1 TLS 1.2 AES-GCM (iv: the 4-byte implicit part, an
 *   8-byte explicit nonce heads each fragment), 2 TLS 1.2 ChaCha20-Poly1305 (iv: 12 bytes, xored
 *   with the sequence number, as in 1.3); seq: the next record's sequence number (< 2^63).
 *   Opens the whole application_data records at the head of data, appending their content to
 *   plain (TLS 1.3: the inner content type and zero padding taken off, ChangeCipherSpec records
 *   of one byte passed over), and stops before: an unfinished record, another header or version,
 *   a length out of bounds, a record that does not open (any Exception from decrypt: the sequence
 *   number stays on it), or, in TLS 1.3, after a record whose inner type is not application
 *   data, which comes back as other = (inner type, content bytes, record position, length);
 *   else other is None. used: the bytes of data consumed; seq: the sequence number after them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define TAG 16
#define MAX_FRAGMENT13 ((1 << 14) + 256)
#define MAX_FRAGMENT12 ((1 << 14) + 2048)

static void
put_be64(unsigned char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (unsigned char)(v & 0xff);
        v >>= 8;
    }
}

/* decrypt(nonce, data[start:stop], aad): a new reference, or NULL with no error set when it
 * raised an Exception (the record does not open), or NULL with the error set (anything else) */
static PyObject *
try_open(PyObject *decrypt, const unsigned char *nonce, PyObject *whole, Py_ssize_t start, Py_ssize_t stop,
         const unsigned char *aad, Py_ssize_t aad_len)
{
    PyObject *args[3] = {NULL, NULL, NULL};
    PyObject *opened = NULL;
    args[0] = PyBytes_FromStringAndSize((const char *)nonce, 12);
    args[1] = PySequence_GetSlice(whole, start, stop);
    args[2] = PyBytes_FromStringAndSize((const char *)aad, aad_len);
    if (args[0] != NULL && args[1] != NULL && args[2] != NULL) {
        opened = PyObject_Vectorcall(decrypt, args, 3, NULL);
        if (opened == NULL && PyErr_ExceptionMatches(PyExc_Exception))
            PyErr_Clear();
        else if (opened != NULL && !PyBytes_Check(opened)) {
            Py_CLEAR(opened);
            PyErr_SetString(PyExc_TypeError, "open_run: decrypt gave something else than bytes");
        }
    }
    Py_XDECREF(args[0]);
    Py_XDECREF(args[1]);
    Py_XDECREF(args[2]);
    return opened;
}

/* a memoryview of a bytes-like object (a new reference), or NULL with the error set */
static PyObject *
byte_view(PyObject *data, const char *who)
{
    PyObject *whole = PyMemoryView_FromObject(data);
    if (whole == NULL)
        return NULL;
    Py_buffer *view = PyMemoryView_GET_BUFFER(whole);
    if (view->ndim > 1 || view->itemsize != 1) {
        Py_DECREF(whole);
        PyErr_Format(PyExc_ValueError, "%s: data must be bytes-like", who);
        return NULL;
    }
    return whole;
}

static PyObject *
open_run(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "open_run(decrypt, mode, iv, seq, data, plain)");
        return NULL;
    }
    PyObject *decrypt = args[0], *plain = args[5];
    long mode = PyLong_AsLong(args[1]);
    unsigned long long seq = PyLong_AsUnsignedLongLong(args[3]);
    if (PyErr_Occurred())
        return NULL;
    if (mode < 0 || mode > 2 || !PyBytes_Check(args[2]) || !PyList_Check(plain) || seq >= (1ULL << 63)) {
        PyErr_SetString(PyExc_ValueError, "open_run: mode 0-2, iv bytes, seq below 2^63, plain a list");
        return NULL;
    }
    Py_ssize_t iv_len = PyBytes_GET_SIZE(args[2]);
    if (iv_len != (mode == 1 ? 4 : 12)) {
        PyErr_SetString(PyExc_ValueError, "open_run: the IV is 4 bytes for TLS 1.2 AES-GCM, else 12");
        return NULL;
    }
    unsigned char iv[12];
    memcpy(iv, PyBytes_AS_STRING(args[2]), iv_len);
    PyObject *whole = byte_view(args[4], "open_run");
    if (whole == NULL)
        return NULL;
    Py_buffer *view = PyMemoryView_GET_BUFFER(whole);
    const unsigned char *buf = view->buf;
    Py_ssize_t end = view->len, pos = 0;
    PyObject *other = NULL, *result = NULL;
    while (end - pos >= 5) {
        int ctype = buf[pos];
        int version = (buf[pos + 1] << 8) | buf[pos + 2];
        Py_ssize_t length = (buf[pos + 3] << 8) | buf[pos + 4];
        Py_ssize_t stop = pos + 5 + length;
        if (stop > end || version != 0x0303)
            break;
        if (ctype != 23) {
            if (ctype == 20 && mode == 0 && length == 1) {
                pos = stop;
                continue;
            }
            break;
        }
        unsigned char nonce[12], aad[13];
        PyObject *opened;
        if (mode == 1) {
            if (length < 8 + TAG || length > MAX_FRAGMENT12)
                break;
            memcpy(nonce, iv, 4);
            memcpy(nonce + 4, buf + pos + 5, 8);
        } else {
            if (mode == 0 ? length > MAX_FRAGMENT13 : (length < TAG || length > MAX_FRAGMENT12))
                break;
            unsigned char be[8];
            put_be64(be, seq);
            memcpy(nonce, iv, 12);
            for (int i = 0; i < 8; i++)
                nonce[4 + i] ^= be[i];
        }
        if (mode == 0) {
            opened = try_open(decrypt, nonce, whole, pos + 5, stop, buf + pos, 5);
        } else {
            Py_ssize_t size = length - TAG - (mode == 1 ? 8 : 0);
            put_be64(aad, seq);
            aad[8] = 23;
            aad[9] = (unsigned char)(version >> 8);
            aad[10] = (unsigned char)version;
            aad[11] = (unsigned char)(size >> 8);
            aad[12] = (unsigned char)size;
            opened = try_open(decrypt, nonce, whole, pos + 5 + (mode == 1 ? 8 : 0), stop, aad, 13);
        }
        if (opened == NULL) {
            if (PyErr_Occurred())
                goto done;
            break;
        }
        seq++;
        pos = stop;
        Py_ssize_t n = PyBytes_GET_SIZE(opened);
        const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(opened);
        if (mode != 0) {
            int failed = n ? PyList_Append(plain, opened) : 0;
            Py_DECREF(opened);
            if (failed)
                goto done;
            continue;
        }
        Py_ssize_t type_at = n - 1;
        while (type_at >= 0 && p[type_at] == 0)
            type_at--;
        int inner = type_at >= 0 ? p[type_at] : 0;
        if (type_at < 0)
            type_at = 0;
        if (inner == 23) {
            int failed = 0;
            if (type_at > 0) {
                PyObject *content = PyBytes_FromStringAndSize((const char *)p, type_at);
                failed = content == NULL || PyList_Append(plain, content);
                Py_XDECREF(content);
            }
            Py_DECREF(opened);
            if (failed)
                goto done;
            continue;
        }
        PyObject *content = PyBytes_FromStringAndSize((const char *)p, type_at);
        Py_DECREF(opened);
        if (content == NULL)
            goto done;
        other = Py_BuildValue("(iNnn)", inner, content, pos - 5 - length, length);
        if (other == NULL)
            goto done;
        break;
    }
    result = Py_BuildValue("(nKO)", pos, seq, other != NULL ? other : Py_None);
done:
    Py_XDECREF(other);
    Py_DECREF(whole);
    return result;
}

/* hello_extensions(body, pos, end) -> {type: (start, stop)} | None: the twin of
 * kinspect/tls/handshake.py's _extensions_py. The extensions vector of a hello at body[pos:end]
 * (a 2-byte length, then type(2) size(2) data each): where the data of server_name (0),
 * session_ticket (35), pre_shared_key (41) and supported_versions (43) lie, the first of each
 * type; None when the vector or an extension does not fit. */
static PyObject *
hello_extensions(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "hello_extensions(body, pos, end)");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]), end = PyLong_AsSsize_t(args[2]);
    PyObject *out = NULL;
    if (PyErr_Occurred())
        goto done;
    if (pos < 0 || end > view.len) {
        PyErr_SetString(PyExc_ValueError, "hello_extensions: pos and end must lie within body");
        goto done;
    }
    const unsigned char *b = view.buf;
    if (pos + 2 > end) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    Py_ssize_t stop = pos + 2 + ((b[pos] << 8) | b[pos + 1]);
    if (stop > end) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    Py_ssize_t found[4] = {-1, -1, -1, -1};
    Py_ssize_t sizes[4] = {0, 0, 0, 0};
    static const int wanted[4] = {0, 35, 41, 43};
    pos += 2;
    while (pos < stop) {
        if (stop - pos < 4) {
            out = Py_NewRef(Py_None);
            goto done;
        }
        int type = (b[pos] << 8) | b[pos + 1];
        Py_ssize_t size = (b[pos + 2] << 8) | b[pos + 3];
        pos += 4 + size;
        if (pos > stop) {
            out = Py_NewRef(Py_None);
            goto done;
        }
        for (int i = 0; i < 4; i++)
            if (type == wanted[i] && found[i] < 0) {
                found[i] = pos - size;
                sizes[i] = size;
            }
    }
    if ((out = PyDict_New()) == NULL)
        goto done;
    for (int i = 0; i < 4; i++) {
        if (found[i] < 0)
            continue;
        PyObject *key = PyLong_FromLong(wanted[i]);
        PyObject *where = Py_BuildValue("(nn)", found[i], found[i] + sizes[i]);
        int failed = key == NULL || where == NULL || PyDict_SetItem(out, key, where) < 0;
        Py_XDECREF(key);
        Py_XDECREF(where);
        if (failed) {
            Py_CLEAR(out);
            goto done;
        }
    }
done:
    PyBuffer_Release(&view);
    return out;
}

/* frame(data, base, max_fragment) -> (records, pos, bad): the twin of kinspect/tls/records.py's
 * _frame_py.
 * The whole TLS records at the head of data: (type, version, fragment memoryview, stream offset)
 * each, offsets counted from base; pos: where the first unfinished record starts (or the end);
 * bad: where a header that cannot be a record starts (unknown type, major version not 3, length
 * past max_fragment), -1 if none (the records before it are still given). */
static PyObject *
frame(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "frame(data, base, max_fragment)");
        return NULL;
    }
    long long base = PyLong_AsLongLong(args[1]);
    Py_ssize_t max_fragment = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred())
        return NULL;
    PyObject *whole = byte_view(args[0], "frame");
    if (whole == NULL)
        return NULL;
    Py_buffer *view = PyMemoryView_GET_BUFFER(whole);
    PyObject *records = NULL, *result = NULL;
    if ((records = PyList_New(0)) == NULL)
        goto done;
    const unsigned char *buf = view->buf;
    Py_ssize_t end = view->len, pos = 0, bad = -1;
    while (end - pos >= 5) {
        int ctype = buf[pos];
        Py_ssize_t length = (buf[pos + 3] << 8) | buf[pos + 4];
        if (ctype < 20 || ctype > 24 || buf[pos + 1] != 3 || length > max_fragment) {
            bad = pos;
            break;
        }
        Py_ssize_t stop = pos + 5 + length;
        if (stop > end)
            break;
        PyObject *fragment = PySequence_GetSlice(whole, pos + 5, stop);
        if (fragment == NULL)
            goto done;
        PyObject *record = Py_BuildValue("(iiNL)", ctype, (buf[pos + 1] << 8) | buf[pos + 2], fragment,
                                         base + (long long)pos);
        if (record == NULL || PyList_Append(records, record) < 0) {
            Py_XDECREF(record);
            goto done;
        }
        Py_DECREF(record);
        pos = stop;
    }
    result = Py_BuildValue("(Onn)", records, pos, bad);
done:
    Py_XDECREF(records);
    Py_DECREF(whole);
    return result;
}

/* byte -> its hex digit's value, or 16 when it is none; whether a byte is ASCII whitespace
 * (bytes.split()'s: space, \t \n \v \f \r) */
static unsigned char hex_of[256], space_of[256];

static void
init_tables(void)
{
    memset(hex_of, 16, sizeof hex_of);
    for (int c = 0; c < 10; c++)
        hex_of['0' + c] = (unsigned char)c;
    for (int c = 0; c < 6; c++)
        hex_of['a' + c] = hex_of['A' + c] = (unsigned char)(10 + c);
    const char *spaces = " \t\n\x0b\x0c\r";
    for (const char *c = spaces; *c; c++)
        space_of[(unsigned char)*c] = 1;
}

/* whether p[0:n] is hex digits, an even number of them */
static int
is_hex(const unsigned char *p, Py_ssize_t n)
{
    unsigned char bad = (unsigned char)(n % 2 ? 16 : 0);
    for (Py_ssize_t i = 0; i < n; i++)
        bad |= hex_of[p[i]];
    return !(bad & 16);
}

/* a client random's key (the twin of kinspect/tls/keylines.py's random_key): its four 8-byte
 * words (big-endian) mixed in turn, from its 64 hex digits at p (is_hex said they are) */
static uint64_t
random_key(const unsigned char *p)
{
    uint64_t key = 0;
    for (int word = 0; word < 4; word++) {
        uint64_t v = 0;
        for (int i = 0; i < 16; i++)
            v = v << 4 | hex_of[p[16 * word + i]];
        key = (key ^ v) * 0x9E3779B97F4A7C15ULL;
    }
    return key;
}

/* the labels given as a tuple of bytes, for comparing without a Python object per line */
#define MAX_LABELS 16
typedef struct {
    int count;
    const char *text[MAX_LABELS];
    Py_ssize_t size[MAX_LABELS];
} labels_t;

static int
read_labels(PyObject *tuple, labels_t *out, const char *who)
{
    if (!PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) > MAX_LABELS) {
        PyErr_Format(PyExc_TypeError, "%s: labels must be a tuple of at most %d bytes", who, MAX_LABELS);
        return -1;
    }
    out->count = (int)PyTuple_GET_SIZE(tuple);
    for (int i = 0; i < out->count; i++) {
        PyObject *item = PyTuple_GET_ITEM(tuple, i);
        if (!PyBytes_Check(item)) {
            PyErr_Format(PyExc_TypeError, "%s: labels must be bytes", who);
            return -1;
        }
        out->text[i] = PyBytes_AS_STRING(item);
        out->size[i] = PyBytes_GET_SIZE(item);
    }
    return 0;
}

static int
has_label(const labels_t *labels, const unsigned char *p, Py_ssize_t n)
{
    for (int i = 0; i < labels->count; i++)
        if (labels->size[i] == n && memcmp(labels->text[i], p, n) == 0)
            return 1;
    return 0;
}

/* an index entry: the client random's key (random_key), where its line starts */
typedef struct {
    uint64_t key, at;
} entry_t;

static int
entry_order(const void *a, const void *b)
{
    const entry_t *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

#define AT_BITS 40

/* keylog_scan(text, base, first_line, source, max_line, used, unused, room)
 *   -> (entries, lines, added, unused, bad, dropped, first_bad): the twin of
 * kinspect/tls/keylines.py's scan_py.
 * The lines of text (bytes.splitlines' line breaks: \n, \r, \r\n), each one of:
 * - blank, or a comment (its first field starts with #): passed over;
 * - a secret: at most max_line bytes, three whitespace-separated fields, the label one of
 *   used (a tuple of bytes), the client random 64 hex digits, the secret 64 to 128 (even):
 *   an entry (key, at) in entries (bytes of native uint64 pairs, sorted), key the random's
 *   four words mixed (random_key), at = source << 40 | (base + the line's offset in text); past
 *   room entries (or an offset of 2^40) it is counted in dropped instead;
 * - unused: the same form with a label of unused, both fields hex of any even length;
 * - bad: anything else; first_bad is (line number, start, stop) of the first, or None.
 * lines: how many lines text held (the first is number first_line). */
static PyObject *
keylog_scan(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError,
                        "keylog_scan(text, base, first_line, source, max_line, used, unused, room)");
        return NULL;
    }
    long long base = PyLong_AsLongLong(args[1]), first_line = PyLong_AsLongLong(args[2]);
    long long source = PyLong_AsLongLong(args[3]);
    Py_ssize_t max_line = PyLong_AsSsize_t(args[4]), room = PyLong_AsSsize_t(args[7]);
    if (PyErr_Occurred())
        return NULL;
    if (base < 0 || source < 0 || source >= (1LL << (64 - AT_BITS)) || room < 0) {
        PyErr_SetString(PyExc_ValueError, "keylog_scan: base, source and room out of range");
        return NULL;
    }
    labels_t used, unused_labels;
    if (read_labels(args[5], &used, "keylog_scan") < 0 || read_labels(args[6], &unused_labels, "keylog_scan") < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *t = view.buf;
    Py_ssize_t n = view.len, at = 0, lines = 0, added = 0, unused = 0, bad = 0, dropped = 0;
    Py_ssize_t bad_line = -1, bad_start = 0, bad_stop = 0, capacity = 0;
    entry_t *entries = NULL;
    PyObject *result = NULL;
    while (at < n) {
        Py_ssize_t start = at;
        const unsigned char *nl = memchr(t + at, '\n', n - at);
        Py_ssize_t limit = nl != NULL ? nl - t : n;
        const unsigned char *cr = memchr(t + at, '\r', limit - at);
        Py_ssize_t stop = cr != NULL ? cr - t : limit;
        at = stop;
        if (at < n)
            at += (t[at] == '\r' && at + 1 < n && t[at + 1] == '\n') ? 2 : 1;
        lines++;
        Py_ssize_t field[3][2];
        int fields = 0;
        for (Py_ssize_t i = start; i < stop && fields < 4;) {
            while (i < stop && space_of[t[i]])
                i++;
            if (i == stop)
                break;
            Py_ssize_t j = i;
            while (j < stop && !space_of[t[j]])
                j++;
            if (fields < 3) {
                field[fields][0] = i;
                field[fields][1] = j - i;
            }
            fields++;
            i = j;
        }
        if (fields == 0 || t[field[0][0]] == '#')
            continue;
        if (fields == 3 && stop - start <= max_line) {
            const unsigned char *label = t + field[0][0], *random = t + field[1][0], *secret = t + field[2][0];
            Py_ssize_t rlen = field[1][1], slen = field[2][1];
            if (has_label(&used, label, field[0][1])) {
                if (rlen == 64 && slen >= 64 && slen <= 128 && is_hex(random, rlen) && is_hex(secret, slen)) {
                    uint64_t offset = (uint64_t)base + (uint64_t)start;
                    if (added >= room || offset >= (1ULL << AT_BITS)) {
                        dropped++;
                        continue;
                    }
                    if (added == capacity) {
                        Py_ssize_t more = capacity ? capacity * 2 : 1024;
                        entry_t *grown = PyMem_Realloc(entries, (size_t)more * sizeof(entry_t));
                        if (grown == NULL) {
                            PyErr_NoMemory();
                            goto done;
                        }
                        entries = grown;
                        capacity = more;
                    }
                    entries[added].key = random_key(random);
                    entries[added].at = (uint64_t)source << AT_BITS | offset;
                    added++;
                    continue;
                }
            } else if (has_label(&unused_labels, label, field[0][1]) && is_hex(random, rlen) && is_hex(secret, slen)) {
                unused++;
                continue;
            }
        }
        if (bad++ == 0) {
            bad_line = lines;
            bad_start = start;
            bad_stop = stop;
        }
    }
    if (added > 1)
        qsort(entries, (size_t)added, sizeof(entry_t), entry_order);
    PyObject *packed = PyBytes_FromStringAndSize((const char *)entries, added * (Py_ssize_t)sizeof(entry_t));
    if (packed == NULL)
        goto done;
    PyObject *first_bad = bad_line < 0 ? Py_NewRef(Py_None)
                                       : Py_BuildValue("(Lnn)", first_line + bad_line - 1, bad_start, bad_stop);
    if (first_bad == NULL) {
        Py_DECREF(packed);
        goto done;
    }
    result = Py_BuildValue("(NnnnnnN)", packed, lines, added, unused, bad, dropped, first_bad);
done:
    PyMem_Free(entries);
    PyBuffer_Release(&view);
    return result;
}

/* keylog_merge(a, b) -> bytes: the twin of kinspect/tls/keylines.py's merge_py. Two runs of
 * entries (native uint64 pairs, each run sorted, no entry in both) as one sorted run. */
static PyObject *
keylog_merge(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyBytes_Check(args[0]) || !PyBytes_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "keylog_merge(a, b): two bytes objects");
        return NULL;
    }
    Py_ssize_t na = PyBytes_GET_SIZE(args[0]), nb = PyBytes_GET_SIZE(args[1]);
    if (na % sizeof(entry_t) || nb % sizeof(entry_t)) {
        PyErr_SetString(PyExc_ValueError, "keylog_merge: runs are whole 16-byte entries");
        return NULL;
    }
    na /= sizeof(entry_t);
    nb /= sizeof(entry_t);
    PyObject *out = PyBytes_FromStringAndSize(NULL, (na + nb) * (Py_ssize_t)sizeof(entry_t));
    if (out == NULL)
        return NULL;
    entry_t a, b, *o = (entry_t *)PyBytes_AS_STRING(out);
    const char *pa = PyBytes_AS_STRING(args[0]), *pb = PyBytes_AS_STRING(args[1]);
    Py_ssize_t i = 0, j = 0;
    while (i < na && j < nb) {
        memcpy(&a, pa + i * sizeof(entry_t), sizeof a);
        memcpy(&b, pb + j * sizeof(entry_t), sizeof b);
        if (entry_order(&a, &b) <= 0) {
            *o++ = a;
            i++;
        } else {
            *o++ = b;
            j++;
        }
    }
    memcpy(o, pa + i * sizeof(entry_t), (na - i) * sizeof(entry_t));
    o += na - i;
    memcpy(o, pb + j * sizeof(entry_t), (nb - j) * sizeof(entry_t));
    return out;
}

static PyMethodDef methods[] = {
    {"keylog_scan", (PyCFunction)(void (*)(void))keylog_scan, METH_FASTCALL,
     "keylog_scan(text, base, first_line, source, max_line, used, unused, room) -> "
     "(entries, lines, added, unused, bad, dropped, first_bad)"},
    {"keylog_merge", (PyCFunction)(void (*)(void))keylog_merge, METH_FASTCALL,
     "keylog_merge(a, b) -> the two sorted runs of entries as one"},
    {"frame", (PyCFunction)(void (*)(void))frame, METH_FASTCALL,
     "frame(data, base, max_fragment) -> (records, pos, bad)"},
    {"hello_extensions", (PyCFunction)(void (*)(void))hello_extensions, METH_FASTCALL,
     "hello_extensions(body, pos, end) -> {type: (start, stop)} or None"},
    {"open_run", (PyCFunction)(void (*)(void))open_run, METH_FASTCALL,
     "open_run(decrypt, mode, iv, seq, data, plain) -> (used, seq, other)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_tls",
    .m_doc = "TLS: a direction's application_data records opened in one loop; record framing; a hello's "
              "extensions; the key log's index.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__tls(void)
{
    init_tables();
    return PyModule_Create(&module);
}
