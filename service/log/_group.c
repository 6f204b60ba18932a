/* A commit lane's two loops over a group of single chunks, in C
 * (service.log.request: `settle`, `ones_columns`).
 *
 * A busy log's commonest group holds one token of each of many runs, and the
 * lane walks it twice in Python per commit: to lay its rows out as
 * `append_ones`' columns, and to settle each append from the statement's
 * answer. Both loops did a few lookups and a tuple or two per append; together
 * they were the largest part of the lane's own Python per event. Each does
 * here exactly what its Python twin in request.py does (the tests hold them
 * to each other), and the twin runs where this is not built.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *key_chunks, *key_close;
static PyObject *separator, *null_value; /* "\x1e", "\x1f" */

/* Seqs are bigints: one past the largest (which no statement answers, as `runs.last_seq`
 * cannot hold it) is an OverflowError here where the twin would go on. */
PyDoc_STRVAR(settle_doc,
"settle(appends, bases, AppendResult) -> (hints, results, committed, refused)\n\n"
"request.settle's loop: each applied run's appends numbered from its base.");

/* One run's appends numbered from `base`: their results and the run's hint appended. */
static int settle_run(PyObject *run, PyObject *items, long long base, PyTypeObject *cls,
                      PyObject *results, PyObject *hints, long long *committed) {
    if (!PyList_Check(items) || PyList_GET_SIZE(items) == 0) {
        PyErr_SetString(PyExc_TypeError, "a run's appends must be a non-empty list");
        return -1;
    }
    long long start = base;
    Py_ssize_t n = PyList_GET_SIZE(items);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(items, i);
        PyObject *chunks = PyObject_GetAttr(item, key_chunks);
        if (chunks == NULL) {
            return -1;
        }
        Py_ssize_t count = PyObject_Size(chunks);
        Py_DECREF(chunks);
        long long last;
        if (count < 0) {
            return -1;
        }
        if (__builtin_add_overflow(base, (long long)count, &last)) {
            PyErr_SetString(PyExc_OverflowError, "a seq past the largest bigint");
            return -1;
        }
        PyObject *first = count ? PyLong_FromLongLong(base + 1) : Py_NewRef(Py_None);
        PyObject *last_seq = PyLong_FromLongLong(last);
        /* An AppendResult made as tuple.__new__ makes one (the twin's way): allocated
         * for three items, each set before anything else is allocated. */
        PyObject *answer = (first && last_seq) ? cls->tp_alloc(cls, 3) : NULL;
        if (answer == NULL) {
            Py_XDECREF(first);
            Py_XDECREF(last_seq);
            return -1;
        }
        PyTuple_SET_ITEM(answer, 0, Py_NewRef(run));
        PyTuple_SET_ITEM(answer, 1, first);
        PyTuple_SET_ITEM(answer, 2, last_seq);
        PyObject *pair = PyTuple_Pack(2, item, answer);
        Py_DECREF(answer);
        if (pair == NULL || PyList_Append(results, pair) < 0) {
            Py_XDECREF(pair);
            return -1;
        }
        Py_DECREF(pair);
        base = last;
    }
    *committed += base - start;
    PyObject *close = PyObject_GetAttr(PyList_GET_ITEM(items, n - 1), key_close);
    PyObject *last_seq = PyLong_FromLongLong(base);
    PyObject *hint = (close && last_seq) ? PyTuple_Pack(3, run, last_seq, close) : NULL;
    Py_XDECREF(close);
    Py_XDECREF(last_seq);
    if (hint == NULL || PyList_Append(hints, hint) < 0) {
        Py_XDECREF(hint);
        return -1;
    }
    Py_DECREF(hint);
    return 0;
}

static PyObject *settle(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyDict_Check(args[0]) || !PyDict_Check(args[1]) ||
        !PyType_Check(args[2]) || !PyType_IsSubtype((PyTypeObject *)args[2], &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "settle(appends: dict, bases: dict, AppendResult)");
        return NULL;
    }
    PyObject *appends = args[0], *bases = args[1];
    PyTypeObject *cls = (PyTypeObject *)args[2];
    PyObject *hints = PyList_New(0), *results = PyList_New(0), *refused = PyDict_New();
    long long committed = 0;
    if (hints == NULL || results == NULL || refused == NULL) {
        goto fail;
    }
    Py_ssize_t pos = 0;
    PyObject *run, *items;
    while (PyDict_Next(appends, &pos, &run, &items)) {
        PyObject *found = PyDict_GetItemWithError(bases, run);
        if (found == NULL) {
            if (PyErr_Occurred() || PyDict_SetItem(refused, run, items) < 0) {
                goto fail;
            }
            continue;
        }
        long long base = PyLong_AsLongLong(found);
        if ((base == -1 && PyErr_Occurred()) ||
            settle_run(run, items, base, cls, results, hints, &committed) < 0) {
            goto fail;
        }
    }
    return Py_BuildValue("(NNLN)", hints, results, committed, refused);
