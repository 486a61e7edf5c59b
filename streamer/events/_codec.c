/* The one compiled codec of streamer's events: BP (streamer/events/bp.py),
 * monitord's JSON (jsonenc.py) and the canonical form of the stable id
 * (canonical.py). An accelerator only: every function handles the common
 * case and returns None ("declined") for anything else, so the Python modules
 * stay the one definition of the formats and of every error message.
 * Only public, stable C API is used; Events are built by calling their class
 * and read through their attributes; all state lives in the module object.
 *
 *   configure(event_type, plans, plan_for, integer, number, timestamp, parse_ts) -> None
 *       the Event class, bp.py's plan cache and builder,
 *       and event.py's integer, number and timestamp converters (known by
 *       identity: their common texts are read here) and cached ts parser.
 *   split_line(line) -> dict[str, str] | None
 *       a well-formed ASCII `key=value key="quoted \" value"` line.
 *   parse_event(line) -> Event | None
 *       split_line, then what bp.parse_line does for the common case: the
 *       name, `ts`, `level=Info` dropped, the fields typed by the event's
 *       plan (bp._plan_for: event.py's converters, called here), the
 *       `event.id` taken. None for anything else, a value its converter
 *       refuses included: parse_line then raises the error.
 *   join_lines(events) -> bytes | None
 *       bp.format_event of every event, each line ended by a newline, when
 *       every event keeps its BP text and has its id.
 *   format_fields(head, fields) -> str | None
 *       `head` + ` key=value` for every field but `ts` and `level` (a list, dict or tuple as its repr).
 *   json_object(fields, keys, event_id, name) -> bytes | None
 *       `{"<keys[0]>":<first value>,...,"event_id":"<event_id>","event":"<name>"}`.
 *   canonical(name, fields) -> bytes | None
 *       the canonical form (version 1, canonical.py) the id hashes.
 *   event_id(name, fields) -> str | None
 *       event.content_id: the canonical form hashed by BLAKE2b-128 (_blake2b.h), as hex.
 *   hash_hex(data) -> str
 *       canonical.hash_form(data), by _blake2b.h (what the tests hold against hashlib).
 *   ensure_ids(events) -> int
 *       every event's `_id` as event.content_id computes it; how many it declined.
 *   encode_events(events, shapes, renamed_keys) -> int
 *       every event's id and `_json` as jsonenc.dumps writes it; how many it declined.
 */
#include "_buffer.h"
#include "_blake2b.h"
#include <math.h>
#include <stdint.h>

#define KEY_SLOTS 2048
#define MAX_PLANS 4096

/* Everything the module keeps, in the module object (PyObject pointers only:
 * traverse and clear walk it as an array). */
typedef struct {
    PyObject *event_type, *plans, *plan_for;
    PyObject *as_integer, *as_number, *as_timestamp, *parse_ts; /* event.py's converters, by identity */
    PyObject *s_event, *s_ts, *s_level, *s_event_id, *s_name, *s_fields, *s_id, *s_bp, *s_json;
    PyObject *keys[KEY_SLOTS]; /* key text -> one shared str (see shared_key) */
} State;

#define STATE_REFS ((Py_ssize_t)(sizeof(State) / sizeof(PyObject *)))

static State *state_of(PyObject *module) {
    return (State *)PyModule_GetState(module);
}

/* ------------------------------------------------------------ split_line */

