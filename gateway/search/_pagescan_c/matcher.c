/* The Matcher type: one session's attachment names, found in an item's strings.

   An Aho-Corasick automaton over all the names, so finding them costs at most one step per
   byte of text whatever the names are (with or without an extension, long, many, sharing
   prefixes or suffixes). Bytes that occur in no name form class 0, which sends every state to
   the root; the root skips them in a tight loop. The shallow states, where ordinary text spends
   its time, have a full row of transitions (a step is one load); the deeper ones keep their trie
   edges (most have one) and a failure link. Where a state's next states follow one name (each
   the first child of the one before, none ending a name: a run), text that follows the name is
   compared with its bytes eight at a time instead of stepped through; text that keeps leaving
   the name puts these compares off, so it costs a step per byte as before. Reporting walks a
   state's chain of suffixes that end names and stops at the first name already found in the
   item (everything after it was found with it), so each name costs once per item. Items with
   many bytes are matched without the GIL.

   At the root, where ordinary text spends most of its bytes, the next place a name may start
   is looked for sixteen bytes at a time where the processor has SSSE3: a position qualifies
   when its byte and the next two may be the first three of a name (names in up to eight
   buckets by first byte, each byte's bucket set read from two nibble tables, as Hyperscan's
   Teddy does). A position it passes over cannot start a name: from the root, the automaton
   would go back to it within three steps, reporting nothing. What it lets through the
   automaton reads as before.

   Where the names allow it (at most six lengths start with any one byte), an item's strings are
   probed instead: at each place the lead filter lets through, the names of each length starting
   with its byte are looked up in a hash table of them; text that keeps the probes busy is left
   to the automaton.

   This file is the type; automaton.c builds and walks the automaton, probe.c holds the lead
   filter and the probing table, attach.c finds and writes an item's attachments (matching.h
   is what they share). */

#include "matching.h"

void marks_free(Marks *marks) {
    PyMem_RawFree(marks->names);
    PyMem_RawFree(marks->uris);
    PyMem_RawFree(marks->hits);
    marks->names = marks->uris = NULL;
    marks->hits = NULL;
}

int marks_alloc(Marks *marks, Py_ssize_t n_names, Py_ssize_t n_uris) {
    marks->names = PyMem_RawCalloc((size_t)(n_names ? n_names : 1), sizeof(uint64_t));
    marks->uris = PyMem_RawCalloc((size_t)(n_uris ? n_uris : 1), sizeof(uint64_t));
    /* a name is listed at most once by probing and once by the automaton (`probe_names`) */
    marks->hits = PyMem_RawCalloc((size_t)(n_names ? 2 * n_names : 1), sizeof(Py_ssize_t));
    if (!marks->names || !marks->uris || !marks->hits) {
        marks_free(marks);
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void Matcher_dealloc(Matcher *self) {
    PyMem_RawFree(self->states);
    PyMem_RawFree(self->delta);
    PyMem_RawFree(self->pair);
    PyMem_RawFree(self->pair_cols);
    PyMem_RawFree(self->edge_cls);
    PyMem_RawFree(self->edge_next);
    PyMem_RawFree(self->into);
    PyMem_RawFree(self->runs);
    PyMem_RawFree(self->slots);
    PyMem_RawFree(self->slot_more);
    PyMem_RawFree(self->chained);
    PyMem_RawFree(self->name_bytes);
    PyMem_RawFree(self->lens);
    marks_free(&self->own);
    PyMem_RawFree(self->entry_first);
    PyMem_RawFree(self->entry_uri);
    PyMem_RawFree(self->entry_json);
    PyMem_RawFree(self->json);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Matcher_init(Matcher *self, PyObject *args, PyObject *kwds) {
    PyObject *names, *entries;
    int probe = 1;
    static char *kwlist[] = {"names", "entries", "probe", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!|p", kwlist, &PyList_Type, &names,
                                     &PyList_Type, &entries, &probe))
        return -1;
    Py_ssize_t n = PyList_GET_SIZE(names);
    if (PyList_GET_SIZE(entries) != n) {
        PyErr_SetString(PyExc_ValueError, "names and entries differ in length");
        return -1;
    }
    if (self->states || self->entry_first) {
        PyErr_SetString(PyExc_RuntimeError, "a Matcher is initialised once");
        return -1;
    }
    NameBytes *live = PyMem_RawCalloc((size_t)(n ? n : 1), sizeof(NameBytes));
    Buf copy = {0};
    if (!live) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t max_uri = -1, n_live = 0, n_entries = 0, json_bytes = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *entry = PyList_GET_ITEM(entries, k);
        if (!PyList_Check(entry)) continue; /* refused below */
        n_entries += PyList_GET_SIZE(entry);
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(entry); j++) {
            PyObject *pair = PyList_GET_ITEM(entry, j);
            if (PyTuple_Check(pair) && PyTuple_GET_SIZE(pair) == 2 &&
                PyBytes_Check(PyTuple_GET_ITEM(pair, 1)))
                json_bytes += PyBytes_GET_SIZE(PyTuple_GET_ITEM(pair, 1));
        }
    }
    self->entry_first = PyMem_RawMalloc((size_t)(n + 1) * sizeof(Py_ssize_t));
    self->entry_uri = PyMem_RawMalloc((size_t)(n_entries ? n_entries : 1) * sizeof(Py_ssize_t));
    self->entry_json = PyMem_RawMalloc((size_t)(n_entries + 1) * sizeof(Py_ssize_t));
    self->json = PyMem_RawMalloc((size_t)(json_bytes ? json_bytes : 1));
    if (!self->entry_first || !self->entry_uri || !self->entry_json || !self->json) {
        PyErr_NoMemory();
        goto error;
    }
    Py_ssize_t at_entry = 0, at_json = 0;
    self->entry_json[0] = self->entry_first[0] = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *name = PyList_GET_ITEM(names, k);
        PyObject *entry = PyList_GET_ITEM(entries, k);
        if (!PyUnicode_Check(name) || !PyList_Check(entry)) {
            PyErr_SetString(PyExc_TypeError, "names are str, entries are lists");
            goto error;
        }
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(entry); j++) {
            PyObject *pair = PyList_GET_ITEM(entry, j);
            if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 ||
                !PyLong_Check(PyTuple_GET_ITEM(pair, 0)) || !PyBytes_Check(PyTuple_GET_ITEM(pair, 1))) {
                PyErr_SetString(PyExc_TypeError, "an entry is a (uri number, json bytes) pair");
                goto error;
            }
            Py_ssize_t uri = PyLong_AsSsize_t(PyTuple_GET_ITEM(pair, 0));
            if (uri < 0) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "uri numbers are >= 0");
                goto error;
            }
            if (uri > max_uri) max_uri = uri;
            PyObject *json = PyTuple_GET_ITEM(pair, 1);
            Py_ssize_t size = PyBytes_GET_SIZE(json);
            if (at_entry >= n_entries || at_json + size > json_bytes) {
                PyErr_SetString(PyExc_RuntimeError, "entries changed while read");
                goto error;
            }
            self->entry_uri[at_entry] = uri;
            memcpy(self->json + at_json, PyBytes_AS_STRING(json), (size_t)size);
            at_json += size;
            self->entry_json[++at_entry] = at_json;
        }
        Py_ssize_t len;
        self->entry_first[k + 1] = at_entry;
        const char *utf8 = PyUnicode_AsUTF8AndSize(name, &len);
        if (!utf8) goto error;
        /* an empty name, or one holding NUL (which never reaches a string), never matches */
        if (len == 0 || memchr(utf8, 0, (size_t)len)) continue;
        live[n_live].len = len;
        live[n_live].index = k;
        live[n_live].bytes = (const unsigned char *)(uintptr_t)copy.len; /* offset until copied */
        n_live++;
        if (buf_put(&copy, utf8, len) < 0) goto error;
    }
    self->min_len = PY_SSIZE_T_MAX;
    for (Py_ssize_t k = 0; k < n_live; k++) {
        live[k].bytes = (const unsigned char *)copy.data + (uintptr_t)live[k].bytes;
        if (live[k].len < self->min_len) self->min_len = live[k].len;
    }
    self->n_names = n;
    self->n_uris = max_uri + 1;
    if (marks_alloc(&self->own, n, self->n_uris) < 0) goto error;
    int built;
    if (copy.len >= NOGIL_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        built = build_automaton(self, live, n_live, probe);
        Py_END_ALLOW_THREADS
    } else {
        built = build_automaton(self, live, n_live, probe);
    }
    if (built == -2) {
        PyErr_SetString(PyExc_ValueError, "too many name bytes for one matcher");
        goto error;
    }
    if (built < 0) {
        PyErr_NoMemory();
        goto error;
    }
    buf_free(&copy);
    PyMem_RawFree(live);
    return 0;
