/* Packet fast paths, in C: the twins of two hot loops in kinspect/capture.
 *
 * pcap_records(buf, pos, end, little_endian, divisor, linktype, max_caplen, number, limit)
 *     -> (packets, pos, number, cut)
 *   The pcap record loop of PcapParser.packets: up to `limit` complete records from buf[pos:end]
 *   as (ts, linktype, data, number) tuples. It stops before a record it does not take whole
 *   (a header or data past `end`, a caplen above max_caplen): the Python loop reports those.
 *   `cut` counts records whose captured length is below their original length.
 *
 * ipv4_tcp(link, careful, data) -> segment | careful(data)
 *   The one-unpack fast path of link._fast_ipv4: a link header whose type says IPv4, an IPv4
 *   header without options, not a fragment, and TCP. Anything else goes to `careful`.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t
load32(const unsigned char *p, int little)
{
    return little ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
                  : (uint32_t)p[3] | (uint32_t)p[2] << 8 | (uint32_t)p[1] << 16 | (uint32_t)p[0] << 24;
}

static inline uint16_t
be16(const unsigned char *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static PyObject *
pcap_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "pcap_records(buf, pos, end, little_endian, divisor, "
                                         "linktype, max_caplen, number, limit)");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    int little = PyObject_IsTrue(args[3]);
    double divisor = PyFloat_AsDouble(args[4]);
    PyObject *linktype = args[5];
    Py_ssize_t max_caplen = PyLong_AsSsize_t(args[6]);
    long long number = PyLong_AsLongLong(args[7]);
    Py_ssize_t limit = PyLong_AsSsize_t(args[8]);
    PyObject *packets = NULL;
    long long cut = 0;
    if (PyErr_Occurred())
        goto done;
    if (pos < 0 || end > view.len || divisor <= 0) {
        PyErr_SetString(PyExc_ValueError, "pcap_records: window outside the buffer");
        goto done;
    }
    const unsigned char *p = view.buf;
    if ((packets = PyList_New(0)) == NULL)
        goto done;
    while (limit-- > 0 && end - pos >= 16) {
        uint32_t sec = load32(p + pos, little), frac = load32(p + pos + 4, little);
        uint32_t caplen = load32(p + pos + 8, little), origlen = load32(p + pos + 12, little);
        if ((Py_ssize_t)caplen > max_caplen || (Py_ssize_t)caplen > end - pos - 16)
            break;
        PyObject *packet = Py_BuildValue("(dOy#L)", (double)sec + (double)frac / divisor, linktype,
                                         (const char *)p + pos + 16, (Py_ssize_t)caplen, number + 1);
        if (packet == NULL || PyList_Append(packets, packet) < 0) {
            Py_XDECREF(packet);
            Py_CLEAR(packets);
            goto done;
        }
        Py_DECREF(packet);
        number++;
        cut += caplen < origlen;
        pos += 16 + (Py_ssize_t)caplen;
    }
done:
    PyBuffer_Release(&view);
    if (packets == NULL)
        return NULL;
    return Py_BuildValue("(NnLL)", packets, pos, number, cut);
}

/* Where each link type keeps its protocol tag and its IP header (link.py's DECODERS). */
enum { ETHERNET, LINUX_SLL, LINUX_SLL2, BSD_LOOPBACK, RAW_IP };

static inline int
is_ipv4(int link, const unsigned char *p)
{
    switch (link) {
    case ETHERNET: return be16(p + 12) == 0x0800;
    case LINUX_SLL: return be16(p + 14) == 0x0800;
    case LINUX_SLL2: return be16(p) == 0x0800;
    case BSD_LOOPBACK: {  /* AF_INET in either byte order */
        uint32_t family = load32(p, 0);
        return family == 2 || family == (2u << 24);
    }
    default: return 1;
    }
}

static const Py_ssize_t IP_AT[] = {14, 16, 20, 4, 0};

static PyObject *
ipv4_tcp(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyLong_Check(args[0]) || !PyBytes_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "ipv4_tcp(link: int, careful, data: bytes)");
        return NULL;
    }
    long link = PyLong_AsLong(args[0]);
    if (link < ETHERNET || link > RAW_IP) {
        PyErr_SetString(PyExc_ValueError, "ipv4_tcp: unknown link kind");
        return NULL;
    }
    PyObject *data = args[2];
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(data);
    Py_ssize_t n = PyBytes_GET_SIZE(data), at = IP_AT[link];
    if (n >= at + 40 && is_ipv4((int)link, p)) {
        const unsigned char *ip = p + at, *tcp = ip + 20;
        unsigned flags = tcp[13], doff = tcp[12];
        if (ip[0] == 0x45 && ip[9] == 6 && !(be16(ip + 6) & 0x3FFF) && doff >= 0x50) {
            Py_ssize_t total = be16(ip + 2);
            Py_ssize_t stop = total ? at + total : n;
            if (stop > n)
                stop = n;
            Py_ssize_t payload_at = at + 20 + ((doff >> 4) << 2);
            if (payload_at <= stop) {
                PyObject *ack;
                if (flags & 0x10)
                    ack = PyLong_FromUnsignedLong(load32(tcp + 8, 0));
                else
                    ack = Py_NewRef(Py_None);
                if (ack == NULL)
                    return NULL;
                return Py_BuildValue("(y#y#HHkBy#N)", (const char *)ip + 12, (Py_ssize_t)4,
                                     (const char *)ip + 16, (Py_ssize_t)4, be16(tcp), be16(tcp + 2),
                                     (unsigned long)load32(tcp + 4, 0), (unsigned char)flags,
                                     (const char *)p + payload_at, stop - payload_at, ack);
            }
        }
    }
    return PyObject_CallOneArg(args[1], data);
}

static PyMethodDef methods[] = {
    {"pcap_records", (PyCFunction)(void (*)(void))pcap_records, METH_FASTCALL,
     "pcap_records(buf, pos, end, little_endian, divisor, linktype, max_caplen, number, limit)\n"
     "-> (packets, pos, number, cut)"},
    {"ipv4_tcp", (PyCFunction)(void (*)(void))ipv4_tcp, METH_FASTCALL,
     "ipv4_tcp(link, careful, data) -> segment | careful(data)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_packets",
    .m_doc = "Fast paths for pcap records and Ethernet/IPv4/TCP headers.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__packets(void)
{
    return PyModule_Create(&module_def);
}