/* ASCII characters that Python's `\s` and str.split() treat as blanks */
static int is_blank(unsigned char c) {
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

/* a control character bp.py must judge (NUL, other C0 controls) */
static int is_odd_control(unsigned char c) {
    return c < 0x20 && !is_blank(c);
}

/* a str of ASCII text (the caller checked): copied, not decoded */
static PyObject *ascii_string(const char *text, Py_ssize_t size) {
    PyObject *value = PyUnicode_New(size, 127);
    if (value != NULL) memcpy(PyUnicode_1BYTE_DATA(value), text, size);
    return value;
}

/* Keys repeat on every line: a small table in the module state hands out one
 * shared (interned) str per key text, so a line allocates nothing for its
 * keys and every later dict lookup finds the hash already computed. */
static PyObject *shared_key(State *st, const char *text, Py_ssize_t size) {
    uint64_t hash = 1469598103934665603ULL; /* FNV-1a */
    for (Py_ssize_t i = 0; i < size; i++) hash = (hash ^ (unsigned char)text[i]) * 1099511628211ULL;
    PyObject **slot = &st->keys[hash & (KEY_SLOTS - 1)];
    PyObject *key = *slot;
    if (key != NULL && PyUnicode_GET_LENGTH(key) == size && memcmp(PyUnicode_1BYTE_DATA(key), text, size) == 0)
        return Py_NewRef(key);
    key = ascii_string(text, size);
    if (key == NULL) return NULL;
    PyUnicode_InternInPlace(&key);
    Py_XSETREF(*slot, Py_NewRef(key));
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

static void taken_clear(Taken *taken) {
    Py_CLEAR(taken->event);
    Py_CLEAR(taken->event_id);
}

/* the pairs of the ASCII line s[0:size]: a new dict, Py_None (new reference)
 * when the line is not the common well-formed case, NULL on an error. With
 * `taken`, the values of `event` and `event.id` go there instead. */
static PyObject *split_pairs(State *st, const char *s, Py_ssize_t size, Taken *taken) {
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
        PyObject *key = shared_key(st, s + key_start, key_end - key_start);
        if (key == NULL) { Py_DECREF(value); goto fail; }
        PyObject **slot = taken == NULL ? NULL : key == st->s_event ? &taken->event
                        : key == st->s_event_id ? &taken->event_id : NULL;
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

static PyObject *split_line(PyObject *module, PyObject *line) {
    if (!PyUnicode_Check(line)) {
        PyErr_SetString(PyExc_TypeError, "split_line() needs a str");
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(line)) Py_RETURN_NONE;
    return split_pairs(state_of(module), (const char *)PyUnicode_1BYTE_DATA(line), PyUnicode_GET_LENGTH(line), NULL);
}

/* ----------------------------------------------------------- parse_event */

static PyObject *configure(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7 || !PyType_Check(args[0]) || !PyDict_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "configure(event_type: type, plans: dict, plan_for, "
                                         "integer, number, timestamp, parse_ts)");
        return NULL;
    }
    State *st = state_of(module);
    PyObject **targets[] = {&st->event_type, &st->plans, &st->plan_for,
                            &st->as_integer, &st->as_number, &st->as_timestamp, &st->parse_ts};
    for (Py_ssize_t i = 0; i < nargs; i++) Py_XSETREF(*targets[i], Py_NewRef(args[i]));
    Py_RETURN_NONE;
}

/* `[+-]?[0-9]{1,18}`: an int (what event._integer gives); NULL with no error set when the text is not that */
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

/* `[+-]?[0-9]+\.[0-9]+`: a finite float (event._num_or_ts gives float() of that text); NULL, no error, otherwise */
static PyObject *decimal_float(PyObject *text, const char *s, Py_ssize_t size) {
    Py_ssize_t i = (size && (s[0] == '-' || s[0] == '+')) ? 1 : 0, dots = 0, digits = 0;
    for (; i < size; i++) {
        if (s[i] == '.') dots++;
        else if (s[i] >= '0' && s[i] <= '9') digits++;
        else return NULL;
    }
    if (dots != 1 || digits == 0 || digits > 30) return NULL;
    PyObject *value = PyFloat_FromString(text);
    if (value == NULL) PyErr_Clear();
    return value;
}

/* the typed value of the ASCII str `text` by `convert` (new reference), or NULL with its error. The
 * common texts of event.py's integer and number converters are read here, a timestamp goes straight
 * to its cached parser; everything else is the converter's to decide. */
static PyObject *convert_text(State *st, PyObject *convert, PyObject *text) {
    const char *s = (const char *)PyUnicode_1BYTE_DATA(text);
    Py_ssize_t size = PyUnicode_GET_LENGTH(text);
    if (convert == st->as_timestamp && st->parse_ts != NULL) return PyObject_CallOneArg(st->parse_ts, text);
    if (convert == st->as_integer || convert == st->as_number) {
        PyObject *value = decimal_int(s, size);
        if (value != NULL || PyErr_Occurred()) return value;
        if (convert == st->as_number && (value = decimal_float(text, s, size)) != NULL) return value;
    }
    return PyObject_CallOneArg(convert, text);
}

/* the plan of event `name` as written (borrowed), building it once; NULL on an error */
static PyObject *plan_of(State *st, PyObject *name) {
    PyObject *plan = PyDict_GetItemWithError(st->plans, name);
    if (plan != NULL || PyErr_Occurred()) return plan;
    plan = PyObject_CallOneArg(st->plan_for, name);
    if (plan == NULL) return NULL;
    if (plan != Py_None && !(PyTuple_CheckExact(plan) && PyTuple_GET_SIZE(plan) == 4 &&
                             PyUnicode_CheckExact(PyTuple_GET_ITEM(plan, 0)) &&
                             PyDict_CheckExact(PyTuple_GET_ITEM(plan, 1)))) {
        Py_DECREF(plan);
        PyErr_SetString(PyExc_TypeError, "a plan is (name, {field: convert}, renames or None, keep line)");
        return NULL;
    }
    if (PyDict_GET_SIZE(st->plans) >= MAX_PLANS) PyDict_Clear(st->plans); /* names from a hostile file */
    int failed = PyDict_SetItem(st->plans, name, plan);
    Py_DECREF(plan);
    return failed ? NULL : plan; /* the cache holds it */
}

/* "None": monitord writes Python's None as that text */
static int is_none_text(PyObject *value) {
    return PyUnicode_CheckExact(value) && PyUnicode_GET_LENGTH(value) == 4 &&
           PyUnicode_CompareWithASCIIString(value, "None") == 0;
}

/* types `pairs` in place by the plan's converters (event.py's own); 1 done, 0 declined, -1 error */
static int type_fields(State *st, PyObject *pairs, PyObject *converters) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(pairs, &pos, &key, &value)) {
        PyObject *typed;
        if (is_none_text(value)) {
            typed = Py_NewRef(Py_None);
        } else {
            PyObject *convert = PyDict_GetItemWithError(converters, key);
            if (convert == NULL) {
                if (PyErr_Occurred()) return -1;
                continue; /* a text field */
            }
            typed = convert_text(st, convert, value); /* the line is ASCII: so is every value */
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
static PyObject *parse_event(PyObject *module, PyObject *line) {
    State *st = state_of(module);
    if (st->plans == NULL || !PyUnicode_CheckExact(line) || !PyUnicode_IS_ASCII(line)) Py_RETURN_NONE;
    const char *s = (const char *)PyUnicode_1BYTE_DATA(line);
    Py_ssize_t size = PyUnicode_GET_LENGTH(line);
    /* a stripped line that is not a comment or JSON: it can be kept as the event's BP text */
    if (size == 0 || is_blank((unsigned char)s[0]) || is_blank((unsigned char)s[size - 1]) || s[0] == '#' ||
        s[0] == '{') Py_RETURN_NONE;
    Taken taken = {NULL, NULL};
    PyObject *pairs = split_pairs(st, s, size, &taken), *event = NULL, *plan = NULL;
    if (pairs == NULL || pairs == Py_None) { taken_clear(&taken); return pairs; }
    PyObject *name = taken.event;
    if (name == NULL || PyUnicode_GET_LENGTH(name) == 0) goto decline;
    int has_ts = PyDict_Contains(pairs, st->s_ts);
    if (has_ts <= 0) { if (has_ts < 0) goto fail; goto decline; }
    PyObject *level = PyDict_GetItemWithError(pairs, st->s_level); /* `level=Info` is dropped, others kept */
    if (level != NULL && PyUnicode_CompareWithASCIIString(level, "Info") == 0) {
        if (PyDict_DelItem(pairs, st->s_level) < 0) goto fail;
    } else if (level == NULL && PyErr_Occurred()) goto fail;
    plan = plan_of(st, name);
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
    int typed = type_fields(st, pairs, PyTuple_GET_ITEM(plan, 1));
    if (typed <= 0) { if (typed < 0) goto fail; goto decline; }
    /* an `event.id=None` is no id (the text None is None) */
    PyObject *event_id = taken.event_id != NULL && !is_none_text(taken.event_id) ? taken.event_id : Py_None;
    PyObject *bp_text = PyTuple_GET_ITEM(plan, 3) == Py_True ? line : Py_None;
    PyObject *call[4] = {PyTuple_GET_ITEM(plan, 0), pairs, event_id, bp_text};
    event = PyObject_Vectorcall(st->event_type, call, 4, NULL); /* Event(name, fields, event_id, bp) */
    if (event == NULL) goto fail;
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
    if (!PyUnicode_IS_ASCII(text)) return 0;
    return buffer_put(b, (const char *)PyUnicode_1BYTE_DATA(text), PyUnicode_GET_LENGTH(text));
}

/* the ASCII characters bp._NEEDS_QUOTES finds: is_blank's, `"` and `\` */
static const unsigned char quote_char[128] = {
    ['\t'] = 1, ['\n'] = 1, ['\v'] = 1, ['\f'] = 1, ['\r'] = 1, [0x1c] = 1, [0x1d] = 1, [0x1e] = 1, [0x1f] = 1,
    [' '] = 1, ['"'] = 1, ['\\'] = 1,
};

/* bp._quote for an ASCII str: bare unless empty or holding a blank, `"` or `\` */
static int put_text(Buffer *b, PyObject *value) {
    if (!PyUnicode_IS_ASCII(value)) return 0;
    const char *s = (const char *)PyUnicode_1BYTE_DATA(value);
    Py_ssize_t size = PyUnicode_GET_LENGTH(value);
    int quote = size == 0;
    for (Py_ssize_t i = 0; i < size && !quote; i++) quote = quote_char[(unsigned char)s[i] & 127];
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
    if (PyList_CheckExact(value) || PyDict_CheckExact(value) || PyTuple_CheckExact(value)) {
        PyObject *text = PyObject_Repr(value); /* bp._text_other: a container is written as its repr, quoted */
        if (text == NULL) return -1;
        int done = PyUnicode_CheckExact(text) ? put_text(b, text) : 0;
        Py_DECREF(text);
        return done;
    }
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
        if (!PyUnicode_CheckExact(key) || !PyUnicode_IS_ASCII(key)) { done = 0; break; }
        /* `ts` and `level` lead the line: bp.py writes them in `head` */
        const char *k = (const char *)PyUnicode_1BYTE_DATA(key);
        Py_ssize_t k_size = PyUnicode_GET_LENGTH(key);
        if ((k_size == 2 && memcmp(k, "ts", 2) == 0) || (k_size == 5 && memcmp(k, "level", 5) == 0)) continue;
        if ((done = buffer_put(&b, " ", 1)) > 0 && (done = put_ascii(&b, key)) > 0 &&
            (done = buffer_put(&b, "=", 1)) > 0)
            done = put_value(&b, value);
    }
    return buffer_finish(&b, done, 1);
}

/* ------------------------------------------------------------------ JSON */

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
    if (!PyFloat_CheckExact(value)) return PyFloat_Check(value) ? 0 : append_exact(b, value); /* a subclass: event.py */
    long long micro;
    if (micro_decimal(PyFloat_AS_DOUBLE(value), &micro)) /* already rounded */
        return micro % 1000000 ? buffer_put_micro(b, micro) : buffer_put_integer(b, micro / 1000000);
    PyObject *rounded = PyObject_CallMethod(value, "__round__", "i", 6); /* round(ts, 6) */
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

/* what content_id hashes, into `b` (initialised, empty): 1 done, 0 declined, -1 error */
static int canonical_into(Buffer *b, PyObject *event_name, PyObject *fields) {
    Py_ssize_t count = PyDict_GET_SIZE(fields), name_size;
    if (count > MAX_CANON_FIELDS) return 0;
    const char *name = PyUnicode_AsUTF8AndSize(event_name, &name_size);
    if (name == NULL) { PyErr_Clear(); return 0; }
    Field sorted[MAX_CANON_FIELDS];
    PyObject *key, *value;
    Py_ssize_t pos = 0, n = 0;
    while (PyDict_Next(fields, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key) || !PyUnicode_IS_ASCII(key)) return 0;
        Field field = {key, (const char *)PyUnicode_1BYTE_DATA(key), PyUnicode_GET_LENGTH(key), value, 0};
        field.is_ts = field.size == 2 && field.key[0] == 't' && field.key[1] == 's';
        Py_ssize_t at = n++;
        for (; at > 0 && field_before(&field, &sorted[at - 1]); at--) sorted[at] = sorted[at - 1];
        sorted[at] = field;
    }
    int done = buffer_put(b, name, name_size);
    if (done > 0) done = buffer_put(b, "\0{", 2);
    for (Py_ssize_t i = 0; done > 0 && i < n; i++) {
        if (i) done = buffer_put(b, ",", 1);
        if (done > 0 && (done = append_string(b, sorted[i].name)) > 0 && (done = buffer_put(b, ":", 1)) > 0)
            done = sorted[i].is_ts ? append_ts(b, sorted[i].value) : append_exact(b, sorted[i].value);
    }
    if (done > 0) done = buffer_put(b, "}", 1);
    return done;
}