error:
    buf_free(&copy);
    PyMem_RawFree(live);
    return -1;
}

static PyObject *Matcher_probing(Matcher *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(self->probe);
}

static PyObject *Matcher_handed_over(Matcher *self, void *closure) {
    (void)closure;
    return PyLong_FromUnsignedLongLong(__atomic_load_n(&self->handed_over, __ATOMIC_RELAXED));
}

static PyObject *Matcher_busy(Matcher *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(self->busy);
}

static PyObject *Matcher_spare_marks(Matcher *self, void *closure) {
    (void)closure;
    return PyLong_FromUnsignedLongLong(self->spare_marks);
}

static PyObject *Matcher_build_steps(Matcher *self, void *closure) {
    (void)closure;
    return PyLong_FromUnsignedLongLong(self->build_steps);
}

static PyObject *Matcher_pair_rows(Matcher *self, void *closure) {
    (void)closure;
    return PyLong_FromUnsignedLong(self->n_pair_rows);
}

static PyGetSetDef Matcher_getset[] = {
    {"probing", (getter)Matcher_probing, NULL,
     "Whether names are found by probing their hash table (else by the automaton alone).", NULL},
    {"pair_rows", (getter)Matcher_pair_rows, NULL,
     "How many states the automaton steps from two bytes at a time (0: names of many bytes).",
     NULL},
    {"handed_over", (getter)Matcher_handed_over, NULL,
     "How many strings probing has left to the automaton so far (text that kept it busy).",
     NULL},
    {"spare_marks", (getter)Matcher_spare_marks, NULL,
     "Mark sets made for renders that found the matcher's own in use (one a render).", NULL},
    {"busy", (getter)Matcher_busy, NULL, "Whether a render holds the matcher's own marks.", NULL},
    {"build_steps", (getter)Matcher_build_steps, NULL,
     "Hash table slots read while the probing table was built (a slot or two a name).", NULL},
    {NULL}};

PyTypeObject MatcherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gateway.search._pagescan.Matcher",
    .tp_basicsize = sizeof(Matcher),
    .tp_dealloc = (destructor)Matcher_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Matcher(names, entries, probe=True): one session's attachment names.",
    .tp_getset = Matcher_getset,
    .tp_init = (initproc)Matcher_init,
    .tp_new = PyType_GenericNew,
};

