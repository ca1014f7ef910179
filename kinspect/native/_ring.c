/* The TPACKET_V3 ring's block walk, in C: the twin of kinspect/capture/ring.py's read_block.
 *
 * read_block(ring, offset, linktype, number) -> (packets, number, truncated) | None
 *   ring: the mmap'ed AF_PACKET RX ring (writable); offset: where one block starts. None when
 *   the kernel has not handed the block to user space yet (TP_STATUS_USER clear). Otherwise every
 *   packet of the block as a (ts, linktype, data, number) tuple, data a bytes copy, numbers
 *   counting on from `number`; then the block goes back to the kernel (status TP_STATUS_KERNEL,
 *   after a full barrier, so the kernel never sees it free before the copies are made).
 *   `truncated` counts packets the kernel cut (snaplen below length). Every offset read from
 *   the block is checked against the block's own length before use.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define TP_STATUS_USER 1u
/* struct tpacket_block_desc: version, offset_to_priv, then tpacket_hdr_v1 */
#define BD_STATUS 8
#define BD_NUM_PKTS 12
#define BD_FIRST 16
#define BD_LEN 20
#define BD_SIZE 48
/* struct tpacket3_hdr */
#define H_NEXT 0
#define H_SEC 4
#define H_NSEC 8
#define H_SNAPLEN 12
#define H_LEN 16
#define H_MAC 24
#define H_SIZE 48

static inline uint32_t
u32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint16_t
u16(const unsigned char *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

static PyObject *
read_block(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "read_block(ring, offset, linktype, number)");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0)
        return NULL;
    Py_ssize_t offset = PyLong_AsSsize_t(args[1]);
    PyObject *linktype = args[2];
    long long number = PyLong_AsLongLong(args[3]);
    PyObject *result = NULL, *packets = NULL;
    long long truncated = 0;
    if (PyErr_Occurred())
        goto done;
    if (offset < 0 || offset + BD_SIZE > view.len) {
        PyErr_SetString(PyExc_ValueError, "read_block: offset outside the ring");
        goto done;
    }
    unsigned char *block = (unsigned char *)view.buf + offset;
    volatile uint32_t *status = (volatile uint32_t *)(block + BD_STATUS);
    if (!(*status & TP_STATUS_USER)) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    __sync_synchronize(); /* read the block only after seeing it is ours */
    uint32_t count = u32(block + BD_NUM_PKTS);
    Py_ssize_t blk_len = u32(block + BD_LEN);
    Py_ssize_t room = view.len - offset;
    if (blk_len > room)
        blk_len = room;
    if ((packets = PyList_New(0)) == NULL)
        goto done;
    Py_ssize_t pos = u32(block + BD_FIRST);
    for (uint32_t i = 0; i < count; i++) {
        if (pos < BD_SIZE || pos + H_SIZE > blk_len)
            break;
        const unsigned char *h = block + pos;
        Py_ssize_t snaplen = u32(h + H_SNAPLEN);
        Py_ssize_t start = pos + u16(h + H_MAC);
        if (start + snaplen > blk_len)
            break;
        if (snaplen < (Py_ssize_t)u32(h + H_LEN))
            truncated++;
        /* microseconds, as pcap and pcapng files give them: --write keeps them exactly */
        double ts = (double)((long long)u32(h + H_SEC) * 1000000LL + u32(h + H_NSEC) / 1000) / 1e6;
        PyObject *tuple = PyTuple_New(4);
        if (tuple == NULL)
            goto fail;
        PyObject *t = PyFloat_FromDouble(ts);
        PyObject *data = PyBytes_FromStringAndSize((const char *)block + start, snaplen);
        PyObject *n = PyLong_FromLongLong(++number);
        if (t == NULL || data == NULL || n == NULL) {
            Py_XDECREF(t);
            Py_XDECREF(data);
            Py_XDECREF(n);
            Py_DECREF(tuple);
            goto fail;
        }
        PyTuple_SET_ITEM(tuple, 0, t);
        PyTuple_SET_ITEM(tuple, 1, Py_NewRef(linktype));
        PyTuple_SET_ITEM(tuple, 2, data);
        PyTuple_SET_ITEM(tuple, 3, n);
        int failed = PyList_Append(packets, tuple);
        Py_DECREF(tuple);
        if (failed)
            goto fail;
        uint32_t next = u32(h + H_NEXT);
        if (next == 0)
            break;
        pos += next;
    }
    __sync_synchronize(); /* the copies are made before the kernel may write the block again */
    *status = 0;           /* TP_STATUS_KERNEL */
    result = Py_BuildValue("(OLL)", packets, number, truncated);
    goto done;
fail:
    /* the block still goes back, or the ring would stall on it forever */
    __sync_synchronize();
    *status = 0;
done:
    Py_XDECREF(packets);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"read_block", (PyCFunction)(void (*)(void))read_block, METH_FASTCALL,
     "read_block(ring, offset, linktype, number) -> (packets, number, truncated) or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_ring",
    .m_doc = "The TPACKET_V3 ring's block walk.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__ring(void)
{
    return PyModule_Create(&module);
}
