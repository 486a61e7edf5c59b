/* Compiled fast path of the JSON codec (streamer/events/jsonenc.py, dumps).
 *
 *   json_object(fields, keys, event_id, name) -> bytes | None
 *       `{"<keys[0]>":<first value>,...,"event_id":"<event_id>","event":"<name>"}`
 *       where `keys` are the JSON names of the fields in their order. Values
 *       that are exact str, int (64-bit), float, bool or None only; None
 *       (declined) for anything else, and jsonenc.py encodes the event with
 *       orjson.
 *
 *   canonical(name, fields) -> bytes | None
 *       what event.content_id hashes: the name in UTF-8, a NUL, then orjson's
 *       text of `fields` with sorted keys, `ts` rounded to the microsecond
 *       (an int when whole). Exactly orjson's bytes: None (declined) for
 *       anything it might spell otherwise (non-ASCII or non-str keys, floats
 *       Python writes with an exponent, integers beyond 64 bits, lists, ...).
 *
 *   configure(event_type, blake2b) -> bool
 *   ensure_ids(events) -> int
 *       every event's stable id (its `_id` slot), as event.content_id
 *       computes it; returns how many it declined (event.py does those).
 *   encode_events(events, shapes, renamed_keys) -> int
 *       every event's id and JSON (`_json` slot) as jsonenc.dumps writes it;
 *       the JSON names of each shape of keys come from jsonenc's cache
 *       `shapes` (filled by `renamed_keys`); returns how many it declined.
 *
 * json_object's text is orjson's for the same object except in the spelling of floats
 * Python writes with an exponent (`1e-05` where orjson writes `0.00001`): the
 * same numbers. NaN and infinities are written null, as orjson does.
 */
#include "_buffer.h"
#include "_slots.h"
#include <math.h>
#include <stdint.h>

/* whether any of the 8 bytes at s is a control character, `"` or `\\` (a word at a time) */
static int needs_escape(const char *s) {
    uint64_t word;
    memcpy(&word, s, 8);
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t quote = word ^ (ones * '"'), backslash = word ^ (ones * '\\');
    uint64_t found = ((word - ones * 0x20) & ~word) | ((quote - ones) & ~quote) | ((backslash - ones) & ~backslash);
    return (found & highs) != 0;
}

