/* Packet fast paths, in C: the twins of two hot loops in kinspect/capture.
 *
 * pcap_records(buf, pos, end, little_endian, divisor, linktype, max_caplen, number, limit)
 *     -> (packets, pos, number, cut)
 *   The pcap record loop of PcapParser.packets: up to `limit` complete records from buf[pos:end]
 *   as (ts, linktype, data, number) tuples. It stops before a record it does not take whole
 *   (a header or data past `end`, a caplen above max_caplen): the Python loop reports those.
 *   `cut` counts records whose captured length is below their original length.
 *
 * pcap_records_of(buf, pos, end, little_endian, divisor, linktype, max_caplen, number, limit,
 *                 kind, shard, shards) -> (packets, pos, number, cut, skipped, last_number, last_ts)
 *   The same loop for shard `shard` of `shards` of a capture's connections: a record that ipv4_tcp
 *   would take on link `kind`, of a connection whose flow_shard (capture/flows.py) is another
 *   shard's, is counted in `skipped` and not built; (last_number, last_ts) are the last of them
 *   (0, 0.0 when none). Any other record is given as pcap_records gives it.
 *
 * ipv4_tcp(link, careful, data) -> segment | careful(data)
 *   The one-unpack fast path of link._fast_ipv4: a link header whose type says IPv4, an IPv4
 *   header without options, not a fragment, and TCP. Anything else goes to `careful`.
 *
 * holds(buf, end, needle, at) -> bool
 *   Whether buf[:end] holds needle (bytearray.find's answer, its twin in schemas/stage.py):
 *   memchr for needle[at] (the caller picks a byte that is rare in the data), then a compare.
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

/* CRC-32 (zlib's, reflected 0xEDB88320), as Python's zlib.crc32 gives it. */
static uint32_t crc_table[256];

static void
crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

static uint32_t
crc32_of(const unsigned char *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    while (n--)
        c = crc_table[(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* The TCP header of a record ipv4_tcp takes on link `kind`, else NULL; *ip_out: its IP header. */
static const unsigned char *
simple_tcp(int kind, const unsigned char *p, Py_ssize_t n, const unsigned char **ip_out)
{
    Py_ssize_t at = IP_AT[kind];
    if (n < at + 40 || !is_ipv4(kind, p))
        return NULL;
    const unsigned char *ip = p + at, *tcp = ip + 20;
    unsigned doff = tcp[12];
    if (ip[0] != 0x45 || ip[9] != 6 || (be16(ip + 6) & 0x3FFF) || doff < 0x50)
        return NULL;
    Py_ssize_t total = be16(ip + 2);
    Py_ssize_t stop = total ? at + total : n;
    if (stop > n)
        stop = n;
    if (at + 20 + ((doff >> 4) << 2) > stop)
        return NULL;
    *ip_out = ip;
    return tcp;
}

/* flow_shard (capture/flows.py): CRC-32 of the two ends (address, port) in byte order. */
static long
flow_shard(const unsigned char *ip, const unsigned char *tcp, long shards)
{
    unsigned char a[6], b[6], both[12];
    memcpy(a, ip + 12, 4);
    memcpy(a + 4, tcp, 2);
    memcpy(b, ip + 16, 4);
    memcpy(b + 4, tcp + 2, 2);
    int a_first = memcmp(a, b, 6) <= 0;
    memcpy(both, a_first ? a : b, 6);
    memcpy(both + 6, a_first ? b : a, 6);
    return (long)(crc32_of(both, 12) % (uint32_t)shards);
}

static PyObject *
records(PyObject *const *args, int kind, long shard, long shards, int with_skipped)
{
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
    long long cut = 0, skipped = 0, last_number = 0;
    double last_ts = 0.0;
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
        double ts = (double)sec + (double)frac / divisor;
        const unsigned char *data = p + pos + 16, *ip, *tcp;
        number++;
        cut += caplen < origlen;
        pos += 16 + (Py_ssize_t)caplen;
        if (shards > 1 && (tcp = simple_tcp(kind, data, caplen, &ip)) != NULL
            && flow_shard(ip, tcp, shards) != shard) {
            skipped++;
            last_number = number;
            last_ts = ts;
            continue;
        }
        PyObject *packet = Py_BuildValue("(dOy#L)", ts, linktype, (const char *)data, (Py_ssize_t)caplen, number);
        if (packet == NULL || PyList_Append(packets, packet) < 0) {
            Py_XDECREF(packet);
            Py_CLEAR(packets);
            goto done;
        }
        Py_DECREF(packet);
    }
done:
    PyBuffer_Release(&view);
    if (packets == NULL)
        return NULL;
    if (with_skipped)
        return Py_BuildValue("(NnLLLLd)", packets, pos, number, cut, skipped, last_number, last_ts);
    return Py_BuildValue("(NnLL)", packets, pos, number, cut);
}

static PyObject *
pcap_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "pcap_records(buf, pos, end, little_endian, divisor, "
                                         "linktype, max_caplen, number, limit)");
        return NULL;
    }
    return records(args, 0, 0, 1, 0);
}

