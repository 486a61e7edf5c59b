/* Compiled fast path of event typing (streamer/events/event.py, coerce_fields).
 *
 *   coerce(fields, todo, parse_ts) -> None
 *       types `fields` in place: every text value "None" becomes None, then
 *       each (key, kind, convert) of `todo` converts its field (_typing.h).
 */
#include "_typing.h"

/* An int or float epoch time in event.py's range [0, TS_MAX): kept as it is.
 * Anything else (out of range, NaN, other types) goes to event.py's converter,
 * which raises its FieldError. */
#define TS_MAX 253402300800.0
static int ts_in_range(PyObject *value) {
    double seconds;
    if (PyFloat_CheckExact(value)) seconds = PyFloat_AS_DOUBLE(value);
    else if (PyLong_CheckExact(value)) {
        seconds = PyLong_AsDouble(value);
        if (seconds == -1.0 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
    } else return 0;
    return seconds >= 0.0 && seconds < TS_MAX;
}

/* An int that fits in 64 signed bits (event.py's INT_MIN..INT_MAX): kept as it is. */
static int int64(PyObject *value) {
    if (!PyLong_CheckExact(value)) return 0;
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (v == -1 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
    return !overflow;
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
        if (is_none_text(value)) {
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
        } else if ((kind == KIND_INT && int64(value)) ||
                   (kind == KIND_NUM && (int64(value) || PyFloat_CheckExact(value))) ||
                   (kind == KIND_TS && ts_in_range(value))) {
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