/* a JSON string as orjson writes it; 1 done, 0 declined (no UTF-8 form), -1 error */
static int append_string(Buffer *b, PyObject *text) {
    Py_ssize_t size;
    const char *s;
    if (PyUnicode_IS_ASCII(text)) { /* its bytes are its UTF-8 */
        s = (const char *)PyUnicode_1BYTE_DATA(text);
        size = PyUnicode_GET_LENGTH(text);
    } else if ((s = PyUnicode_AsUTF8AndSize(text, &size)) == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (buffer_reserve(b, size * 6 + 2) < 0) return -1;
    char *out = b->data + b->size;
    static const char hex[] = "0123456789abcdef";
    *out++ = '"';
    Py_ssize_t plain = 0; /* start of the run of characters copied as they are */
    for (Py_ssize_t i = 0; i < size; i++) {
        while (i + 8 <= size && !needs_escape(s + i)) i += 8;
        if (i >= size) break;
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        memcpy(out, s + plain, i - plain);
        out += i - plain;
        plain = i + 1;
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
    memcpy(out, s + plain, size - plain);
    out += size - plain;
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

/* `{...,"event_id":<id>,"event":<name>}`: new bytes, Py_None (new reference) when declined, NULL on an error */
static PyObject *json_object_of(PyObject *fields, PyObject *keys, PyObject *event_id, PyObject *event_name) {
    if (PyTuple_GET_SIZE(keys) != PyDict_GET_SIZE(fields)) {
        PyErr_SetString(PyExc_ValueError, "keys and fields differ in length");
        return NULL;
    }
    Buffer b;
    buffer_init(&b);
    PyObject *key, *value;
    Py_ssize_t pos = 0, i = 0;
    int done = buffer_put(&b, "{", 1);
    while (done > 0 && PyDict_Next(fields, &pos, &key, &value)) {
        PyObject *name = PyTuple_GET_ITEM(keys, i++);
        if (!PyUnicode_CheckExact(name)) { done = 0; break; }
        if ((done = append_string(&b, name)) > 0 && (done = buffer_put(&b, ":", 1)) > 0 &&
            (done = append_value(&b, value)) > 0)
            done = buffer_put(&b, ",", 1);
    }
    if (done > 0 && (done = buffer_put(&b, "\"event_id\":", 11)) > 0) done = append_string(&b, event_id);
    if (done > 0 && (done = buffer_put(&b, ",\"event\":", 9)) > 0) done = append_string(&b, event_name);
    if (done > 0) done = buffer_put(&b, "}", 1);
    return buffer_finish(&b, done, 0);
}

static PyObject *json_object(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyDict_Check(args[0]) || !PyTuple_Check(args[1]) || !PyUnicode_Check(args[2]) ||
        !PyUnicode_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "json_object(fields: dict, keys: tuple, event_id: str, name: str)");
        return NULL;
    }
    return json_object_of(args[0], args[1], args[2], args[3]);
}

/* --------------------------------------------------------------- canonical */

#define MAX_CANON_FIELDS 128

/* a value as orjson writes it, exactly; 1 done, 0 declined, -1 error */
static int append_exact(Buffer *b, PyObject *value) {
    if (!PyFloat_CheckExact(value)) return append_value(b, value);
    double number = PyFloat_AS_DOUBLE(value);
    if (!isfinite(number)) return buffer_put(b, "null", 4);
    Py_ssize_t start = b->size;
    int done = buffer_put_float(b, number);
    if (done > 0 && memchr(b->data + start, 'e', b->size - start) != NULL) done = 0; /* orjson spells it otherwise */
    return done;
}

/* `ts` as event.content_id hashes it: a float rounded to the microsecond, an int when whole */
static int append_ts(Buffer *b, PyObject *value) {
    static PyObject *round_name, *six;
    if (!PyFloat_CheckExact(value)) return PyFloat_Check(value) ? 0 : append_exact(b, value); /* a subclass: event.py */
    long long micro;
    if (micro_decimal(PyFloat_AS_DOUBLE(value), &micro)) /* already rounded */
        return micro % 1000000 ? buffer_put_micro(b, micro) : buffer_put_integer(b, micro / 1000000);
    if (round_name == NULL) {
        round_name = PyUnicode_InternFromString("__round__");
        six = PyLong_FromLong(6);
        if (round_name == NULL || six == NULL) return -1;
    }
    PyObject *rounded = PyObject_CallMethodOneArg(value, round_name, six);
    if (rounded == NULL) return -1;
    int done = 0;
    if (PyFloat_CheckExact(rounded)) {
        double number = PyFloat_AS_DOUBLE(rounded);
        if (isfinite(number) && number == floor(number)) {
            if (fabs(number) < 9.2e18) done = buffer_put_integer(b, (long long)number); /* else: wider than orjson takes */
        } else {
            done = append_exact(b, rounded);
        }
    }
    Py_DECREF(rounded);
    return done;
}

typedef struct {
    PyObject *name;
    const char *key;
    Py_ssize_t size;
    PyObject *value;
    int is_ts;
} Field;

static int field_before(const Field *a, const Field *b) {
    Py_ssize_t common = a->size < b->size ? a->size : b->size;
    int order = memcmp(a->key, b->key, common);
    return order < 0 || (order == 0 && a->size < b->size);
}

/* what content_id hashes: new bytes, Py_None (new reference) when declined, NULL on an error */
static PyObject *canonical_bytes(PyObject *event_name, PyObject *fields) {
    Py_ssize_t count = PyDict_GET_SIZE(fields), name_size;
    if (count > MAX_CANON_FIELDS) Py_RETURN_NONE;
    const char *name = PyUnicode_AsUTF8AndSize(event_name, &name_size);
    if (name == NULL) { PyErr_Clear(); Py_RETURN_NONE; }
    Field sorted[MAX_CANON_FIELDS];
    PyObject *key, *value;
    Py_ssize_t pos = 0, n = 0;
    while (PyDict_Next(fields, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key) || !PyUnicode_IS_ASCII(key)) Py_RETURN_NONE;
        Field field = {key, (const char *)PyUnicode_1BYTE_DATA(key), PyUnicode_GET_LENGTH(key), value, 0};
        field.is_ts = field.size == 2 && field.key[0] == 't' && field.key[1] == 's';
        Py_ssize_t at = n++;
        for (; at > 0 && field_before(&field, &sorted[at - 1]); at--) sorted[at] = sorted[at - 1];
        sorted[at] = field;
    }
    Buffer b;
    buffer_init(&b);
    int done = buffer_put(&b, name, name_size);
    if (done > 0) done = buffer_put(&b, "\0{", 2);
    for (Py_ssize_t i = 0; done > 0 && i < n; i++) {
        if (i) done = buffer_put(&b, ",", 1);
        if (done > 0 && (done = append_string(&b, sorted[i].name)) > 0 && (done = buffer_put(&b, ":", 1)) > 0)
            done = sorted[i].is_ts ? append_ts(&b, sorted[i].value) : append_exact(&b, sorted[i].value);
    }
    if (done > 0) done = buffer_put(&b, "}", 1);
    return buffer_finish(&b, done, 0);
}

