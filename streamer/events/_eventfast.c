/* Compiled fast path of event typing (streamer/events/event.py, coerce_fields).
 *
 *   coerce(fields, todo, parse_ts) -> None
 *       types `fields` in place: every text value "None" becomes None, then
 *       each (key, kind, convert) of `todo` converts its field. The common
 *       texts are converted here (decimal integers and numbers; timestamps
 *       through `parse_ts`, event.py's cached parser); anything else goes to
 *       `convert`, event.py's own converter, so the results are the same and
 *       its FieldError propagates unchanged.
 *
 * kind: 0 any (call convert), 1 integer, 2 timestamp, 3 number or timestamp.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>

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

static PyObject *convert_text(PyObject *text, int kind, PyObject *convert, PyObject *parse_ts) {
    Py_ssize_t size;
    const char *s = PyUnicode_IS_ASCII(text) ? (const char *)PyUnicode_1BYTE_DATA(text) : NULL;
    size = PyUnicode_GET_LENGTH(text);
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

static PyObject *coerce(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyDict_Check(args[0]) || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "coerce(fields: dict, todo: list, parse_ts)");
        return NULL;
    }
    PyObject *fields = args[0], *todo = args[1], *parse_ts = args[2];
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(fields, &pos, &key, &value)) {
        /* monitord writes Python's None as the text None */
        if (PyUnicode_CheckExact(value) && PyUnicode_GET_LENGTH(value) == 4 &&
            PyUnicode_CompareWithASCIIString(value, "None") == 0) {
            if (PyDict_SetItem(fields, key, Py_None) < 0) return NULL;
        }
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(todo); i++) {
        PyObject *entry = PyList_GET_ITEM(todo, i);
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 3) {
            PyErr_SetString(PyExc_TypeError, "todo entries are (key, kind, convert)");
            return NULL;
        }
        key = PyTuple_GET_ITEM(entry, 0);
        int kind = (int)PyLong_AsLong(PyTuple_GET_ITEM(entry, 1));
        PyObject *convert = PyTuple_GET_ITEM(entry, 2);
        value = PyDict_GetItemWithError(fields, key);
        if (value == NULL) {
            if (PyErr_Occurred()) return NULL;
            PyErr_SetObject(PyExc_KeyError, key);
            return NULL;
        }
        if (value == Py_None) continue;
        PyObject *typed;
        if (PyUnicode_CheckExact(value)) {
            typed = convert_text(value, kind, convert, parse_ts);
        } else if ((kind == KIND_INT && PyLong_CheckExact(value)) ||
                   (kind != KIND_OTHER && kind != KIND_INT && (PyLong_CheckExact(value) || PyFloat_CheckExact(value)))) {
            continue; /* already typed: event.py's converters return these as they are */
        } else {
            typed = PyObject_CallOneArg(convert, value);
        }
        if (typed == NULL) return NULL;
        int failed = PyDict_SetItem(fields, key, typed);
        Py_DECREF(typed);
        if (failed) return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"coerce", (PyCFunction)(void (*)(void))coerce, METH_FASTCALL,
     "coerce(fields, todo, parse_ts) -> None; types fields in place"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "streamer.events._eventfast",
    "Compiled fast path of event typing; event.py's converters decide what it hands them.", -1, methods,
};

PyMODINIT_FUNC PyInit__eventfast(void) {
    return PyModule_Create(&module);
}
