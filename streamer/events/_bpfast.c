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
 *   configure(plans, plan_for, parse_ts, event_type) -> bool
 *   parse_event(line) -> Event | None
 *       split_line, then what bp.parse_line does for the common case: the
 *       name, `ts`, `level=Info` dropped, the fields typed by the event's
 *       plan (bp._plan_for: its converters; None leaves the name to
 *       parse_line), the `event.id` taken; the Event is built directly in
 *       its slots. None for anything else, a value its converter refuses
 *       included: parse_line then raises the error.
 *   join_lines(events) -> bytes | None
 *       bp.format_event of every event, each line ended by a newline, when
 *       every event keeps its BP text and has its id; None otherwise.
 *   format_fields(head, fields) -> str | None
 *       `head` + ` key=value` for every field but `ts` and `level`; values
 *       that are exact str, int, float, bool or None only; None otherwise.
 */
#include "_buffer.h"
#include "_slots.h"
#include "_typing.h"
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

/* a str of ASCII text (the caller checked): copied, not decoded */
static PyObject *ascii_string(const char *text, Py_ssize_t size) {
    PyObject *value = PyUnicode_New(size, 127);
    if (value != NULL) memcpy(PyUnicode_1BYTE_DATA(value), text, size);
    return value;
}

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
    key = ascii_string(text, size);
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
    PyObject *value = ascii_string(out, n);
    if (out != small) PyMem_Free(out);
    return value;
}

/* The values of `event` and `event.id`, which parse_event takes out of the pairs. */
typedef struct {
    PyObject *event, *event_id;
} Taken;

static PyObject *s_event, *s_ts, *s_level, *s_event_id; /* interned by configure() */

static void taken_clear(Taken *taken) {
    Py_CLEAR(taken->event);
    Py_CLEAR(taken->event_id);
}

/* a dict sized for the pairs of the line: no resizing while it fills */
static PyObject *dict_for(const char *s, Py_ssize_t size) {
#if PY_VERSION_HEX < 0x030D0000
    Py_ssize_t pairs = 0;
    for (const char *at = s; (at = memchr(at, '=', s + size - at)) != NULL; at++) pairs++;
    return _PyDict_NewPresized(pairs);
#else
    return PyDict_New();
#endif
}

/* the pairs of the ASCII line s[0:size]: a new dict, Py_None (new reference)
 * when the line is not the common well-formed case, NULL on an error. With
 * `taken`, the values of `event` and `event.id` go there instead. */
static PyObject *split_pairs(const char *s, Py_ssize_t size, Taken *taken) {
    PyObject *pairs = dict_for(s, size);
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
                    if (i + 1 >= size || s[i + 1] == '\n' || is_odd_control((unsigned char)s[i + 1])) goto decline;
                    escaped = 1;
                    i++;
                }
                i++;
            }
            if (i >= size) goto decline; /* unterminated */
            Py_ssize_t end = i++;
            if (i < size && !is_blank((unsigned char)s[i])) goto decline;
            value = escaped ? unescape(s + start, end - start)
                            : ascii_string(s + start, end - start);
        } else {
            Py_ssize_t start = i;
            while (i < size && s[i] != '"' && !is_blank((unsigned char)s[i])) {
                if (s[i] == '\\' || is_odd_control((unsigned char)s[i])) goto decline;
                i++;
            }
            if (i < size && s[i] == '"') goto decline;
            value = ascii_string(s + start, i - start);
        }
        if (value == NULL) goto fail;
        PyObject *key = shared_key(s + key_start, key_end - key_start);
        if (key == NULL) { Py_DECREF(value); goto fail; }
        PyObject **slot = taken == NULL ? NULL : key == s_event ? &taken->event
                        : key == s_event_id ? &taken->event_id : NULL;
        if (slot != NULL) { /* interned: one object per text */
            Py_DECREF(key);
            if (*slot != NULL) { Py_DECREF(value); goto decline; } /* given twice: bp.py names the error */
            *slot = value;
            continue;
        }
        Py_ssize_t before = PyDict_GET_SIZE(pairs);
        int failed = PyDict_SetItem(pairs, key, value);
        Py_DECREF(key);
        Py_DECREF(value);
        if (failed) goto fail;
        if (PyDict_GET_SIZE(pairs) == before) goto decline; /* a key given twice: bp.py names the error */
    }
    return pairs;
decline:
    Py_DECREF(pairs);
    Py_RETURN_NONE;
fail:
    Py_DECREF(pairs);
    return NULL;
}

static PyObject *split_line(PyObject *self, PyObject *line) {
    if (!PyUnicode_Check(line)) {
        PyErr_SetString(PyExc_TypeError, "split_line() needs a str");
        return NULL;
    }
    if (PyUnicode_READY(line) < 0) return NULL;
    if (!PyUnicode_IS_ASCII(line)) Py_RETURN_NONE;
    return split_pairs((const char *)PyUnicode_1BYTE_DATA(line), PyUnicode_GET_LENGTH(line), NULL);
}

