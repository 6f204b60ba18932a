/* One pass over a plain `{"events": [...]}` append body, or an NDJSON one (an event
 * per line), for agent_replay.ingest.verbatim.
 *
 * The pure-Python fast path reads such a body in four C passes (msgspec for the
 * events' slices, msgspec again for their types, a byte translation and two
 * searches for numbers a double cannot hold); at 1,000 events per POST they were
 * most of the server's CPU per event. This walks the body once, validating it as
 * strict JSON, and hands back what the path needs: each event's type and the
 * bounds of its text in the body.
 *
 * It only ever says "yes, exactly this" or "not for me": anything it does not
 * vouch for (a key or a type written with escapes, a type twice in one event,
 * a raw CR or LF, a number that might be past a double's range, nesting deeper
 * than MAX_DEPTH, any malformed JSON) returns None, and the caller takes the
 * general path, which stores the event or names what is wrong. Non-ASCII bytes
 * are only flagged: the caller checks the body is UTF-8 (one C call).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_DEPTH 200
/* A number whose exponent has this many digits, or whose mantissa has this many,
 * may be past a double's range (the general path refuses those): not vouched for. */
#define EXPONENT_DIGITS 3
#define MANTISSA_DIGITS 200
/* Distinct types remembered per body: a stream's events share a handful. */
#define TYPE_CACHE 32

typedef struct {
    const unsigned char *end;
    int high; /* a byte >= 0x80 was seen (inside a string: anywhere else is malformed) */
} Scan;

/* 1 for bytes a string may hold as they are (no quote, backslash, control or high byte). */
static unsigned char PLAIN[256];

static void init_tables(void) {
    for (int b = 0x20; b < 0x80; b++) {
        PLAIN[b] = 1;
    }
    PLAIN['"'] = 0;
    PLAIN['\\'] = 0;
}

static inline const unsigned char *skip_space(const unsigned char *p, const unsigned char *end) {
    /* CR and LF are not taken: a body holding one goes the general way. */
    while (p < end && (*p == ' ' || *p == '\t')) {
        p++;
    }
    return p;
}

static inline int is_hex(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* `p` at the opening quote; returns the byte past the closing one, or NULL.
 * `*escaped` is set when the string holds a backslash escape. Inlined: most of a
 * body's bytes are in strings. */
static inline __attribute__((always_inline)) const unsigned char *
string(Scan *s, const unsigned char *p, int *escaped) {
    const unsigned char *end = s->end;
    p++;
    for (;;) {
        while (p < end && PLAIN[*p]) {
            p++;
        }
        if (p >= end) {
            return NULL;
        }
        unsigned char c = *p;
        if (c == '"') {
            return p + 1;
        }
        if (c == '\\') {
            *escaped = 1;
            if (p + 1 >= end) {
                return NULL;
            }
            switch (p[1]) {
            case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
                p += 2;
                break;
            case 'u':
                if (end - p < 6 || !is_hex(p[2]) || !is_hex(p[3]) || !is_hex(p[4]) ||
                    !is_hex(p[5])) {
                    return NULL;
                }
                p += 6;
                break;
            default:
                return NULL;
            }
            continue;
        }
        if (c >= 0x80) {
            s->high = 1;
            p++;
            continue;
        }
        return NULL; /* a control character */
    }
}

static const unsigned char *number(Scan *s, const unsigned char *p) {
    const unsigned char *end = s->end;
    Py_ssize_t digits = 0;
    if (p < end && *p == '-') {
        p++;
    }
    if (p >= end) {
        return NULL;
    }
    if (*p == '0') {
        p++;
        digits = 1;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') {
            p++;
            digits++;
        }
    } else {
        return NULL;
    }
    if (p < end && *p == '.') {
        p++;
        const unsigned char *first = p;
        while (p < end && *p >= '0' && *p <= '9') {
            p++;
        }
        if (p == first) {
            return NULL;
        }
        digits += p - first;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) {
            p++;
        }
        const unsigned char *first = p;
        while (p < end && *p >= '0' && *p <= '9') {
            p++;
        }
        if (p == first || p - first >= EXPONENT_DIGITS) {
            return NULL;
        }
    }
    return digits >= MANTISSA_DIGITS ? NULL : p;
}

static const unsigned char *value(Scan *s, const unsigned char *p, int depth);

