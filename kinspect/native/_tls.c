/* A TLS direction's steady state, in C: the twin of kinspect/tls/keys.py's RecordKeys._open_run.
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
    PyObject *whole = PyMemoryView_FromObject(args[4]);
    if (whole == NULL)
        return NULL;
    Py_buffer *view = PyMemoryView_GET_BUFFER(whole);
    if (view->ndim > 1 || view->itemsize != 1) {
        Py_DECREF(whole);
        PyErr_SetString(PyExc_ValueError, "open_run: data must be bytes-like");
        return NULL;
    }
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

static PyMethodDef methods[] = {
    {"open_run", (PyCFunction)(void (*)(void))open_run, METH_FASTCALL,
     "open_run(decrypt, mode, iv, seq, data, plain) -> (used, seq, other)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_tls",
    .m_doc = "A TLS direction's steady state: whole application_data records opened in one loop.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__tls(void)
{
    return PyModule_Create(&module);
}
