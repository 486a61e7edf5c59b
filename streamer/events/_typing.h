/* Typing one text value by its schema kind, shared by _eventfast.c (coerce)
 * and _bpfast.c (parse_event). The common texts are converted here (decimal
 * integers and numbers; timestamps through event.py's cached parser); any
 * other text goes to `convert`, event.py's own converter, so the results are
 * the same and its FieldError propagates unchanged.
 *
 * kind: 0 any (call convert), 1 integer, 2 timestamp, 3 number or timestamp.
 */
#ifndef STREAMER_TYPING_H
#define STREAMER_TYPING_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

enum { KIND_OTHER = 0, KIND_INT = 1, KIND_TS = 2, KIND_NUM = 3 };

/* `[+-]?[0-9]{1,18}`: an int; NULL with no error set when the text is not that */
static PyObject *decimal_int(const char *s, Py_ssize_t size) {
    Py_ssize_t i = (size && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
    if (size - i < 1 || size - i > 18) return NULL;
    long long value = 0;
    for (Py_ssize_t j = i; j < size; j++) {
        if (s[j] < '0' || s[j] > '9') return NULL;
        value = value * 10 + (s[j] - '0');
    }
    return PyLong_FromLongLong(s[0] == '-' ? -value : value);
}

/* `[+-]?[0-9]+\.[0-9]+`: a finite float (Python's float() of that text) */
static PyObject *decimal_float(PyObject *text, const char *s, Py_ssize_t size) {
    Py_ssize_t i = (size && (s[0] == '-' || s[0] == '+')) ? 1 : 0, dots = 0, digits = 0;
    for (; i < size; i++) {
        if (s[i] == '.') dots++;
        else if (s[i] >= '0' && s[i] <= '9') digits++;
        else return NULL;
    }
    if (dots != 1 || digits == 0 || digits > 30) return NULL;
    PyObject *value = PyFloat_FromString(text);
    if (value == NULL) {
        PyErr_Clear();
        return NULL;
    }
    return value;
}

/* the typed value of the str `text` (new reference), or NULL with the converter's error */
static PyObject *convert_text(PyObject *text, int kind, PyObject *convert, PyObject *parse_ts) {
    const char *s = PyUnicode_IS_ASCII(text) ? (const char *)PyUnicode_1BYTE_DATA(text) : NULL;
    Py_ssize_t size = PyUnicode_GET_LENGTH(text);
    if (s != NULL && kind == KIND_TS) return PyObject_CallOneArg(parse_ts, text);
    if (s != NULL && (kind == KIND_INT || kind == KIND_NUM)) {
        PyObject *value = decimal_int(s, size);
        if (value != NULL || PyErr_Occurred()) return value;
        if (kind == KIND_NUM) {
            value = decimal_float(text, s, size);
            if (value != NULL) return value;
        }
    }
    return PyObject_CallOneArg(convert, text);
}

/* "None": monitord writes Python's None as that text */
static int is_none_text(PyObject *value) {
    return PyUnicode_CheckExact(value) && PyUnicode_GET_LENGTH(value) == 4 &&
           PyUnicode_CompareWithASCIIString(value, "None") == 0;
}

#endif