/* what content_id hashes: new bytes, Py_None (new reference) when declined, NULL on an error */
static PyObject *canonical_bytes(PyObject *event_name, PyObject *fields) {
    Buffer b;
    buffer_init(&b);
    return buffer_finish(&b, canonical_into(&b, event_name, fields), 0);
}

/* the hex BLAKE2b-128 of `size` bytes at `data`: a new str */
static PyObject *hex_id(const char *data, Py_ssize_t size) {
    PyObject *id = PyUnicode_New(32, 127);
    if (id == NULL) return NULL;
    static const char nothing[1] = {0};
    blake2b16_hex((const unsigned char *)(size ? data : nothing), (size_t)size, (char *)PyUnicode_1BYTE_DATA(id));
    return id;
}

static PyObject *canonical(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyUnicode_Check(args[0]) || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "canonical(name: str, fields: dict)");
        return NULL;
    }
    return canonical_bytes(args[0], args[1]);
}

static PyObject *hash_hex(PyObject *self, PyObject *data) {
    if (!PyBytes_Check(data)) {
        PyErr_SetString(PyExc_TypeError, "hash_hex(data: bytes)");
        return NULL;
    }
    return hex_id(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data));
}

/* ------------------------------------------------------------ join_lines */

/* an attribute of `event` that is an exact str (new reference); NULL with no error when it is not */
static PyObject *str_attr(PyObject *event, PyObject *name) {
    PyObject *value = PyObject_GetAttr(event, name);
    if (value == NULL) return NULL;
    if (PyUnicode_CheckExact(value)) return value;
    Py_DECREF(value);
    return NULL;
}