/* ----------------------------------------------------------- parse_event */

/* Set by configure(): bp.py's plan cache and builder, event.py's timestamp
 * parser, and the Event class's slots. */
static PyObject *plans, *plan_for, *parse_ts;
static EventSlots slots;
#define MAX_PLANS 4096

static PyObject *configure(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyDict_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "configure(plans: dict, plan_for, parse_ts, event_type)");
        return NULL;
    }
    if (!event_slots_load(args[3], &slots)) Py_RETURN_FALSE; /* not the layout this file builds: bp.py parses */
    if (s_event == NULL) {
        s_event = PyUnicode_InternFromString("event");
        s_ts = PyUnicode_InternFromString("ts");
        s_level = PyUnicode_InternFromString("level");
        s_event_id = PyUnicode_InternFromString("event.id");
        if (!s_event || !s_ts || !s_level || !s_event_id) return NULL;
    }
    for (int i = 0; i < 3; i++) Py_INCREF(args[i]);
    Py_XSETREF(plans, args[0]);
    Py_XSETREF(plan_for, args[1]);
    Py_XSETREF(parse_ts, args[2]);
    Py_RETURN_TRUE;
}

/* the plan of event `name` as written (borrowed), building it once; NULL on an error */
static PyObject *plan_of(PyObject *name) {
    PyObject *plan = PyDict_GetItemWithError(plans, name);
    if (plan != NULL || PyErr_Occurred()) return plan;
    plan = PyObject_CallOneArg(plan_for, name);
    if (plan == NULL) return NULL;
    if (plan != Py_None && !(PyTuple_CheckExact(plan) && PyTuple_GET_SIZE(plan) == 4 &&
                             PyUnicode_CheckExact(PyTuple_GET_ITEM(plan, 0)) &&
                             PyDict_CheckExact(PyTuple_GET_ITEM(plan, 1)))) {
        Py_DECREF(plan);
        PyErr_SetString(PyExc_TypeError, "a plan is (name, {field: (kind, convert)}, renames or None, keep line)");
        return NULL;
    }
    if (PyDict_GET_SIZE(plans) >= MAX_PLANS) PyDict_Clear(plans); /* names from a hostile file */
    int failed = PyDict_SetItem(plans, name, plan);
    Py_DECREF(plan);
    return failed ? NULL : plan; /* the cache holds it */
}

/* types `pairs` in place by the plan's converters; 1 done, 0 declined, -1 error */
static int type_fields(PyObject *pairs, PyObject *converters) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(pairs, &pos, &key, &value)) {
        PyObject *typed;
        if (is_none_text(value)) {
            typed = Py_NewRef(Py_None);
        } else {
            PyObject *entry = PyDict_GetItemWithError(converters, key);
            if (entry == NULL) {
                if (PyErr_Occurred()) return -1;
                continue; /* a text field */
            }
            if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 2) {
                PyErr_SetString(PyExc_TypeError, "a converter entry is (kind, convert)");
                return -1;
            }
            int kind = (int)PyLong_AsLong(PyTuple_GET_ITEM(entry, 0));
            typed = convert_text(value, kind, PyTuple_GET_ITEM(entry, 1), parse_ts);
            if (typed == NULL) {
                if (!PyErr_ExceptionMatches(PyExc_ValueError)) return -1;
                PyErr_Clear(); /* bp.py raises the error, naming the field */
                return 0;
            }
        }
        /* replacing a value keeps the dict's keys: safe while iterating */
        int failed = PyDict_SetItem(pairs, key, typed);
        Py_DECREF(typed);
        if (failed) return -1;
    }
    return 1;
}

