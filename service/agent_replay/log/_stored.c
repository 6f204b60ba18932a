/* A run's token as the log stores it (agent_replay.log.chunks.stored_one), in C.
 *
 * An in-process producer hands the log one parsed object per append (a token of
 * a run), and each is checked and encoded on the event loop, one at a time: the
 * Python of it (three lookups, the checks of the type and ids, the call to
 * orjson, the tuple) was the largest single part of such an append's own CPU.
 *
 * It only ever says "yes, exactly this" or "not for me", as `_scan.c` does: an
 * object whose type is a non-empty ASCII string without NUL, whose ids are such
 * strings or absent or null, and which orjson encodes, gets its StoredChunk;
 * anything else gets None, and the caller takes `stored`, which repairs what a
 * text column cannot hold or names what is wrong.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static PyObject *dumps;  /* orjson.dumps */
static PyObject *key_type, *key_message, *key_tool;

/* Whether a text column holds `s` as it is: ASCII, no NUL. */
static int plain(PyObject *s) {
    return PyUnicode_IS_ASCII(s) &&
           memchr(PyUnicode_1BYTE_DATA(s), 0, (size_t)PyUnicode_GET_LENGTH(s)) == NULL;
}

/* `value[key]` as the stored column when it needs no repair (a new reference: the str,
 * or None when absent or null); 0 when it would need one (not vouched for); -1 on error. */
static int plain_id(PyObject *value, PyObject *key, PyObject **id) {
    PyObject *found = PyDict_GetItemWithError(value, key);
    if (found == NULL) {
        if (PyErr_Occurred()) {
            return -1;
        }
        found = Py_None;
    } else if (found != Py_None && !(PyUnicode_CheckExact(found) && plain(found))) {
        return 0;
    }
    *id = Py_NewRef(found);
    return 1;
}

/* `value` stored (a new reference), or None (a new reference too) when not vouched for. */
static PyObject *vouched(PyObject *value, PyTypeObject *cls) {
    if (!PyDict_CheckExact(value)) {
        Py_RETURN_NONE;
    }
    PyObject *kind = PyDict_GetItemWithError(value, key_type);
    if (kind == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    if (!PyUnicode_CheckExact(kind) || PyUnicode_GET_LENGTH(kind) == 0 || !plain(kind)) {
        Py_RETURN_NONE;
    }
    Py_INCREF(kind);  /* held across the calls below, which may run Python code */
    PyObject *message = NULL, *tool = NULL, *encoded = NULL, *text = NULL, *chunk = NULL;
    int ok = plain_id(value, key_message, &message);
    if (ok == 1) {
        ok = plain_id(value, key_tool, &tool);
    }
    if (ok == 1) {
        encoded = PyObject_CallOneArg(dumps, value);
        if (encoded == NULL) {
            /* orjson's JSONEncodeError is a TypeError: a lone surrogate, a huge integer,
             * a value JSON has no form for. `stored` decides. */
            ok = PyErr_ExceptionMatches(PyExc_TypeError) ? 0 : -1;
            if (ok == 0) {
                PyErr_Clear();
            }
        }
    }
    if (ok == 1) {
        text = PyUnicode_DecodeUTF8(PyBytes_AS_STRING(encoded), PyBytes_GET_SIZE(encoded),
                                    "strict");
        ok = text == NULL ? -1 : 1;
    }
    if (ok == 1) {
        chunk = cls->tp_alloc(cls, 4);
        if (chunk == NULL) {
            ok = -1;
        } else {
            PyTuple_SET_ITEM(chunk, 0, Py_NewRef(kind));
            PyTuple_SET_ITEM(chunk, 1, Py_NewRef(text));
            PyTuple_SET_ITEM(chunk, 2, Py_NewRef(message));
            PyTuple_SET_ITEM(chunk, 3, Py_NewRef(tool));
        }
    }
    Py_DECREF(kind);
    Py_XDECREF(message);
    Py_XDECREF(tool);
    Py_XDECREF(encoded);
    Py_XDECREF(text);
    if (ok < 0) {
        return NULL;
    }
    if (ok == 0) {
        Py_RETURN_NONE;
    }
    return chunk;
}

PyDoc_STRVAR(one_doc,
"one(value, StoredChunk) -> StoredChunk | None\n\n"
"`value` stored, when it is an object needing no repair that orjson encodes; else None.");

static PyObject *one(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyType_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "one(value, StoredChunk)");
        return NULL;
    }
    return vouched(args[0], (PyTypeObject *)args[1]);
}

PyDoc_STRVAR(token_doc,
"token(StoredChunk, chunks) -> list[StoredChunk] | None\n\n"
"A list of one object `one` vouches for, as a new list of its StoredChunk; else None.");

/* The append of one token as an in-process producer makes it (a list of one object),
 * checked and stored in one call: the Python that told that shape apart and wrapped
 * `one`'s answer in a list cost about what `one` does. */
static PyObject *token(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    /* The class first: bound once (functools.partial), the chunks are the one argument. */
    if (nargs != 2 || !PyType_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "token(StoredChunk, chunks)");
        return NULL;
    }
    PyObject *chunks = args[1];
    if (!PyList_CheckExact(chunks) || PyList_GET_SIZE(chunks) != 1) {
        Py_RETURN_NONE;
    }
    /* Held: `one` may run Python code (orjson's default hooks never, but a dict's
     * lookups may), which could empty the list. */
    PyObject *value = Py_NewRef(PyList_GET_ITEM(chunks, 0));
    PyObject *chunk = vouched(value, (PyTypeObject *)args[0]);
    Py_DECREF(value);
    if (chunk == NULL || chunk == Py_None) {
        return chunk;
    }
    PyObject *list = PyList_New(1);
    if (list == NULL) {
        Py_DECREF(chunk);
        return NULL;
    }
    PyList_SET_ITEM(list, 0, chunk);
    return list;
}

static PyMethodDef methods[] = {
    {"one", (PyCFunction)(void (*)(void))one, METH_FASTCALL, one_doc},
    {"token", (PyCFunction)(void (*)(void))token, METH_FASTCALL, token_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_stored",
    .m_doc = "A run's token as the log stores it (see _stored.c).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__stored(void) {
    PyObject *orjson = PyImport_ImportModule("orjson");
    if (orjson == NULL) {
        return NULL;
    }
    dumps = PyObject_GetAttrString(orjson, "dumps");
    Py_DECREF(orjson);
    key_type = PyUnicode_InternFromString("type");
    key_message = PyUnicode_InternFromString("messageId");
    key_tool = PyUnicode_InternFromString("toolCallId");
    if (dumps == NULL || key_type == NULL || key_message == NULL || key_tool == NULL) {
        return NULL;
    }
    return PyModule_Create(&module);
}