static PyObject *join_lines(PyObject *module, PyObject *events) {
    if (!PyList_CheckExact(events)) {
        PyErr_SetString(PyExc_TypeError, "join_lines(events: list)");
        return NULL;
    }
    State *st = state_of(module);
    if (st->event_type == NULL) Py_RETURN_NONE;
    static const char tag[] = " event.id=";
    const Py_ssize_t tag_size = sizeof(tag) - 1;
    Buffer b;
    buffer_init(&b);
    int done = 1;
    for (Py_ssize_t i = 0; done > 0 && i < PyList_GET_SIZE(events); i++) {
        PyObject *event = PyList_GET_ITEM(events, i), *line = NULL, *id = NULL;
        if (!Py_IS_TYPE(event, (PyTypeObject *)st->event_type)) { done = 0; break; } /* bp.py formats the batch */
        if ((line = str_attr(event, st->s_bp)) == NULL || (id = str_attr(event, st->s_id)) == NULL) {
            Py_XDECREF(line);
            done = PyErr_Occurred() ? -1 : 0;
            break;
        }
        Py_ssize_t line_size, id_size;
        const char *line_text = PyUnicode_AsUTF8AndSize(line, &line_size);
        const char *id_text = line_text == NULL ? NULL : PyUnicode_AsUTF8AndSize(id, &id_size);
        if (id_text == NULL) { /* no UTF-8 form (a lone surrogate): bp.py decides */
            PyErr_Clear();
            done = 0;
        } else if ((done = buffer_put(&b, line_text, line_size)) > 0) {
            /* bp.format_event: the id follows, unless the line carries one */
            if (memmem(line_text, line_size, tag, tag_size) == NULL && (done = buffer_put(&b, tag, tag_size)) > 0)
                done = buffer_put(&b, id_text, id_size);
            if (done > 0) done = buffer_put(&b, "\n", 1);
        }
        Py_DECREF(line);
        Py_DECREF(id);
    }
    return buffer_finish(&b, done, 0);
}