static const unsigned char *literal(const unsigned char *p, const unsigned char *end,
                                    const char *word, Py_ssize_t size) {
    return end - p >= size && memcmp(p, word, size) == 0 ? p + size : NULL;
}

/* One item of a list (an array's value, an object's member) at `p`: returns the byte
 * past it, or NULL. */
typedef const unsigned char *(*Item)(Scan *s, const unsigned char *p, void *context);

/* `p` just past an opening bracket: `item`s separated by commas, up to `close`; returns
 * the byte past `close`, or NULL. Inlined where it is called, so that each call's `item`
 * is a direct call the compiler can inline in turn (through the pointer, a large body
 * took clearly longer). */
static inline __attribute__((always_inline)) const unsigned char *
items(Scan *s, const unsigned char *p, unsigned char close, Item item, void *context) {
    const unsigned char *end = s->end;
    p = skip_space(p, end);
    if (p < end && *p == close) {
        return p + 1;
    }
    for (;;) {
        p = item(s, p, context);
        if (p == NULL) {
            return NULL;
        }
        p = skip_space(p, end);
        if (p < end && *p == ',') {
            p = skip_space(p + 1, end);
            continue;
        }
        return p < end && *p == close ? p + 1 : NULL;
    }
}

/* `p` at a member's key: returns its value's first byte, or NULL; `*escaped` is set
 * when the key holds an escape, `*size` to the key's size with its quotes. */
static const unsigned char *key(Scan *s, const unsigned char *p, int *escaped, Py_ssize_t *size) {
    const unsigned char *end = s->end, *name = p;
    if (p >= end || *p != '"' || (p = string(s, p, escaped)) == NULL) {
        return NULL;
    }
    *size = p - name;
    p = skip_space(p, end);
    return p < end && *p == ':' ? skip_space(p + 1, end) : NULL;
}

/* `key` of a member whose key must be written without escapes (an event's or the
 * envelope's, matched byte for byte): NULL for one that holds an escape. */
static const unsigned char *plain_key(Scan *s, const unsigned char *p, Py_ssize_t *size) {
    int escaped = 0;
    p = key(s, p, &escaped, size);
    return escaped ? NULL : p;
}

static const unsigned char *element(Scan *s, const unsigned char *p, void *depth) {
    return value(s, p, *(int *)depth + 1);
}

static const unsigned char *member(Scan *s, const unsigned char *p, void *depth) {
    int escaped = 0;
    Py_ssize_t size;
    p = key(s, p, &escaped, &size);
    return p == NULL ? NULL : value(s, p, *(int *)depth + 1);
}

static const unsigned char *object(Scan *s, const unsigned char *p,
                                                              int depth) {
    return items(s, p + 1, '}', member, &depth);
}

static const unsigned char *array(Scan *s, const unsigned char *p,
                                                             int depth) {
    return items(s, p + 1, ']', element, &depth);
}

static const unsigned char *value(Scan *s, const unsigned char *p, int depth) {
    const unsigned char *end = s->end;
    if (p >= end || depth > MAX_DEPTH) {
        return NULL;
    }
    int escaped = 0;
    switch (*p) {
    case '"':
        return string(s, p, &escaped);
    case '{':
        return object(s, p, depth);
    case '[':
        return array(s, p, depth);
    case 't':
        return literal(p, end, "true", 4);
    case 'f':
        return literal(p, end, "false", 5);
    case 'n':
        return literal(p, end, "null", 4);
    default:
        return number(s, p);
    }
}

/* An event's type: the bounds of its text (without quotes), NULL until found. */
typedef struct {
    const unsigned char *text;
    Py_ssize_t size;
} Kind;

/* A member of an event: its key written without escapes and, for `type` (once), a
 * non-empty ASCII string without escapes. */
static const unsigned char *event_member(Scan *s, const unsigned char *p, void *context) {
    Kind *kind = context;
    const unsigned char *name = p;
    Py_ssize_t size;
    if ((p = plain_key(s, p, &size)) == NULL) {
        return NULL;
    }
    if (size != 6 || memcmp(name + 1, "type", 4) != 0) {
        return value(s, p, 2);
    }
    const unsigned char *start = p;
    int high = s->high, escaped = 0;
    if (kind->text != NULL || p >= s->end || *p != '"') {
        return NULL;
    }
    s->high = 0;
    p = string(s, p, &escaped);
    if (p == NULL || escaped || s->high || p - start == 2) {
        return NULL;
    }
    s->high = high;
    kind->text = start + 1;
    kind->size = p - start - 2;
    return p;
}

