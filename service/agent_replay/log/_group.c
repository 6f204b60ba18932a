/* A commit lane's loops over a group of single chunks, in C
 * (agent_replay.log.request: `take`, `Group.of`'s, `settle`, `ones_columns`).
 *
 * A busy log's commonest group holds one token of each of many runs, and the
 * lane walks it four times in Python per commit: to take it from the queue,
 * to make each run's row and share, to lay the rows out as `append_ones`'
 * columns, and to settle each append from the statement's answer. Each loop did
 * a few lookups and a tuple or two per append; together they were the largest
 * part of the lane's own Python per event. Each does here exactly what its
 * Python twin in request.py does (the tests hold them to each other), and the
 * twin runs where this is not built.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *key_chunks, *key_close;
static PyObject *key_future, *key_run_id, *key_expected, *key_producer, *key_created, *key_done;
static PyObject *one; /* the int 1: a single chunk's ord and count */
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

PyDoc_STRVAR(take_doc,
"take(queue, blocked, max_events) -> (group, kept, kept_size)\n\n"
"request.take: the appends a lane takes from the queue, by run, and those it leaves.");

/* An append's attributes `take` reads, as new references. */
typedef struct {
    PyObject *run, *chunks, *expected, *producer, *created, *close;
} Fields;

static void fields_clear(Fields *f) {
    Py_CLEAR(f->run);
    Py_CLEAR(f->chunks);
    Py_CLEAR(f->expected);
    Py_CLEAR(f->producer);
    Py_CLEAR(f->created);
    Py_CLEAR(f->close);
}

static int fields_of(PyObject *item, Fields *f) {
    f->run = PyObject_GetAttr(item, key_run_id);
    f->chunks = f->run ? PyObject_GetAttr(item, key_chunks) : NULL;
    f->expected = f->chunks ? PyObject_GetAttr(item, key_expected) : NULL;
    f->producer = f->expected ? PyObject_GetAttr(item, key_producer) : NULL;
    f->created = f->producer ? PyObject_GetAttr(item, key_created) : NULL;
    f->close = f->created ? PyObject_GetAttr(item, key_close) : NULL;
    return f->close ? 0 : -1;
}

/* Whether `item`'s producer stopped waiting (its future is done): 1, 0, or -1. */
static int withdrawn(PyObject *item) {
    PyObject *future = PyObject_GetAttr(item, key_future);
    if (future == NULL) {
        return -1;
    }
    PyObject *done = PyObject_CallMethodNoArgs(future, key_done);
    Py_DECREF(future);
    if (done == NULL) {
        return -1;
    }
    int truth = PyObject_IsTrue(done);
    Py_DECREF(done);
    return truth;
}

/* 1 when `item` must wait for a later group, 0 when it joins this one, -1 on error. */
static int kept_back(PyObject *group, PyObject *blocked, Fields *f, Py_ssize_t count,
                     Py_ssize_t size, Py_ssize_t max_events) {
    int in = PySet_Contains(blocked, f->run);
    if (in != 0) {
        return in;
    }
    if (size && size + count > max_events) {
        return 1;
    }
    PyObject *taken = PyDict_GetItemWithError(group, f->run);
    if (taken == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    if (f->expected != Py_None || f->producer != Py_None) {
        return 1;
    }
    PyObject *head = PyObject_GetAttr(PyList_GET_ITEM(taken, 0), key_created);
    if (head == NULL) {
        return -1;
    }
    int other = PyObject_RichCompareBool(f->created, head, Py_NE);
    Py_DECREF(head);
    return other;
}

static PyObject *take(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    /* `blocked` is added to: a set, not a frozenset. */
    if (nargs != 3 || !PySet_Check(args[1]) || !PyLong_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "take(queue, blocked: set, max_events: int)");
        return NULL;
    }
    PyObject *blocked = args[1];
    Py_ssize_t max_events = PyLong_AsSsize_t(args[2]);
    if (max_events == -1 && PyErr_Occurred()) {
        return NULL;
    }
    PyObject *group = PyDict_New(), *kept = PyList_New(0);
    PyObject *iter = (group && kept) ? PyObject_GetIter(args[0]) : NULL;
    PyObject *item = NULL;
    Fields f = {NULL, NULL, NULL, NULL, NULL, NULL};
    Py_ssize_t size = 0, kept_size = 0;
    if (iter == NULL) {
        goto fail;
    }
    while ((item = PyIter_Next(iter)) != NULL) {
        int gone = withdrawn(item);
        if (gone != 0) {
            if (gone < 0) {
                goto fail;
            }
            Py_CLEAR(item);
            continue; /* its producer stopped waiting (timed out): never stored */
        }
        if (fields_of(item, &f) < 0) {
            goto fail;
        }
        Py_ssize_t count = PyObject_Size(f.chunks);
        int keep = count < 0 ? -1 : kept_back(group, blocked, &f, count, size, max_events);
        if (keep < 0) {
            goto fail;
        }
        if (keep) {
            if (PyList_Append(kept, item) < 0 || PySet_Add(blocked, f.run) < 0) {
                goto fail;
            }
            kept_size += count;
        } else {
            PyObject *taken = PyDict_GetItemWithError(group, f.run);
            if (taken == NULL) {
                PyObject *fresh = PyErr_Occurred() ? NULL : PyList_New(1);
                if (fresh == NULL) {
                    goto fail;
                }
                PyList_SET_ITEM(fresh, 0, Py_NewRef(item));
                int set = PyDict_SetItem(group, f.run, fresh);
                Py_DECREF(fresh);
                if (set < 0) {
                    goto fail;
                }
            } else if (PyList_Append(taken, item) < 0) {
                goto fail;
            }
            size += count;
            /* `Pending.ends_group`: a later append of the run may not join this one's. */
            int closes = PyObject_IsTrue(f.close);
            if (closes < 0) {
                goto fail;
            }
            if ((f.expected != Py_None || closes || f.producer != Py_None) &&
                PySet_Add(blocked, f.run) < 0) {
                goto fail;
            }
        }
        fields_clear(&f);
        Py_CLEAR(item);
    }
    if (PyErr_Occurred()) {
        goto fail;
    }
    Py_DECREF(iter);
    return Py_BuildValue("(NNn)", group, kept, kept_size);
fail:
    fields_clear(&f);
    Py_XDECREF(item);
    Py_XDECREF(iter);
    Py_XDECREF(group);
    Py_XDECREF(kept);
    return NULL;
}