static PyObject *canonical(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyUnicode_Check(args[0]) || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "canonical(name: str, fields: dict)");
        return NULL;
    }
    return canonical_bytes(args[0], args[1]);
}

/* ------------------------------------------------------- whole batches */

/* Set by configure(): the Event class's slots and hashlib's blake2b. */
static EventSlots slots;
static PyObject *blake2b, *digest_size_name, *digest_size, *hexdigest_name;

static PyObject *configure(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "configure(event_type, blake2b)");
        return NULL;
    }
    if (!event_slots_load(args[0], &slots)) Py_RETURN_FALSE;
    if (digest_size_name == NULL) {
        digest_size_name = Py_BuildValue("(s)", "digest_size");
        digest_size = PyLong_FromLong(16);
        hexdigest_name = PyUnicode_InternFromString("hexdigest");
        if (!digest_size_name || !digest_size || !hexdigest_name) return NULL;
    }
    Py_INCREF(args[1]);
    Py_XSETREF(blake2b, args[1]);
    Py_RETURN_TRUE;
}

/* event.content_id of an event: 1 its id slot holds it, 0 declined, -1 error */
static int ensure_id(PyObject *event) {
    PyObject *id = slot_get(event, slots.id);
    if (id != NULL && id != Py_None) return PyUnicode_CheckExact(id) ? 1 : 0;
    PyObject *name = slot_get(event, slots.name), *fields = slot_get(event, slots.fields);
    if (name == NULL || fields == NULL || !PyUnicode_CheckExact(name) || !PyDict_CheckExact(fields)) return 0;
    PyObject *data = canonical_bytes(name, fields); /* runs no Python code */
    if (data == NULL) return -1;
    if (data == Py_None) { Py_DECREF(data); return 0; }
    PyObject *call[2] = {data, digest_size};
    PyObject *hash = PyObject_Vectorcall(blake2b, call, 1, digest_size_name); /* blake2b(data, digest_size=16) */
    Py_DECREF(data);
    if (hash == NULL) return -1;
    id = PyObject_CallMethodNoArgs(hash, hexdigest_name);
    Py_DECREF(hash);
    if (id == NULL) return -1;
    slot_set(event, slots.id, id);
    Py_DECREF(id);
    return 1;
}

static int check_events(PyObject *events) {
    if (PyList_CheckExact(events)) return 1;
    PyErr_SetString(PyExc_TypeError, "events must be a list");
    return 0;
}