typedef struct {
    const unsigned char *text;
    Py_ssize_t size;
    PyObject *str;
} Cached;

typedef struct {
    int64_t *spans; /* start, end per event */
    PyObject **kinds;  /* borrowed from the cache */
    Py_ssize_t count, room;
    Cached cache[TYPE_CACHE];
    int cached;
} Found;

static void found_free(Found *f) {
    PyMem_Free(f->spans);
    PyMem_Free(f->kinds);
    for (int i = 0; i < f->cached; i++) {
        Py_DECREF(f->cache[i].str);
    }
}

/* 0; 1 when the type cannot be remembered (too many distinct types: not the common
 * body this scan is for); -1 with an exception set (out of memory). */
static int found_add(Found *f, Py_ssize_t start, Py_ssize_t stop, const unsigned char *kind,
                     Py_ssize_t size) {
    if (f->count == f->room) {
        Py_ssize_t room = f->room ? f->room * 2 : 64;
        int64_t *spans = PyMem_Realloc(f->spans, sizeof(int64_t) * 2 * room);
        if (spans == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        f->spans = spans;
        PyObject **kinds = PyMem_Realloc(f->kinds, sizeof(PyObject *) * room);
        if (kinds == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        f->kinds = kinds;
        f->room = room;
    }
    PyObject *str = NULL;
    for (int i = 0; i < f->cached; i++) {
        if (f->cache[i].size == size && memcmp(f->cache[i].text, kind, size) == 0) {
            str = f->cache[i].str;
            break;
        }
    }
    if (str == NULL) {
        if (f->cached == TYPE_CACHE) {
            return 1;
        }
        str = PyUnicode_FromStringAndSize((const char *)kind, size);
        if (str == NULL) {
            return -1;
        }
        f->cache[f->cached++] = (Cached){kind, size, str};
    }
    f->spans[2 * f->count] = start;
    f->spans[2 * f->count + 1] = stop;
    f->kinds[f->count] = str;
    f->count++;
    return 0;
}

/* The envelope's field named by `key` (its quotes included): 0 events, 1 expected_seq,
 * 2 close, -1 another. */
static int field(const unsigned char *key, Py_ssize_t size) {
    if (size == 8 && memcmp(key, "\"events\"", 8) == 0) {
        return 0;
    }
    if (size == 14 && memcmp(key, "\"expected_seq\"", 14) == 0) {
        return 1;
    }
    if (size == 7 && memcmp(key, "\"close\"", 7) == 0) {
        return 2;
    }
    return -1;
}

/* What a walk fills in: the envelope's fields' value bounds (-1 when absent; an NDJSON
 * body has none), the events found, and whether a failure set an exception (out of
 * memory). */
typedef struct {
    const unsigned char *base;
    Py_ssize_t fields[3][2];
    Found *found;
    int error;
} Envelope;

static const unsigned char *event_item(Scan *s, const unsigned char *p, void *context) {
    Envelope *e = context;
    Kind kind = {NULL, 0};
    const unsigned char *first = p;
    if (p >= s->end || *p != '{') {
        return NULL;
    }
    p = items(s, p + 1, '}', event_member, &kind);
    if (p == NULL || kind.text == NULL) {
        return NULL;
    }
    int added = found_add(e->found, first - e->base, p - e->base, kind.text, kind.size);
    e->error = added < 0;
    return added == 0 ? p : NULL;
}

/* A member of the envelope: `events` (a list of events), `expected_seq` or `close`, each
 * once, its key written without escapes. */
static const unsigned char *envelope_member(Scan *s, const unsigned char *p, void *context) {
    Envelope *e = context;
    const unsigned char *name = p;
    Py_ssize_t size;
    p = plain_key(s, p, &size);
    int which = p == NULL ? -1 : field(name, size);
    if (which < 0 || e->fields[which][0] >= 0) {
        return NULL; /* malformed, an unknown field, or one given twice */
    }
    const unsigned char *start = p;
    if (which > 0) {
        p = value(s, p, 1);
    } else if (p < s->end && *p == '[') {
        p = items(s, p + 1, ']', event_item, e);
    } else {
        p = NULL;
    }
    if (p != NULL) {
        e->fields[which][0] = start - e->base;
        e->fields[which][1] = p - e->base;
    }
    return p;
}

/* -1 with an exception; 0: not vouched for; 1: found. */
static int envelope(Scan *s, Envelope *e) {
    const unsigned char *end = s->end;
    const unsigned char *p = skip_space(e->base, end);
    if (p >= end || *p != '{') {
        return 0;
    }
    p = items(s, p + 1, '}', envelope_member, e);
    if (e->error) {
        return -1;
    }
    return p != NULL && e->fields[0][0] >= 0 && skip_space(p, end) == end;
}

static PyObject *bounds(Py_ssize_t field[2]) {
    if (field[0] < 0) {
        Py_RETURN_NONE;
    }
    return Py_BuildValue("(nn)", field[0], field[1]);
}

/* An NDJSON body: an event per line, blank lines (spaces and tabs) between them.
 * -1 with an exception; 0: not vouched for; 1: found. */
static int lines(Scan *s, Envelope *e) {
    const unsigned char *end = s->end;
    const unsigned char *p = e->base;
    while (p < end) {
        p = skip_space(p, end);
        if (p < end && *p != '\n') {
            p = event_item(s, p, e);
            if (p == NULL) {
                return e->error ? -1 : 0;
            }
            p = skip_space(p, end);
            if (p < end && *p != '\n') {
                return 0;
            }
        }
        if (p < end) {
            p++; /* the line's end */
        }
    }
    return 1;
}

/* `walk` over `arg`'s bytes: the events' (types, spans, expected_seq, close, ascii). */
static PyObject *scanned(PyObject *arg, int (*walk)(Scan *, Envelope *)) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    const unsigned char *base = view.buf;
    Scan s = {base + view.len, 0};
    Found f = {0};
    Envelope e = {base, {{-1, -1}, {-1, -1}, {-1, -1}}, &f, 0};
    PyObject *result = NULL;
    int outcome = walk(&s, &e);
    if (outcome == 0) {
        result = Py_NewRef(Py_None);
    } else if (outcome > 0) {
        PyObject *kinds = PyList_New(f.count);
        PyObject *spans = PyBytes_FromStringAndSize((const char *)f.spans,
                                                    sizeof(int64_t) * 2 * f.count);
        PyObject *expected = bounds(e.fields[1]);
        PyObject *close = bounds(e.fields[2]);
        if (kinds != NULL && spans != NULL && expected != NULL && close != NULL) {
            for (Py_ssize_t i = 0; i < f.count; i++) {
                PyList_SET_ITEM(kinds, i, Py_NewRef(f.kinds[i]));
            }
            result = PyTuple_Pack(5, kinds, spans, expected, close, s.high ? Py_False : Py_True);
        }
        Py_XDECREF(kinds);
        Py_XDECREF(spans);
        Py_XDECREF(expected);
        Py_XDECREF(close);
    }
    found_free(&f);
    PyBuffer_Release(&view);
    return result;
}

PyDoc_STRVAR(scan_doc,
"scan(body) -> (types, spans, expected_seq, close, ascii) or None\n\n"
"A `{\"events\": [...]}` body. `types`: each event's type (a list of str); `spans`:\n"
"each event's start and end offsets in `body`, as native signed 64-bit integers\n"
"(bytes); `expected_seq` and `close`: their value's (start, end) in `body`, or None\n"
"where absent; `ascii`: whether `body` is all ASCII (if not, the caller checks it is\n"
"UTF-8). None for a body this scan does not vouch for.");

static PyObject *scan(PyObject *module, PyObject *arg) {
    return scanned(arg, envelope);
}

PyDoc_STRVAR(scan_lines_doc,
"scan_lines(body) -> (types, spans, None, None, ascii) or None\n\n"
"An NDJSON body (an event per line; blank lines of spaces and tabs between), as\n"
"`scan` reads an envelope's events.");

static PyObject *scan_lines(PyObject *module, PyObject *arg) {
    return scanned(arg, lines);
}

/* `body` and its events' `spans`, each checked to lie inside `body`. */
typedef struct {
    Py_buffer body, spans;
    const int64_t *at;
    Py_ssize_t count;
} Texts;

static int texts_open(Texts *t, PyObject *body, PyObject *spans) {
    if (PyObject_GetBuffer(body, &t->body, PyBUF_SIMPLE) < 0) {
        return -1;
    }
    if (PyObject_GetBuffer(spans, &t->spans, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&t->body);
        return -1;
    }
    t->at = t->spans.buf;
    t->count = t->spans.len / (Py_ssize_t)(2 * sizeof(int64_t));
    int bad = t->spans.len % (Py_ssize_t)(2 * sizeof(int64_t)) != 0 ||
              ((uintptr_t)t->spans.buf) % _Alignof(int64_t) != 0;
    for (Py_ssize_t i = 0; !bad && i < t->count; i++) {
        bad = t->at[2 * i] < 0 || t->at[2 * i + 1] < t->at[2 * i] ||
              t->at[2 * i + 1] > t->body.len;
    }
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "spans out of range");
        PyBuffer_Release(&t->spans);
        PyBuffer_Release(&t->body);
        return -1;
    }
    return 0;
}

