/* yamlsub.py's block-YAML subset loader, compiled.
 *
 * The same walk as the `_Parser` class in yamlsub.py, step for step, on the
 * UTF-8 bytes of the text (every character the grammar looks at is ASCII,
 * and UTF-8 never puts an ASCII byte inside a multi-byte character). Scalar
 * text is resolved by the shared cache and, on a miss, by yamlsub.py's own
 * resolver (a callback), so both loaders give the same values; whatever
 * yamlsub.py would refuse raises its `Unsupported` here too.
 *
 *   load(text, keep, scalar, resolved, Unsupported) -> value
 *       (NotImplemented for a text with no UTF-8 form: lone surrogates)
 *       scalar(text, line_number) resolves one scalar (and caches it in
 *       `resolved`, a dict text -> value); Unsupported is the class to raise.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define MAX_DEPTH 200

typedef struct {
    Py_ssize_t indent;
    const char *content;
    Py_ssize_t size;
    Py_ssize_t number; /* raw line index */
} Line;

typedef struct {
    const char *text;
    Py_ssize_t *raw_start, *raw_size, raw_count;
    Line *lines;
    Py_ssize_t count, pos;
    PyObject *scalar_cb, *resolved, *unsupported;
    int depth;
} Parser;

static const char INDICATORS[] = "{[&*!|>%@`#?";

static int is_indicator(char c) { return c && strchr(INDICATORS, c) != NULL; }
static int not_plain_key(char c) { return is_indicator(c) || (c && strchr("\"'#\t-", c) != NULL); }
static int is_dash(const Line *l) { return l->content[0] == '-' && (l->size == 1 || l->content[1] == ' '); }

static PyObject *unsupported(Parser *p, const char *what, Py_ssize_t number) {
    PyErr_Format(p->unsupported, "%s at line %zd", what, number + 1);
    return NULL;
}

static Py_ssize_t find_colon_space(const char *s, Py_ssize_t size) {
    for (Py_ssize_t i = 0; i + 1 < size; i++)
        if (s[i] == ':' && s[i + 1] == ' ') return i;
    return -1;
}

/* yamlsub._key_colon */
static Py_ssize_t key_colon(const char *s, Py_ssize_t size) {
    char first = s[0];
    Py_ssize_t colon;
    if (first == '"' || first == '\'') {
        const char *hit = memchr(s + 1, first, size - 1);
        Py_ssize_t close = hit ? hit - s : -1;
        while (first == '\'' && close >= 0 && close + 1 < size && s[close + 1] == '\'') {
            hit = close + 2 < size ? memchr(s + close + 2, first, size - close - 2) : NULL;
            close = hit ? hit - s : -1;
        }
        if (close < 0 || close + 1 >= size || s[close + 1] != ':') return -1;
        colon = close + 1;
    } else {
        if (is_indicator(first)) return -1;
        colon = find_colon_space(s, size);
        if (colon < 0) colon = s[size - 1] == ':' ? size - 1 : -1;
        if (colon <= 0) return -1;
    }
    return colon + 1 >= size || s[colon + 1] == ' ' ? colon : -1;
}

static PyObject *scalar(Parser *p, const char *s, Py_ssize_t size, Py_ssize_t number) {
    PyObject *text = PyUnicode_DecodeUTF8(s, size, NULL);
    if (text == NULL) return NULL;
    PyObject *value = PyDict_GetItemWithError(p->resolved, text);
    if (value != NULL) {
        Py_INCREF(value);
    } else if (!PyErr_Occurred()) {
        value = PyObject_CallFunction(p->scalar_cb, "On", text, number);
    }
    Py_DECREF(text);
    return value;
}

static PyObject *mapping(Parser *p, Py_ssize_t indent, PyObject *keep);
static PyObject *sequence(Parser *p, Py_ssize_t indent, PyObject *keep);

static PyObject *node(Parser *p, Py_ssize_t pos, Py_ssize_t indent, PyObject *keep) {
    if (++p->depth > MAX_DEPTH) {
        p->depth--;
        return unsupported(p, "nesting too deep", p->lines[pos].number);
    }
    p->pos = pos;
    PyObject *value = is_dash(&p->lines[pos]) ? sequence(p, indent, keep) : mapping(p, indent, keep);
    p->depth--;
    return value;
}

