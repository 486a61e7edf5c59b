/* Compiled fast paths of the BP codec (streamer/events/bp.py).
 *
 * Both functions handle the common case only and return None for anything
 * else, so the pure-Python code in bp.py stays the one definition of the
 * format: it decides every line and value this file declines, and raises the
 * errors. Only ASCII text is handled here.
 *
 *   split_line(line) -> dict[str, str] | None
 *       a well-formed `key=value key="quoted \" value"` line; None for
 *       anything else (malformed, non-ASCII, control characters).
 *   format_fields(head, fields) -> str | None
 *       `head` + ` key=value` for every field but `ts` and `level`; values
 *       that are exact str, int, float, bool or None only; None otherwise.
 */
#include "_buffer.h"
#include <stdint.h>

/* ASCII characters that Python's `\s` and str.split() treat as blanks */
static int is_blank(unsigned char c) {
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

/* a control character bp.py must judge (NUL, other C0 controls) */
static int is_odd_control(unsigned char c) {
    return c < 0x20 && !is_blank(c);
}

/* ------------------------------------------------------------ split_line */

/* Keys repeat on every line: a small table hands out one shared (interned)
 * str per key text, so a line allocates nothing for its keys and every later
 * dict lookup finds the hash already computed. */
#define KEY_SLOTS 2048
static PyObject *key_table[KEY_SLOTS];

static PyObject *shared_key(const char *text, Py_ssize_t size) {
    uint64_t hash = 1469598103934665603ULL; /* FNV-1a */
    for (Py_ssize_t i = 0; i < size; i++) hash = (hash ^ (unsigned char)text[i]) * 1099511628211ULL;
    PyObject **slot = &key_table[hash & (KEY_SLOTS - 1)];
    PyObject *key = *slot;
    if (key != NULL && PyUnicode_GET_LENGTH(key) == size && memcmp(PyUnicode_1BYTE_DATA(key), text, size) == 0) {
        Py_INCREF(key);
        return key;
    }
    key = PyUnicode_FromStringAndSize(text, size);
    if (key == NULL) return NULL;
    PyUnicode_InternInPlace(&key);
    Py_XSETREF(*slot, key);
    Py_INCREF(key);
    return key;
}

static PyObject *unescape(const char *text, Py_ssize_t size) {
    char small[256];
    char *out = size <= (Py_ssize_t)sizeof(small) ? small : PyMem_Malloc(size);
    if (out == NULL) return PyErr_NoMemory();
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < size; i++) {
        char c = text[i];
        if (c == '\\' && i + 1 < size) {
            char next = text[i + 1];
            char mapped = next == '"' ? '"' : next == '\\' ? '\\' : next == 'n' ? '\n'
                        : next == 'r' ? '\r' : next == 't' ? '\t' : 0;
            if (mapped) { out[n++] = mapped; i++; continue; }
            /* any other escape is kept as written: both characters */
            out[n++] = c; out[n++] = next; i++;
            continue;
        }
        out[n++] = c;
    }
    PyObject *value = PyUnicode_FromStringAndSize(out, n);
    if (out != small) PyMem_Free(out);
    return value;
}

static PyObject *split_line(PyObject *self, PyObject *line) {
    if (!PyUnicode_Check(line)) {
        PyErr_SetString(PyExc_TypeError, "split_line() needs a str");
        return NULL;
    }
    if (PyUnicode_READY(line) < 0) return NULL;
    if (!PyUnicode_IS_ASCII(line)) Py_RETURN_NONE;
    const char *s = (const char *)PyUnicode_1BYTE_DATA(line);
    Py_ssize_t size = PyUnicode_GET_LENGTH(line);
    PyObject *pairs = PyDict_New();
    if (pairs == NULL) return NULL;
    Py_ssize_t i = 0;
    for (;;) {
        while (i < size && is_blank((unsigned char)s[i])) i++;
        if (i >= size) break;
        Py_ssize_t key_start = i;
        while (i < size && s[i] != '=' && s[i] != '"' && !is_blank((unsigned char)s[i])) {
            if (is_odd_control((unsigned char)s[i])) goto decline;
            i++;
        }
        if (i == key_start || i >= size || s[i] != '=') goto decline;
        Py_ssize_t key_end = i++;
        PyObject *value;
        if (i < size && s[i] == '"') {
            Py_ssize_t start = ++i;
            int escaped = 0;
            while (i < size && s[i] != '"') {
                if (is_odd_control((unsigned char)s[i])) goto decline;
                if (s[i] == '\\') {
                    /* the pattern's `\\.`: any character but a newline */
                    if (i + 1 >= size || s[i + 1] == '\n') goto decline;
                    escaped = 1;
                    i++;
                }
                i++;
            }
            if (i >= size) goto decline; /* unterminated */
            Py_ssize_t end = i++;
            if (i < size && !is_blank((unsigned char)s[i])) goto decline;
            value = escaped ? unescape(s + start, end - start)
                            : PyUnicode_FromStringAndSize(s + start, end - start);
        } else {
            Py_ssize_t start = i;
            while (i < size && s[i] != '"' && !is_blank((unsigned char)s[i])) {
                if (s[i] == '\\' || is_odd_control((unsigned char)s[i])) goto decline;
                i++;
            }
            if (i < size && s[i] == '"') goto decline;
            value = PyUnicode_FromStringAndSize(s + start, i - start);
        }
        if (value == NULL) goto fail;
        PyObject *key = shared_key(s + key_start, key_end - key_start);
        if (key == NULL) { Py_DECREF(value); goto fail; }
        int failed = PyDict_SetItem(pairs, key, value);
        Py_DECREF(key);
        Py_DECREF(value);
        if (failed) goto fail;
    }
    return pairs;
decline:
    Py_DECREF(pairs);
    Py_RETURN_NONE;
fail:
    Py_DECREF(pairs);
    return NULL;
}

