/* Compiled fast path of the JSON codec (streamer/events/jsonenc.py, dumps).
 *
 *   json_object(fields, keys, event_id, name) -> bytes | None
 *       `{"<keys[0]>":<first value>,...,"event_id":"<event_id>","event":"<name>"}`
 *       where `keys` are the JSON names of the fields in their order. Values
 *       that are exact str, int (64-bit), float, bool or None only; None
 *       (declined) for anything else, and jsonenc.py encodes the event with
 *       orjson.
 *
 * The text is orjson's for the same object except in the spelling of floats
 * Python writes with an exponent (`1e-05` where orjson writes `0.00001`): the
 * same numbers. NaN and infinities are written null, as orjson does.
 */
#include "_buffer.h"
#include <math.h>

/* a JSON string as orjson writes it; 1 done, 0 declined (no UTF-8 form), -1 error */
static int append_string(Buffer *b, PyObject *text) {
    Py_ssize_t size;
    const char *s = PyUnicode_AsUTF8AndSize(text, &size);
    if (s == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (buffer_reserve(b, size * 6 + 2) < 0) return -1;
    char *out = b->data + b->size;
    static const char hex[] = "0123456789abcdef";
    *out++ = '"';
    for (Py_ssize_t i = 0; i < size; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *out++ = (char)c;
            continue;
        }
        *out++ = '\\';
        switch (c) {
        case '"': *out++ = '"'; break;
        case '\\': *out++ = '\\'; break;
        case '\b': *out++ = 'b'; break;
        case '\t': *out++ = 't'; break;
        case '\n': *out++ = 'n'; break;
        case '\f': *out++ = 'f'; break;
        case '\r': *out++ = 'r'; break;
        default:
            *out++ = 'u'; *out++ = '0'; *out++ = '0';
            *out++ = hex[c >> 4]; *out++ = hex[c & 15];
        }
    }
    *out++ = '"';
    b->size = out - b->data;
    return 1;
}

static int append_value(Buffer *b, PyObject *value) {
    if (PyUnicode_CheckExact(value)) return append_string(b, value);
    if (value == Py_None) return buffer_put(b, "null", 4);
    if (value == Py_True) return buffer_put(b, "true", 4);
    if (value == Py_False) return buffer_put(b, "false", 5);
    if (PyLong_CheckExact(value)) {
        int overflow = 0;
        long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (number == -1 && PyErr_Occurred()) return -1;
        return overflow ? 0 : buffer_put_integer(b, number);
    }
    if (PyFloat_CheckExact(value)) {
        double number = PyFloat_AS_DOUBLE(value);
        return isfinite(number) ? buffer_put_float(b, number) : buffer_put(b, "null", 4);
    }
    return 0;
}

static PyObject *json_object(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyDict_Check(args[0]) || !PyTuple_Check(args[1]) || !PyUnicode_Check(args[2]) ||
        !PyUnicode_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "json_object(fields: dict, keys: tuple, event_id: str, name: str)");
        return NULL;
    }
    PyObject *fields = args[0], *keys = args[1];
    if (PyTuple_GET_SIZE(keys) != PyDict_GET_SIZE(fields)) {
        PyErr_SetString(PyExc_ValueError, "keys and fields differ in length");
        return NULL;
    }
    Buffer b = {NULL, 0, 0};
    PyObject *key, *value, *result = NULL;
    Py_ssize_t pos = 0, i = 0;
    int done = buffer_put(&b, "{", 1);
    while (done > 0 && PyDict_Next(fields, &pos, &key, &value)) {
        PyObject *name = PyTuple_GET_ITEM(keys, i++);
        if (!PyUnicode_CheckExact(name)) { done = 0; break; }
        if ((done = append_string(&b, name)) > 0 && (done = buffer_put(&b, ":", 1)) > 0 &&
            (done = append_value(&b, value)) > 0)
            done = buffer_put(&b, ",", 1);
    }
    if (done > 0 && (done = buffer_put(&b, "\"event_id\":", 11)) > 0) done = append_string(&b, args[2]);
    if (done > 0 && (done = buffer_put(&b, ",\"event\":", 9)) > 0) done = append_string(&b, args[3]);
    if (done > 0 && (done = buffer_put(&b, "}", 1)) > 0) result = PyBytes_FromStringAndSize(b.data, b.size);
    buffer_free(&b);
    if (done < 0) return NULL;
    if (done == 0) Py_RETURN_NONE;
    return result;
}

static PyMethodDef methods[] = {
    {"json_object", (PyCFunction)(void (*)(void))json_object, METH_FASTCALL,
     "json_object(fields, keys, event_id, name) -> JSON bytes, or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "streamer.events._jsonfast",
    "Compiled fast path of the JSON codec; jsonenc.py encodes what it declines.", -1, methods,
};

PyMODINIT_FUNC PyInit__jsonfast(void) {
    return PyModule_Create(&module);
}