fail:
    Py_XDECREF(hints);
    Py_XDECREF(results);
    Py_XDECREF(refused);
    return NULL;
}

PyDoc_STRVAR(ones_columns_doc,
"ones_columns(rows) -> (run_ids, types, chunks, message_ids, tool_call_ids) | None\n\n"
"request.ones_columns: append_ones' columns of these one-event rows, or None where a\n"
"value holds the separator (or an id the null).");

/* The fields of an `EventRow` the columns take, in order; the last two may be null. */
static const Py_ssize_t FIELDS[5] = {0, 2, 3, 4, 5};

/* 1 when `value` may stand in column `column` as it is, 0 when it holds a separator
 * there, -1 on error (not a str where one must be). */
static int fits(PyObject *value, int column) {
    if (!PyUnicode_Check(value)) {
        PyErr_SetString(PyExc_TypeError, "a row's columns must be str (the ids or None)");
        return -1;
    }
    Py_ssize_t length = PyUnicode_GET_LENGTH(value);
    for (Py_UCS4 mark = 0x1e; mark <= (column >= 3 ? 0x1f : 0x1e); mark++) {
        Py_ssize_t at = PyUnicode_FindChar(value, mark, 0, length, 1);
        if (at == -2) {
            return -1;
        }
        if (at >= 0) {
            return 0;
        }
    }
    return 1;
}

static PyObject *ones_columns(PyObject *module, PyObject *rows) {
    if (!PyList_Check(rows)) {
        PyErr_SetString(PyExc_TypeError, "ones_columns(rows: list)");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(rows);
    PyObject *columns[5] = {NULL, NULL, NULL, NULL, NULL};
    PyObject *joined = NULL;
    int fit = 1;
    for (int c = 0; c < 5; c++) {
        if ((columns[c] = PyList_New(n)) == NULL) {
            goto done;
        }
    }
    for (Py_ssize_t i = 0; i < n && fit == 1; i++) {
        PyObject *row = PyList_GET_ITEM(rows, i);
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 7) {
            PyErr_SetString(PyExc_TypeError, "a row must be a tuple of 7");
            goto done;
        }
        for (int c = 0; c < 5 && fit == 1; c++) {
            PyObject *value = PyTuple_GET_ITEM(row, FIELDS[c]);
            if (value == Py_None && c >= 3) {
                value = null_value;
            } else if ((fit = fits(value, c)) < 0) {
                goto done;
            }
            PyList_SET_ITEM(columns[c], i, Py_NewRef(value));
        }
    }
    if (fit == 0) {
        joined = Py_NewRef(Py_None);
        goto done;
    }
    if ((joined = PyTuple_New(5)) == NULL) {
        goto done;
    }
    for (int c = 0; c < 5; c++) {
        PyObject *text = PyUnicode_Join(separator, columns[c]);
        if (text == NULL) {
            Py_CLEAR(joined);
            goto done;
        }
        PyTuple_SET_ITEM(joined, c, text);
    }
done:
    /* A list left part-filled when a row did not fit holds NULLs its dealloc skips. */
    for (int c = 0; c < 5; c++) {
        Py_XDECREF(columns[c]);
    }
    return joined;
}

static PyMethodDef methods[] = {
    {"settle", (PyCFunction)(void (*)(void))settle, METH_FASTCALL, settle_doc},
    {"ones_columns", ones_columns, METH_O, ones_columns_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_group",
    .m_doc = "A commit lane's loops over a group of single chunks (see _group.c).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__group(void) {
    key_chunks = PyUnicode_InternFromString("chunks");
    key_close = PyUnicode_InternFromString("close");
    separator = PyUnicode_FromString("\x1e");
    null_value = PyUnicode_FromString("\x1f");
    if (key_chunks == NULL || key_close == NULL || separator == NULL || null_value == NULL) {
        return NULL;
    }
    return PyModule_Create(&module);
}
