/* A growable byte buffer shared by the compiled codecs (_bpfast.c, _jsonfast.c).
 *
 * The put functions return 1 when they wrote, -1 on an error (exception set).
 */
#ifndef STREAMER_BUFFER_H
#define STREAMER_BUFFER_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    char *data;
    Py_ssize_t size, capacity;
} Buffer;

static int buffer_reserve(Buffer *b, Py_ssize_t more) {
    if (b->size + more <= b->capacity) return 0;
    Py_ssize_t capacity = (b->size + more) * 2 + 256;
    char *data = PyMem_Realloc(b->data, capacity);
    if (data == NULL) { PyErr_NoMemory(); return -1; }
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

static int buffer_put_integer(Buffer *b, long long number) {
    char digits[32];
    int n = snprintf(digits, sizeof(digits), "%lld", number);
    return buffer_put(b, digits, n);
}

/* repr() of a float: the shortest text that reads back as the same number */
static int buffer_put_float(Buffer *b, double number) {
    char *text = PyOS_double_to_string(number, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (text == NULL) return -1;
    int done = buffer_put(b, text, (Py_ssize_t)strlen(text));
    PyMem_Free(text);
    return done;
}

static void buffer_free(Buffer *b) {
    PyMem_Free(b->data);
    b->data = NULL;
    b->size = b->capacity = 0;
}

#endif
