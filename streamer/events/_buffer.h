/* A growable byte buffer shared by the compiled codecs (_bpfast.c, _jsonfast.c).
 *
 * It starts in its own 1 KiB (an event's text fits: no allocation) and moves
 * to the heap when it outgrows that. The put functions return 1 when they
 * wrote, -1 on an error (exception set).
 */
#ifndef STREAMER_BUFFER_H
#define STREAMER_BUFFER_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

typedef struct {
    char *data;
    Py_ssize_t size, capacity;
    char local[1024];
} Buffer;

static void buffer_init(Buffer *b) {
    b->data = b->local;
    b->size = 0;
    b->capacity = sizeof(b->local);
}

static int buffer_reserve(Buffer *b, Py_ssize_t more) {
    if (b->size + more <= b->capacity) return 0;
    Py_ssize_t capacity = (b->size + more) * 2 + 256;
    char *data = b->data == b->local ? PyMem_Malloc(capacity) : PyMem_Realloc(b->data, capacity);
    if (data == NULL) { PyErr_NoMemory(); return -1; }
    if (b->data == b->local) memcpy(data, b->local, b->size);
    b->data = data;
    b->capacity = capacity;
    return 0;
}

static int buffer_put(Buffer *b, const char *text, Py_ssize_t size) {
    if (buffer_reserve(b, size) < 0) return -1;
    memcpy(b->data + b->size, text, size);
    b->size += size;
    return 1;
}

/* the decimal digits of `number` end at `end`; returns where they start */
static char *digits_before(char *end, unsigned long long number) {
    do { *--end = (char)('0' + number % 10); number /= 10; } while (number);
    return end;
}

static int buffer_put_integer(Buffer *b, long long number) {
    char text[24], *end = text + sizeof(text);
    unsigned long long size = number < 0 ? -(unsigned long long)number : (unsigned long long)number;
    char *start = digits_before(end, size);
    if (number < 0) *--start = '-';
    return buffer_put(b, start, end - start);
}

/* micro = round(x * 1e6) when x is the double nearest a decimal with at most
 * six fractional digits and 1 <= |x| < 2**31 (timestamps, durations): there,
 * six-digit decimals lie more than an ulp apart, so that decimal is x's
 * shortest round-trip text and round(x, 6) == x. 0 when x is not such a number. */
static int micro_decimal(double x, long long *micro) {
    double size = fabs(x);
    if (!(size >= 1.0 && size < 2147483648.0)) return 0;
    double scaled = nearbyint(x * 1e6);
    if (scaled / 1e6 != x) return 0;
    *micro = (long long)scaled;
    return 1;
}

/* repr() of the float micro / 1e6 found by micro_decimal, without dtoa: the
 * integer part, then the fraction up to its last non-zero digit */
static int buffer_put_micro(Buffer *b, long long micro) {
    char text[32], *end = text + sizeof(text);
    unsigned long long size = micro < 0 ? -(unsigned long long)micro : (unsigned long long)micro;
    unsigned long long fraction = size % 1000000;
    int places = 6;
    while (places > 1 && fraction % 10 == 0) { fraction /= 10; places--; }
    char *start = end;
    for (int i = 0; i < places; i++) { *--start = (char)('0' + fraction % 10); fraction /= 10; }
    *--start = '.';
    start = digits_before(start, size / 1000000);
    if (micro < 0) *--start = '-';
    return buffer_put(b, start, end - start);
}

/* repr() of a float: the shortest text that reads back as the same number */
static int buffer_put_float(Buffer *b, double number) {
    long long micro;
    if (micro_decimal(number, &micro)) return buffer_put_micro(b, micro);
    char *text = PyOS_double_to_string(number, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (text == NULL) return -1;
    int done = buffer_put(b, text, (Py_ssize_t)strlen(text));
    PyMem_Free(text);
    return done;
}

static void buffer_free(Buffer *b) {
    if (b->data != b->local) PyMem_Free(b->data);
    buffer_init(b);
}

/* How a compiled codec ends: frees the buffer and returns its text as bytes
 * (or, with `ascii`, as a str: the caller wrote ASCII only, so it is copied, not decoded)
 * when `done` > 0, None when it declined (0), NULL when an error is set (-1). */
static PyObject *buffer_finish(Buffer *b, int done, int ascii) {
    PyObject *result = NULL;
    if (done > 0 && ascii) {
        if ((result = PyUnicode_New(b->size, 127)) != NULL) memcpy(PyUnicode_1BYTE_DATA(result), b->data, b->size);
    } else if (done > 0) {
        result = PyBytes_FromStringAndSize(b->data, b->size);
    }
    buffer_free(b);
    if (done == 0) Py_RETURN_NONE;
    return result;
}

#endif