static void texts_close(Texts *t) {
    PyBuffer_Release(&t->spans);
    PyBuffer_Release(&t->body);
}

/* A str of `size` bytes of UTF-8, made by str's own decoder (which takes ASCII at its
 * fastest): whatever the bytes, never a str whose kind disagrees with its contents. */
static PyObject *text_of(const char *data, Py_ssize_t size) {
    return PyUnicode_DecodeUTF8(data, size, "strict");
}

PyDoc_STRVAR(joined_doc,
"joined(body, spans, start, stop, separator) -> str\n\n"
"The texts of events `start` to `stop` (0 <= start <= stop <= the events' count)\n"
"joined by `separator` (bytes), decoded as UTF-8.");

static PyObject *joined(PyObject *module, PyObject *args) {
    PyObject *body, *spans;
    Py_ssize_t start, stop;
    Py_buffer sep;
    if (!PyArg_ParseTuple(args, "OOnny*", &body, &spans, &start, &stop, &sep)) {
        return NULL;
    }
    Texts t;
    if (texts_open(&t, body, spans) < 0) {
        PyBuffer_Release(&sep);
        return NULL;
    }
    PyObject *result = NULL;
    if (start < 0 || stop < start || stop > t.count) {
        PyErr_SetString(PyExc_IndexError, "start and stop must be 0 <= start <= stop <= count");
        goto done;
    }
    Py_ssize_t size = stop > start ? sep.len * (stop - start - 1) : 0;
    for (Py_ssize_t i = start; i < stop; i++) {
        size += t.at[2 * i + 1] - t.at[2 * i];
    }
    char *buffer = PyMem_Malloc(size ? size : 1);
    if (buffer == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    char *out = buffer;
    const char *data = t.body.buf;
    for (Py_ssize_t i = start; i < stop; i++) {
        if (i > start) {
            memcpy(out, sep.buf, sep.len);
            out += sep.len;
        }
        Py_ssize_t n = t.at[2 * i + 1] - t.at[2 * i];
        memcpy(out, data + t.at[2 * i], n);
        out += n;
    }
    result = text_of(buffer, size);
    PyMem_Free(buffer);
done:
    texts_close(&t);
    PyBuffer_Release(&sep);
    return result;
}

PyDoc_STRVAR(texts_doc,
"texts(body, spans) -> list[str]\n\n"
"Every event's text, decoded as UTF-8.");

static PyObject *texts(PyObject *module, PyObject *args) {
    PyObject *body, *spans;
    Texts t;
    if (!PyArg_ParseTuple(args, "OO", &body, &spans) || texts_open(&t, body, spans) < 0) {
        return NULL;
    }
    PyObject *list = PyList_New(t.count);
    const char *data = t.body.buf;
    for (Py_ssize_t i = 0; list != NULL && i < t.count; i++) {
        PyObject *text = text_of(data + t.at[2 * i], t.at[2 * i + 1] - t.at[2 * i]);
        if (text == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, text);
    }
    texts_close(&t);
    return list;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_O, scan_doc},
    {"scan_lines", scan_lines, METH_O, scan_lines_doc},
    {"joined", joined, METH_VARARGS, joined_doc},
    {"texts", texts, METH_VARARGS, texts_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_scan",
    .m_doc = "The append body's one-pass scan (see _scan.c).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__scan(void) {
    init_tables();
    return PyModule_Create(&module);
}