PyDoc_STRVAR(ones_doc,
"ones(appends, rows, shares, one_share, summarized, rest) -> events\n\n"
"Group.of's loop: a row and `one_share` for each run's lone plain chunk, `rest(run,\n"
"items)` for every other run, in order; returns the rows made here.");

/* The run's lone chunk when its one append is a token with nothing to record (no
 * close, expected seq, run life or producer; a type not summarized), as a new
 * reference; NULL with no error set when it is not; NULL with one on error. */
static PyObject *lone_token(PyObject *items, PyObject *summarized) {
    if (!PyList_CheckExact(items) || PyList_GET_SIZE(items) != 1) {
        return NULL;
    }
    PyObject *item = PyList_GET_ITEM(items, 0);
    PyObject *chunk = NULL;
    Fields f = {NULL, NULL, NULL, NULL, NULL, NULL};
    f.chunks = PyObject_GetAttr(item, key_chunks);
    f.close = f.chunks ? PyObject_GetAttr(item, key_close) : NULL;
    f.created = f.close ? PyObject_GetAttr(item, key_created) : NULL;
    f.producer = f.created ? PyObject_GetAttr(item, key_producer) : NULL;
    f.expected = f.producer ? PyObject_GetAttr(item, key_expected) : NULL;
    if (f.expected != NULL && PyList_CheckExact(f.chunks) && PyList_GET_SIZE(f.chunks) == 1 &&
        f.close == Py_False && f.created == Py_None && f.producer == Py_None &&
        f.expected == Py_None) {
        PyObject *first = PyList_GET_ITEM(f.chunks, 0);
        if (PyTuple_Check(first) && PyTuple_GET_SIZE(first) == 4) {
            int summary = PySet_Contains(summarized, PyTuple_GET_ITEM(first, 0));
            if (summary == 0) {
                chunk = Py_NewRef(first);
            }
        }
    }
    fields_clear(&f);
    return chunk;
}

static PyObject *ones(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyDict_Check(args[0]) || !PyList_Check(args[1]) ||
        !PyDict_Check(args[2]) || !PyAnySet_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError,
                        "ones(appends: dict, rows: list, shares: dict, one_share, "
                        "summarized: frozenset, rest)");
        return NULL;
    }
    PyObject *appends = args[0], *rows = args[1], *shares = args[2], *share = args[3];
    PyObject *summarized = args[4], *rest = args[5];
    Py_ssize_t pos = 0, made = 0;
    PyObject *run, *items;
    while (PyDict_Next(appends, &pos, &run, &items)) {
        PyObject *chunk = lone_token(items, summarized);
        if (chunk == NULL) {
            if (PyErr_Occurred()) {
                return NULL;
            }
            /* Held across the call: it runs Python code. */
            Py_INCREF(run);
            Py_INCREF(items);
            PyObject *done = PyObject_CallFunctionObjArgs(rest, run, items, NULL);
            Py_DECREF(run);
            Py_DECREF(items);
            if (done == NULL) {
                return NULL;
            }
            Py_DECREF(done);
            continue;
        }
        /* (run_id, ord, type, chunk, message_id, tool_call_id, n), as EventRows has it. */
        PyObject *row = PyTuple_Pack(7, run, one, PyTuple_GET_ITEM(chunk, 0),
                                     PyTuple_GET_ITEM(chunk, 1), PyTuple_GET_ITEM(chunk, 2),
                                     PyTuple_GET_ITEM(chunk, 3), one);
        Py_DECREF(chunk);
        if (row == NULL || PyList_Append(rows, row) < 0) {
            Py_XDECREF(row);
            return NULL;
        }
        Py_DECREF(row);
        if (PyDict_SetItem(shares, run, share) < 0) {
            return NULL;
        }
        made++;
    }
    return PyLong_FromSsize_t(made);
}

static PyMethodDef methods[] = {
    {"take", (PyCFunction)(void (*)(void))take, METH_FASTCALL, take_doc},
    {"ones", (PyCFunction)(void (*)(void))ones, METH_FASTCALL, ones_doc},
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
    key_future = PyUnicode_InternFromString("future");
    key_run_id = PyUnicode_InternFromString("run_id");
    key_expected = PyUnicode_InternFromString("expected_seq");
    key_producer = PyUnicode_InternFromString("producer");
    key_created = PyUnicode_InternFromString("created_at");
    key_done = PyUnicode_InternFromString("done");
    one = PyLong_FromLong(1);
    separator = PyUnicode_FromString("\x1e");
    null_value = PyUnicode_FromString("\x1f");
    if (key_chunks == NULL || key_close == NULL || key_future == NULL || key_run_id == NULL ||
        key_expected == NULL || key_producer == NULL || key_created == NULL ||
        key_done == NULL || one == NULL || separator == NULL || null_value == NULL) {
        return NULL;
    }
    return PyModule_Create(&module);
}