static PyObject *ensure_ids(PyObject *self, PyObject *events) {
    if (!check_events(events)) return NULL;
    Py_ssize_t left = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(events); i++) {
        PyObject *event = PyList_GET_ITEM(events, i);
        int done = slots.type != NULL && Py_IS_TYPE(event, slots.type) ? ensure_id(event) : 0;
        if (done < 0) return NULL;
        left += !done;
    }
    return PyLong_FromSsize_t(left);
}

/* the JSON names of the keys of `fields` (new reference), NULL with no error when they merge */
static PyObject *json_names(PyObject *fields, PyObject *shapes, PyObject *renamed_keys) {
    PyObject *keys = PyTuple_New(PyDict_GET_SIZE(fields)), *key, *value;
    if (keys == NULL) return NULL;
    Py_ssize_t pos = 0, i = 0;
    while (PyDict_Next(fields, &pos, &key, &value)) PyTuple_SET_ITEM(keys, i++, Py_NewRef(key));
    PyObject *entry = PyDict_GetItemWithError(shapes, keys);
    if (entry == NULL && !PyErr_Occurred()) {
        entry = PyObject_CallOneArg(renamed_keys, keys); /* jsonenc._renamed_keys fills `shapes` */
        Py_XDECREF(entry);                                  /* `shapes` holds it ... */
        if (entry != NULL) entry = PyDict_GetItemWithError(shapes, keys);
    }
    Py_DECREF(keys);
    if (entry == NULL) return NULL; /* ... unless it was just cleared: then jsonenc.py encodes the event */
    if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 2 || !PyTuple_CheckExact(PyTuple_GET_ITEM(entry, 0)))
        return NULL;
    return PyTuple_GET_ITEM(entry, 1) == Py_True ? Py_NewRef(PyTuple_GET_ITEM(entry, 0)) : NULL;
}

static PyObject *encode_events(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !check_events(args[0]) || !PyDict_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "encode_events(events: list, shapes: dict, renamed_keys)");
        return NULL;
    }
    PyObject *events = args[0];
    Py_ssize_t left = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(events); i++) {
        PyObject *event = PyList_GET_ITEM(events, i);
        if (slots.type == NULL || !Py_IS_TYPE(event, slots.type)) { left++; continue; }
        PyObject *cached = slot_get(event, slots.json);
        if (cached != NULL && cached != Py_None) continue;
        int has_id = ensure_id(event);
        if (has_id < 0) return NULL;
        PyObject *fields = slot_get(event, slots.fields), *names = NULL;
        if (has_id && (names = json_names(fields, args[1], args[2])) == NULL && PyErr_Occurred()) return NULL;
        PyObject *json = names == NULL ? Py_NewRef(Py_None)
                       : json_object_of(fields, names, slot_get(event, slots.id), slot_get(event, slots.name));
        Py_XDECREF(names);
        if (json == NULL) return NULL;
        if (json == Py_None) left++;
        else slot_set(event, slots.json, json);
        Py_DECREF(json);
    }
    return PyLong_FromSsize_t(left);
}

static PyMethodDef methods[] = {
    {"json_object", (PyCFunction)(void (*)(void))json_object, METH_FASTCALL,
     "json_object(fields, keys, event_id, name) -> JSON bytes, or None"},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL,
     "configure(event_type, blake2b) -> True if the batch functions can use this Event"},
    {"ensure_ids", (PyCFunction)ensure_ids, METH_O,
     "ensure_ids(events) -> how many events it left without an id"},
    {"encode_events", (PyCFunction)(void (*)(void))encode_events, METH_FASTCALL,
     "encode_events(events, shapes, renamed_keys) -> how many events it left unencoded"},
    {"canonical", (PyCFunction)(void (*)(void))canonical, METH_FASTCALL,
     "canonical(name, fields) -> what event.content_id hashes, or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "streamer.events._jsonfast",
    "Compiled fast path of the JSON codec; jsonenc.py encodes what it declines.", -1, methods,
};

PyMODINIT_FUNC PyInit__jsonfast(void) {
    return PyModule_Create(&module);
}
