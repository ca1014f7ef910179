/* JSON text written straight into a bytes object, byte for byte as orjson writes it (what
 * render/jsonl.py gives): strings escaped as orjson escapes them, bytes as text when UTF-8
 * (Python's strict decoder), else {"b64": ...}. Shared by the accelerators that write JSON
 * (_v2records.c's to_json, _avro.c's reader); each calls json_out_init() once.
 */
#ifndef KINSPECT_JSON_OUT_H
#define KINSPECT_JSON_OUT_H
#include <Python.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

static inline int
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

static void
json_out_init(void)
{
    for (int c = 0; c < 0x20; c++)
        escapes[c] = 'u';
    escapes['\b'] = 'b';
    escapes['\t'] = 't';
    escapes['\n'] = 'n';
    escapes['\f'] = 'f';
    escapes['\r'] = 'r';
    escapes['"'] = '"';
    escapes['\\'] = '\\';
}

/* A compiled schema reader's C side, in a capsule of this name (records/packed.py's seam):
 * write(program, data, size, out) writes the JSON text of the value in data[0..size) and gives
 * 1; 0 when the value can't go this way (out may hold part of it: the caller rewinds), -1 with
 * an exception set (out of memory). */
#define JSON_READER_CAPSULE "kinspect.json_reader"
typedef struct {
    int (*write)(const void *program, const unsigned char *data, Py_ssize_t size, Out *out);
    const void *program;
} JsonReader;

#endif