static PyObject *
pcap_records_of(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "pcap_records_of(buf, pos, end, little_endian, divisor, "
                                         "linktype, max_caplen, number, limit, kind, shard, shards)");
        return NULL;
    }
    long kind = PyLong_AsLong(args[9]), shard = PyLong_AsLong(args[10]), shards = PyLong_AsLong(args[11]);
    if (PyErr_Occurred())
        return NULL;
    if (kind < ETHERNET || kind > RAW_IP || shards < 1 || shard < 0 || shard >= shards) {
        PyErr_SetString(PyExc_ValueError, "pcap_records_of: unknown link kind, or shard outside 0..shards-1");
        return NULL;
    }
    return records(args, (int)kind, shard, shards, 1);
}

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

static PyObject *
holds(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyBytes_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "holds(buf, end: int, needle: bytes, at: int)");
        return NULL;
    }
    Py_ssize_t end = PyLong_AsSsize_t(args[1]), at = PyLong_AsSsize_t(args[3]);
    if (PyErr_Occurred())
        return NULL;
    const unsigned char *needle = (const unsigned char *)PyBytes_AS_STRING(args[2]);
    Py_ssize_t m = PyBytes_GET_SIZE(args[2]);
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    int found = 0;
    if (end < 0 || end > view.len || (m > 0 && (at < 0 || at >= m))) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "holds: end outside the buffer, or at outside the needle");
        return NULL;
    }
    if (m == 0)
        found = 1;
    else if (end >= m) {
        const unsigned char *hay = view.buf, *p = hay + at, *last = hay + (end - m) + at;
        while (p <= last) {
            const unsigned char *q = memchr(p, needle[at], (size_t)(last - p) + 1);
            if (q == NULL)
                break;
            if (memcmp(q - at, needle, (size_t)m) == 0) {
                found = 1;
                break;
            }
            p = q + 1;
        }
    }
    PyBuffer_Release(&view);
    return PyBool_FromLong(found);
}

static PyMethodDef methods[] = {
    {"pcap_records", (PyCFunction)(void (*)(void))pcap_records, METH_FASTCALL,
     "pcap_records(buf, pos, end, little_endian, divisor, linktype, max_caplen, number, limit)\n"
     "-> (packets, pos, number, cut)"},
    {"pcap_records_of", (PyCFunction)(void (*)(void))pcap_records_of, METH_FASTCALL,
     "pcap_records_of(buf, pos, end, little_endian, divisor, linktype, max_caplen, number, limit, "
     "kind, shard, shards)\n-> (packets, pos, number, cut, skipped, last_number, last_ts)"},
    {"ipv4_tcp", (PyCFunction)(void (*)(void))ipv4_tcp, METH_FASTCALL,
     "ipv4_tcp(link, careful, data) -> segment | careful(data)"},
    {"holds", (PyCFunction)(void (*)(void))holds, METH_FASTCALL,
     "holds(buf, end, needle, at) -> whether buf[:end] holds needle (memchr for needle[at])"},
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
    crc_init();
    return PyModule_Create(&module_def);
}