/* --------------------------------------------------------- format_fields */

/* 1: appended; 0: not ASCII (decline); -1: error */
static int put_ascii(Buffer *b, PyObject *text) {
    if (PyUnicode_READY(text) < 0) return -1;
    if (!PyUnicode_IS_ASCII(text)) return 0;
    return buffer_put(b, (const char *)PyUnicode_1BYTE_DATA(text), PyUnicode_GET_LENGTH(text));
}

/* bp._quote for an ASCII str: bare unless empty or holding a blank, `"` or `\` */
static int put_text(Buffer *b, PyObject *value) {
    if (PyUnicode_READY(value) < 0) return -1;
    if (!PyUnicode_IS_ASCII(value)) return 0;
    const char *s = (const char *)PyUnicode_1BYTE_DATA(value);
    Py_ssize_t size = PyUnicode_GET_LENGTH(value);
    int quote = size == 0;
    for (Py_ssize_t i = 0; i < size && !quote; i++) {
        unsigned char c = (unsigned char)s[i];
        quote = is_blank(c) || c == '"' || c == '\\';
    }
    if (!quote) return buffer_put(b, s, size);
    if (buffer_reserve(b, size * 2 + 2) < 0) return -1;
    char *out = b->data + b->size;
    *out++ = '"';
    for (Py_ssize_t i = 0; i < size; i++) {
        char c = s[i];
        switch (c) {
        case '\\': *out++ = '\\'; *out++ = '\\'; break;
        case '"': *out++ = '\\'; *out++ = '"'; break;
        case '\n': *out++ = '\\'; *out++ = 'n'; break;
        case '\r': *out++ = '\\'; *out++ = 'r'; break;
        case '\t': *out++ = '\\'; *out++ = 't'; break;
        default: *out++ = c;
        }
    }
    *out++ = '"';
    b->size = out - b->data;
    return 1;
}

/* 1: appended; 0: a value type bp.py must write; -1: error */
static int put_value(Buffer *b, PyObject *value) {
    if (PyUnicode_CheckExact(value)) return put_text(b, value);
    if (value == Py_None) return buffer_put(b, "None", 4);
    if (PyBool_Check(value)) return buffer_put(b, value == Py_True ? "1" : "0", 1);
    if (PyFloat_CheckExact(value)) return buffer_put_float(b, PyFloat_AS_DOUBLE(value));
    if (!PyLong_CheckExact(value)) return 0;
    int overflow = 0;
    long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (number == -1 && PyErr_Occurred()) return -1;
    if (!overflow) return buffer_put_integer(b, number);
    PyObject *digits = PyObject_Repr(value); /* beyond 64 bits */
    if (digits == NULL) return -1;
    int done = put_ascii(b, digits);
    Py_DECREF(digits);
    return done;
}

static PyObject *format_fields(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyUnicode_Check(args[0]) || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "format_fields(head: str, fields: dict)");
        return NULL;
    }
    Buffer b = {NULL, 0, 0};
    PyObject *key, *value, *result = NULL;
    Py_ssize_t pos = 0;
    int done = put_ascii(&b, args[0]);
    while (done > 0 && PyDict_Next(args[1], &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) { done = 0; break; }
        /* `ts` and `level` lead the line: bp.py writes them in `head` */
        if (PyUnicode_CompareWithASCIIString(key, "ts") == 0 ||
            PyUnicode_CompareWithASCIIString(key, "level") == 0) continue;
        if ((done = buffer_put(&b, " ", 1)) > 0 && (done = put_ascii(&b, key)) > 0 &&
            (done = buffer_put(&b, "=", 1)) > 0)
            done = put_value(&b, value);
    }
    if (done > 0) result = PyUnicode_DecodeASCII(b.data ? b.data : "", b.size, NULL);
    buffer_free(&b);
    if (done < 0) return NULL;
    if (done == 0) Py_RETURN_NONE;
    return result;
}

/* ---------------------------------------------------------------- module */

static PyMethodDef methods[] = {
    {"split_line", (PyCFunction)split_line, METH_O,
     "split_line(line) -> dict of a well-formed ASCII BP line, or None"},
    {"format_fields", (PyCFunction)(void (*)(void))format_fields, METH_FASTCALL,
     "format_fields(head, fields) -> BP text, or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "streamer.events._bpfast",
    "Compiled fast paths of the BP codec; bp.py decides what they decline.", -1, methods,
};

PyMODINIT_FUNC PyInit__bpfast(void) {
    return PyModule_Create(&module);
}