static PyObject *child(Parser *p, Py_ssize_t indent, PyObject *keep, int allow_same_indent) {
    if (p->pos >= p->count) Py_RETURN_NONE;
    Line *l = &p->lines[p->pos];
    if (l->indent > indent) return node(p, p->pos, l->indent, keep);
    if (allow_same_indent && l->indent == indent && is_dash(l)) return sequence(p, indent, keep);
    Py_RETURN_NONE;
}

static Py_ssize_t block_end(Parser *p, Py_ssize_t indent) {
    Py_ssize_t pos = p->pos;
    while (pos < p->count && p->lines[pos].indent > indent) pos++;
    return pos;
}

static void skip(Parser *p, Py_ssize_t indent, const char *value, Py_ssize_t value_size) {
    if (value_size && (value[0] == '|' || value[0] == '>')) {
        p->pos = block_end(p, indent);
        return;
    }
    while (p->pos < p->count) {
        Line *l = &p->lines[p->pos];
        if (l->indent > indent || (!value_size && l->indent == indent && is_dash(l))) {
            p->pos++;
            continue;
        }
        break;
    }
}

static int only_spaces(const char *s, Py_ssize_t size) {
    for (Py_ssize_t i = 0; i < size; i++)
        if (s[i] != ' ') return 0;
    return 1;
}

static PyObject *literal(Parser *p, Py_ssize_t indent, const char *header, Py_ssize_t header_size,
                         Py_ssize_t number) {
    int strip = header_size == 2 && header[1] == '-';
    if (!(header_size == 1 || strip)) return unsupported(p, "block scalar header", number);
    Py_ssize_t end = block_end(p, indent);
    Py_ssize_t last = end > p->pos ? p->lines[end - 1].number : number;
    p->pos = end;
    /* the raw lines of the block: number+1 .. last, blank ones included */
    Py_ssize_t first = number + 1, stop = last + 1, content_indent = -1;
    for (Py_ssize_t i = first; i < stop; i++) {
        const char *s = p->text + p->raw_start[i];
        Py_ssize_t size = p->raw_size[i];
        if (!only_spaces(s, size)) {
            content_indent = 0;
            while (s[content_indent] == ' ') content_indent++;
            break;
        }
    }
    if (content_indent < 0) return PyUnicode_FromStringAndSize("", 0);
    if (content_indent <= indent) return unsupported(p, "block scalar indentation", number);
    Py_ssize_t total = 0;
    for (Py_ssize_t i = first; i < stop; i++) total += p->raw_size[i] + 1;
    char *out = PyMem_Malloc(total + 1);
    if (out == NULL) return PyErr_NoMemory();
    Py_ssize_t n = 0;
    for (Py_ssize_t i = first; i < stop; i++) {
        const char *s = p->text + p->raw_start[i];
        Py_ssize_t size = p->raw_size[i];
        Py_ssize_t head = size < content_indent ? size : content_indent;
        if (!only_spaces(s, head) || (size && s[size - 1] == '\r')) {
            PyMem_Free(out);
            return unsupported(p, "block scalar indentation, tab or CR", number);
        }
        if (i > first) out[n++] = '\n';
        if (size > content_indent) {
            memcpy(out + n, s + content_indent, size - content_indent);
            n += size - content_indent;
        }
    }
    while (n > 0 && out[n - 1] == '\n') n--;
    if (!strip) out[n++] = '\n';
    PyObject *value = PyUnicode_DecodeUTF8(out, n, NULL);
    PyMem_Free(out);
    return value;
}