/* ------------------------------------------------------- whole batches */

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

/* event.content_id(name, fields): a new str, Py_None (new reference) when declined, NULL on an error;
 * the canonical form is hashed where it was written (no bytes object, no hash object) */
static PyObject *content_id(PyObject *name, PyObject *fields) {
    if (!PyUnicode_CheckExact(name) || !PyDict_CheckExact(fields)) Py_RETURN_NONE;
    Buffer b;
    buffer_init(&b);
    int done = canonical_into(&b, name, fields);
    PyObject *id = done > 0 ? hex_id(b.data, b.size) : done == 0 ? Py_NewRef(Py_None) : NULL;
    buffer_free(&b);
    return id;
}

static PyObject *event_id(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyUnicode_Check(args[0]) || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "event_id(name: str, fields: dict)");
        return NULL;
    }
    return content_id(args[0], args[1]);
}

/* the stable id of `event` (new reference), computed and stored in its `_id` when missing;
 * Py_None (new reference) when declined, NULL on an error */
static PyObject *id_of(State *st, PyObject *event, PyObject *name, PyObject *fields) {
    PyObject *id = PyObject_GetAttr(event, st->s_id);
    if (id == NULL || id != Py_None) {
        if (id != NULL && !PyUnicode_CheckExact(id)) Py_SETREF(id, Py_NewRef(Py_None));
        return id;
    }
    Py_DECREF(id);
    id = content_id(name, fields);
    if (id != NULL && id != Py_None && PyObject_SetAttr(event, st->s_id, id) < 0) Py_CLEAR(id);
    return id;
}