/* the Event of a well-formed line, or None: bp.parse_line decides the rest */
static PyObject *parse_event(PyObject *self, PyObject *line) {
    if (plans == NULL || !PyUnicode_CheckExact(line) || !PyUnicode_IS_ASCII(line)) Py_RETURN_NONE;
    const char *s = (const char *)PyUnicode_1BYTE_DATA(line);
    Py_ssize_t size = PyUnicode_GET_LENGTH(line);
    /* a stripped line that is not a comment or JSON: it can be kept as the event's BP text */
    if (size == 0 || is_blank((unsigned char)s[0]) || is_blank((unsigned char)s[size - 1]) || s[0] == '#' ||
        s[0] == '{') Py_RETURN_NONE;
    Taken taken = {NULL, NULL};
    PyObject *pairs = split_pairs(s, size, &taken), *event = NULL, *plan = NULL;
    if (pairs == NULL || pairs == Py_None) { taken_clear(&taken); return pairs; }
    PyObject *name = taken.event;
    if (name == NULL || PyUnicode_GET_LENGTH(name) == 0) goto decline;
    int has_ts = PyDict_Contains(pairs, s_ts);
    if (has_ts <= 0) { if (has_ts < 0) goto fail; goto decline; }
    PyObject *level = PyDict_GetItemWithError(pairs, s_level); /* `level=Info` is dropped, others kept in place */
    if (level != NULL && PyUnicode_CompareWithASCIIString(level, "Info") == 0) {
        if (PyDict_DelItem(pairs, s_level) < 0) goto fail;
    } else if (level == NULL && PyErr_Occurred()) goto fail;
    plan = plan_of(name);
    if (plan == NULL) goto fail;
    if (plan == Py_None) { plan = NULL; goto decline; }
    Py_INCREF(plan); /* held: a converter's Python code could clear the cache */
    PyObject *renames = PyTuple_GET_ITEM(plan, 2);
    if (renames != Py_None) { /* a 3.x name kept in 4.x: only its 4.x form is parsed here */
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        while (PyDict_Next(pairs, &pos, &key, &value)) {
            int renamed = PyDict_Contains(renames, key);
            if (renamed) { if (renamed < 0) goto fail; goto decline; }
        }
    }
    int typed = type_fields(pairs, PyTuple_GET_ITEM(plan, 1));
    if (typed <= 0) { if (typed < 0) goto fail; goto decline; }
    /* an `event.id=None` is no id (the text None is None) */
    PyObject *event_id = taken.event_id != NULL && !is_none_text(taken.event_id) ? taken.event_id : Py_None;
    event = slots.type->tp_alloc(slots.type, 0);
    if (event == NULL) goto fail;
    slot_set(event, slots.name, PyTuple_GET_ITEM(plan, 0));
    slot_set(event, slots.fields, pairs);
    slot_set(event, slots.id, event_id);
    slot_set(event, slots.bp, PyTuple_GET_ITEM(plan, 3) == Py_True ? line : Py_None);
    slot_set(event, slots.json, Py_None);
    Py_DECREF(pairs);
    Py_DECREF(plan);
    taken_clear(&taken);
    return event;
decline:
    Py_DECREF(pairs);
    Py_XDECREF(plan);
    taken_clear(&taken);
    Py_RETURN_NONE;
fail:
    Py_DECREF(pairs);
    Py_XDECREF(plan);
    taken_clear(&taken);
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
    Buffer b;
    buffer_init(&b);
    PyObject *key, *value;
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
    return buffer_finish(&b, done, 1);
}

/* ------------------------------------------------------------ join_lines */

/* the UTF-8 of a str slot value; NULL (no error) when it is not a str with one */
static const char *utf8_of(PyObject *value, Py_ssize_t *size) {
    if (value == NULL || !PyUnicode_CheckExact(value)) return NULL;
    const char *text = PyUnicode_AsUTF8AndSize(value, size);
    if (text == NULL) PyErr_Clear();
    return text;
}

static PyObject *join_lines(PyObject *self, PyObject *events) {
    if (!PyList_CheckExact(events)) {
        PyErr_SetString(PyExc_TypeError, "join_lines(events: list)");
        return NULL;
    }
    if (slots.type == NULL) Py_RETURN_NONE;
    static const char tag[] = " event.id=";
    const Py_ssize_t tag_size = sizeof(tag) - 1;
    Buffer b;
    buffer_init(&b);
    int done = 1;
    for (Py_ssize_t i = 0; done > 0 && i < PyList_GET_SIZE(events); i++) {
        PyObject *event = PyList_GET_ITEM(events, i);
        Py_ssize_t line_size, id_size;
        const char *line = NULL, *id = NULL;
        if (Py_IS_TYPE(event, slots.type)) {
            line = utf8_of(slot_get(event, slots.bp), &line_size);
            id = utf8_of(slot_get(event, slots.id), &id_size);
        }
        if (line == NULL || id == NULL) { done = 0; break; } /* bp.py formats the batch */
        if ((done = buffer_put(&b, line, line_size)) <= 0) break;
        /* bp.format_event: the id follows, unless the line carries one */
        if (memmem(line, line_size, tag, tag_size) == NULL && (done = buffer_put(&b, tag, tag_size)) > 0)
            done = buffer_put(&b, id, id_size);
        if (done > 0) done = buffer_put(&b, "\n", 1);
    }
    return buffer_finish(&b, done, 0);
}

/* ---------------------------------------------------------------- module */

static PyMethodDef methods[] = {
    {"split_line", (PyCFunction)split_line, METH_O,
     "split_line(line) -> dict of a well-formed ASCII BP line, or None"},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL,
     "configure(plans, plan_for, parse_ts, event_type) -> True if parse_event can build this Event"},
    {"parse_event", (PyCFunction)parse_event, METH_O,
     "parse_event(line) -> the Event of a well-formed stripped ASCII BP line, or None"},
    {"join_lines", (PyCFunction)join_lines, METH_O,
     "join_lines(events) -> the BP lines of events read from BP with their ids, newline-terminated, or None"},
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