static PyObject *sequence(Parser *p, Py_ssize_t indent, PyObject *keep) {
    PyObject *items = PyList_New(0);
    if (items == NULL) return NULL;
    while (p->pos < p->count) {
        Line *l = &p->lines[p->pos];
        if (l->indent != indent || !is_dash(l)) {
            if (l->indent > indent) goto unexpected;
            break;
        }
        const char *rest = l->content + (l->size >= 2 ? 2 : l->size);
        Py_ssize_t rest_size = l->size - (rest - l->content);
        while (rest_size && rest[0] == ' ') { rest++; rest_size--; }
        PyObject *item;
        if (rest_size && (rest[0] == '#' || rest[0] == '\t')) {
            Py_DECREF(items);
            return unsupported(p, "comment or tab", l->number);
        }
        if (!rest_size) {
            p->pos++;
            item = child(p, indent, keep, 0);
        } else if (rest[0] == '-' && (rest_size == 1 || rest[1] == ' ')) {
            Py_DECREF(items);
            return unsupported(p, "nested compact sequence", l->number);
        } else if (key_colon(rest, rest_size) >= 0) {
            /* `- key: value`: a mapping whose first line starts after the dash */
            l->indent = indent + (rest - l->content);
            l->content = rest;
            l->size = rest_size;
            item = mapping(p, l->indent, keep);
        } else {
            item = scalar(p, rest, rest_size, l->number);
            p->pos++;
        }
        if (item == NULL || PyList_Append(items, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(items);
            return NULL;
        }
        Py_DECREF(item);
    }
    return items;
unexpected:
    Py_DECREF(items);
    return unsupported(p, "unexpected indentation", p->lines[p->pos].number);
}

static PyObject *mapping(Parser *p, Py_ssize_t indent, PyObject *keep) {
    PyObject *out = PyDict_New();
    if (out == NULL) return NULL;
    int keep_all = keep == Py_True;
    PyObject *keep_map = PyDict_Check(keep) ? keep : NULL;
    PyObject *other = NULL;
    if (keep_map != NULL) {
        other = PyDict_GetItemString(keep_map, "*");
    }
    while (p->pos < p->count) {
        Line *l = &p->lines[p->pos];
        const char *s = l->content;
        Py_ssize_t size = l->size, number = l->number;
        if (l->indent != indent) {
            if (l->indent > indent) goto fail_unexpected;
            break;
        }
        char first = s[0];
        if (first == '-' && (size == 1 || s[1] == ' ')) break;
        const char *key_text, *value_text;
        Py_ssize_t key_size, value_size;
        Py_ssize_t colon = not_plain_key(first) ? -1 : find_colon_space(s, size);
        if (colon > 0) {
            key_text = s; key_size = colon;
            value_text = s + colon + 2; value_size = size - colon - 2;
        } else if (!not_plain_key(first) && s[size - 1] == ':' && size > 1) {
            key_text = s; key_size = size - 1;
            value_text = s + size; value_size = 0;
        } else {
            if (first == '#' || first == '\t') {
                Py_DECREF(out);
                return unsupported(p, "comment or tab", number);
            }
            colon = key_colon(s, size);
            if (colon < 0) {
                Py_DECREF(out);
                return unsupported(p, "not a `key: value` line", number);
            }
            key_text = s; key_size = colon;
            value_text = s + colon + 1; value_size = size - colon - 1;
        }
        if (value_size || colon > 0) { /* `key: value` forms; a bare `key:` keeps its text */
            while (key_size && key_text[key_size - 1] == ' ') key_size--;
            while (value_size && value_text[0] == ' ') { value_text++; value_size--; }
        }
        PyObject *key = scalar(p, key_text, key_size, number);
        if (key == NULL) goto fail;
        PyObject *spec;
        if (keep_all) {
            spec = Py_True;
        } else if (keep_map != NULL) {
            spec = PyDict_GetItemWithError(keep_map, key);
            if (spec == NULL) {
                if (PyErr_Occurred()) { Py_DECREF(key); goto fail; }
                spec = other;
            }
        } else {
            spec = NULL;
        }
        p->pos++;
        if (spec == NULL || spec == Py_None) {
            Py_DECREF(key);
            skip(p, indent, value_text, value_size);
            continue;
        }
        Py_INCREF(spec); /* a borrowed reference from a dict the callbacks could change */
        PyObject *value;
        if (!value_size) {
            value = child(p, indent, spec, 1);
        } else if (value_text[0] == '|') {
            value = literal(p, indent, value_text, value_size, number);
        } else {
            value = scalar(p, value_text, value_size, number);
            if (value != NULL && p->pos < p->count && p->lines[p->pos].indent > indent) {
                Py_DECREF(value);
                value = unsupported(p, "multi-line scalar", number);
            }
        }
        Py_DECREF(spec);
        if (value == NULL || PyDict_SetItem(out, key, value) < 0) {
            Py_DECREF(key);
            Py_XDECREF(value);
            goto fail;
        }
        Py_DECREF(key);
        Py_DECREF(value);
    }
    return out;
fail_unexpected:
    Py_DECREF(out);
    return unsupported(p, "unexpected indentation", p->lines[p->pos].number);
fail:
    Py_DECREF(out);
    return NULL;
}

/* yamlsub._Parser.__init__: the raw lines, and the non-blank ones with their indents (0, or -1 on error) */
static int scan(Parser *p, Py_ssize_t size) {
    const char *text = p->text;
    Py_ssize_t count = 1;
    for (Py_ssize_t i = 0; i < size; i++) count += text[i] == '\n';
    p->raw_start = PyMem_Malloc(sizeof(Py_ssize_t) * count);
    p->raw_size = PyMem_Malloc(sizeof(Py_ssize_t) * count);
    p->lines = PyMem_Malloc(sizeof(Line) * count);
    if (!p->raw_start || !p->raw_size || !p->lines) { PyErr_NoMemory(); return -1; }
    Py_ssize_t start = 0, number = 0;
    p->count = 0;
    for (;;) {
        const char *nl = memchr(text + start, '\n', size - start);
        Py_ssize_t end = nl ? nl - text : size;
        p->raw_start[number] = start;
        p->raw_size[number] = end - start;
        Py_ssize_t indent = 0;
        while (start + indent < end && text[start + indent] == ' ') indent++;
        const char *content = text + start + indent;
        Py_ssize_t csize = end - start - indent;
        while (csize && (content[csize - 1] == ' ' || content[csize - 1] == '\r' || content[csize - 1] == '\t'))
            csize--;
        if (csize) {
            if (indent == 0 && csize >= 3 && (memcmp(content, "---", 3) == 0 || memcmp(content, "...", 3) == 0)) {
                unsupported(p, "document marker", number);
                return -1;
            }
            p->lines[p->count++] = (Line){indent, content, csize, number};
        }
        number++;
        if (!nl) break;
        start = end + 1;
    }
    p->raw_count = number;
    return 0;
}

static PyObject *load(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !PyUnicode_Check(args[0]) || !PyDict_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "load(text, keep, scalar, resolved, Unsupported)");
        return NULL;
    }
    Py_ssize_t size;
    const char *text = PyUnicode_AsUTF8AndSize(args[0], &size);
    Parser p = {text, NULL, NULL, 0, NULL, 0, 0, args[2], args[3], args[4], 0};
    if (text == NULL) { /* lone surrogates have no UTF-8 form: yamlsub.py walks this text */
        PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;
    }
    PyObject *value = NULL;
    if (scan(&p, size) < 0) goto out;
    if (p.count == 0) {
        value = Py_None;
        Py_INCREF(value);
        goto out;
    }
    value = node(&p, 0, p.lines[0].indent, args[1]);
    if (value != NULL && p.pos != p.count) {
        Py_DECREF(value);
        value = unsupported(&p, "unexpected indentation", p.lines[p.pos].number);
    }
out:
    PyMem_Free(p.raw_start);
    PyMem_Free(p.raw_size);
    PyMem_Free(p.lines);
    return value;
}

static PyMethodDef methods[] = {
    {"load", (PyCFunction)(void (*)(void))load, METH_FASTCALL,
     "load(text, keep, scalar, resolved, Unsupported) -> the document, subtrees outside keep left out"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "streamer.monitor._yamlfast",
    "yamlsub.py's block-YAML subset loader, compiled.", -1, methods,
};

PyMODINIT_FUNC PyInit__yamlfast(void) {
    return PyModule_Create(&module);
}