/* 1 `event` has its id (in `_id`), 0 declined, -1 error; with `json`, its `_json` too */
static int ensure_id(State *st, PyObject *event, PyObject *shapes, PyObject *renamed_keys) {
    PyObject *name = PyObject_GetAttr(event, st->s_name), *fields = NULL, *id = NULL, *names = NULL, *json = NULL;
    int done = -1;
    if (name == NULL || (fields = PyObject_GetAttr(event, st->s_fields)) == NULL) goto out;
    if ((id = id_of(st, event, name, fields)) == NULL) goto out;
    done = id != Py_None;
    if (!done || shapes == NULL) goto out;
    done = 0;
    if (!PyUnicode_CheckExact(name) || !PyDict_CheckExact(fields)) goto out;
    if ((names = json_names(fields, shapes, renamed_keys)) == NULL) { done = PyErr_Occurred() ? -1 : 0; goto out; }
    json = json_object_of(fields, names, id, name);
    if (json == NULL) { done = -1; goto out; }
    if (json != Py_None) done = PyObject_SetAttr(event, st->s_json, json) < 0 ? -1 : 1;
out:
    Py_XDECREF(name);
    Py_XDECREF(fields);
    Py_XDECREF(id);
    Py_XDECREF(names);
    Py_XDECREF(json);
    return done;
}

static int ready_for(State *st, PyObject *events) {
    if (!PyList_CheckExact(events)) {
        PyErr_SetString(PyExc_TypeError, "events must be a list");
        return -1;
    }
    return st->event_type != NULL;
}

static PyObject *ensure_ids(PyObject *module, PyObject *events) {
    State *st = state_of(module);
    int ready = ready_for(st, events);
    if (ready < 0) return NULL;
    Py_ssize_t left = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(events); i++) {
        PyObject *event = PyList_GET_ITEM(events, i);
        int done = ready && Py_IS_TYPE(event, (PyTypeObject *)st->event_type) ? ensure_id(st, event, NULL, NULL) : 0;
        if (done < 0) return NULL;
        left += !done;
    }
    return PyLong_FromSsize_t(left);
}

/* one event's `_json`: 1 set (or already there), 0 declined, -1 error */
static int encode_one(State *st, PyObject *event, PyObject *shapes, PyObject *renamed_keys) {
    PyObject *cached = PyObject_GetAttr(event, st->s_json);
    if (cached == NULL) return -1;
    int there = cached != Py_None;
    Py_DECREF(cached);
    return there ? 1 : ensure_id(st, event, shapes, renamed_keys);
}

static PyObject *encode_events(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyDict_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "encode_events(events: list, shapes: dict, renamed_keys)");
        return NULL;
    }
    State *st = state_of(module);
    int ready = ready_for(st, args[0]);
    if (ready < 0) return NULL;
    PyObject *events = args[0];
    Py_ssize_t left = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(events); i++) {
        PyObject *event = PyList_GET_ITEM(events, i);
        int done = ready && Py_IS_TYPE(event, (PyTypeObject *)st->event_type)
                   ? encode_one(st, event, args[1], args[2]) : 0;
        if (done < 0) return NULL;
        left += !done;
    }
    return PyLong_FromSsize_t(left);
}

/* ---------------------------------------------------------------- module */

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL,
     "configure(event_type, plans, plan_for, integer, number, timestamp, parse_ts) -> None"},
    {"split_line", (PyCFunction)split_line, METH_O,
     "split_line(line) -> dict of a well-formed ASCII BP line, or None"},
    {"parse_event", (PyCFunction)parse_event, METH_O,
     "parse_event(line) -> the Event of a well-formed stripped ASCII BP line, or None"},
    {"join_lines", (PyCFunction)join_lines, METH_O,
     "join_lines(events) -> the BP lines of events read from BP with their ids, newline-terminated, or None"},
    {"format_fields", (PyCFunction)(void (*)(void))format_fields, METH_FASTCALL,
     "format_fields(head, fields) -> BP text, or None"},
    {"json_object", (PyCFunction)(void (*)(void))json_object, METH_FASTCALL,
     "json_object(fields, keys, event_id, name) -> JSON bytes, or None"},
    {"canonical", (PyCFunction)(void (*)(void))canonical, METH_FASTCALL,
     "canonical(name, fields) -> what event.content_id hashes, or None"},
    {"event_id", (PyCFunction)(void (*)(void))event_id, METH_FASTCALL,
     "event_id(name, fields) -> event.content_id's hex id, or None"},
    {"hash_hex", (PyCFunction)hash_hex, METH_O,
     "hash_hex(data) -> canonical.hash_form(data): hex BLAKE2b with a 16-byte digest"},
    {"ensure_ids", (PyCFunction)ensure_ids, METH_O,
     "ensure_ids(events) -> how many events it left without an id"},
    {"encode_events", (PyCFunction)(void (*)(void))encode_events, METH_FASTCALL,
     "encode_events(events, shapes, renamed_keys) -> how many events it left unencoded"},
    {NULL, NULL, 0, NULL},
};

static int exec_module(PyObject *module) {
    State *st = state_of(module);
    static const char *const names[] = {"event", "ts", "level", "event.id", "name", "fields", "_id", "_bp", "_json"};
    PyObject **targets[] = {&st->s_event, &st->s_ts, &st->s_level, &st->s_event_id, &st->s_name, &st->s_fields,
                            &st->s_id, &st->s_bp, &st->s_json};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if ((*targets[i] = PyUnicode_InternFromString(names[i])) == NULL) return -1;
    return 0;
}

static int traverse_module(PyObject *module, visitproc visit, void *arg) {
    State *st = state_of(module);
    if (st == NULL) return 0;
    PyObject **refs = (PyObject **)st;
    for (Py_ssize_t i = 0; i < STATE_REFS; i++) Py_VISIT(refs[i]);
    return 0;
}

static int clear_module(PyObject *module) {
    State *st = state_of(module);
    if (st == NULL) return 0;
    PyObject **refs = (PyObject **)st;
    for (Py_ssize_t i = 0; i < STATE_REFS; i++) Py_CLEAR(refs[i]);
    return 0;
}

static void free_module(void *module) {
    clear_module((PyObject *)module);
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, exec_module},
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "streamer.events._codec",
    "The compiled codec of events (BP, JSON, canonical id form); the Python modules decide what it declines.",
    sizeof(State), methods, module_slots, traverse_module, clear_module, free_module,
};

PyMODINIT_FUNC PyInit__codec(void) {
    return PyModuleDef_Init(&module_def);
}
