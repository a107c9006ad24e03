/* The Matcher type: one session's attachment names, found in an item's strings. */

#include "pagescan.h"

/* Do text[0:n] (ASCII, lower-cased on the way when `fold`) and want[0:n] hold the same bytes? */
static inline int same_name(const unsigned char *text, const unsigned char *want, Py_ssize_t n,
                            int fold) {
    if (!fold) return memcmp(text, want, (size_t)n) == 0;
    for (Py_ssize_t q = 0; q < n; q++) {
        if (LOWER[text[q]] != want[q]) return 0;
    }
    return 1;
}

static void Matcher_dealloc(Matcher *self) {
    for (Py_ssize_t k = 0; k < self->n_exts; k++) PyMem_Free(self->exts[k].lengths);
    PyMem_Free(self->exts);
    PyMem_Free(self->names);
    PyMem_Free(self->list);
    PyMem_Free(self->table);
    PyMem_Free(self->plain);
    PyMem_Free(self->name_marks);
    PyMem_Free(self->uri_marks);
    PyMem_Free(self->hits);
    Py_XDECREF(self->entries);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Matcher_init(Matcher *self, PyObject *args, PyObject *kwds) {
    PyObject *names, *entries;
    static char *kwlist[] = {"names", "entries", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!", kwlist, &PyList_Type, &names,
                                     &PyList_Type, &entries))
        return -1;
    Py_ssize_t n = PyList_GET_SIZE(names);
    if (PyList_GET_SIZE(entries) != n) {
        PyErr_SetString(PyExc_ValueError, "names and entries differ in length");
        return -1;
    }
    if (self->list) {
        PyErr_SetString(PyExc_RuntimeError, "a Matcher is initialised once");
        return -1;
    }
    Buf bytes = {0};
    self->list = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Name));
    self->plain = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Py_ssize_t));
    self->name_marks = PyMem_Calloc((size_t)(n ? n : 1), sizeof(uint64_t));
    self->hits = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Py_ssize_t));
    Py_ssize_t size = 16;
    int bits = 4;
    while (size < 2 * n) {
        size *= 2;
        bits++;
    }
    self->table_shift = 64 - bits;
    self->table = PyMem_Calloc((size_t)size, sizeof(Py_ssize_t));
    self->table_mask = size - 1;
    if (!self->list || !self->plain || !self->table || !self->name_marks || !self->hits) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t max_uri = -1;
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
        }
        Py_ssize_t len;
        const char *utf8 = PyUnicode_AsUTF8AndSize(name, &len);
        if (!utf8) goto error;
        self->list[k].offset = bytes.len;
        self->list[k].len = len;
        self->list[k].hash = name_hash((const unsigned char *)utf8, len, 0);
        if (buf_put(&bytes, utf8, len) < 0) goto error;
    }
    self->names = bytes.data;
    bytes.data = NULL;
    self->n_names = n;
    self->n_uris = max_uri + 1;
    self->uri_marks = PyMem_Calloc((size_t)(self->n_uris ? self->n_uris : 1), sizeof(uint64_t));
    if (!self->uri_marks) {
        PyErr_NoMemory();
        return -1;
    }
    self->entries = Py_NewRef(entries);
    /* index: names with an extension by hash, grouped by extension and length */
    for (Py_ssize_t k = 0; k < n; k++) {
        Name *name = &self->list[k];
        const char *text = self->names + name->offset;
        if (name->len == 0 || memchr(text, 0, (size_t)name->len)) continue; /* never matches */
        Py_ssize_t dot = -1;
        for (Py_ssize_t j = name->len - 1; j >= 0; j--) {
            if (text[j] == '.') { dot = j; break; }
        }
        if (dot <= 0 || dot == name->len - 1) {
            self->plain[self->n_plain++] = k;
            continue;
        }
        Py_ssize_t slot = (Py_ssize_t)(name->hash >> self->table_shift);
        while (self->table[slot]) slot = (slot + 1) & self->table_mask;
        self->table[slot] = k + 1;
        Py_ssize_t ext_len = name->len - dot, e;
        for (e = 0; e < self->n_exts; e++) {
            Ext *ext = &self->exts[e];
            if (ext->len == ext_len && memcmp(self->names + ext->offset, text + dot, (size_t)ext_len) == 0)
                break;
        }
        if (e == self->n_exts) {
            Ext *exts = PyMem_Realloc(self->exts, (size_t)(e + 1) * sizeof(Ext));
            if (!exts) { PyErr_NoMemory(); return -1; }
            self->exts = exts;
            exts[e].offset = name->offset + dot;
            exts[e].len = ext_len;
            exts[e].lengths = NULL;
            exts[e].n_lengths = 0;
            self->n_exts++;
        }
        Ext *ext = &self->exts[e];
        Py_ssize_t at = 0;
        while (at < ext->n_lengths && ext->lengths[at] < name->len) at++;
        if (at < ext->n_lengths && ext->lengths[at] == name->len) continue;
        Py_ssize_t *lengths = PyMem_Realloc(ext->lengths, (size_t)(ext->n_lengths + 1) * sizeof(Py_ssize_t));
        if (!lengths) { PyErr_NoMemory(); return -1; }
        memmove(lengths + at + 1, lengths + at, (size_t)(ext->n_lengths - at) * sizeof(Py_ssize_t));
        lengths[at] = name->len;
        ext->lengths = lengths;
        ext->n_lengths++;
    }
    return 0;
error:
    buf_free(&bytes);
    return -1;
}

/* Mark the names occurring in text[0:len] (already lower-cased when `fold` is 0). */
static Py_ssize_t find_names(Matcher *m, const unsigned char *text, Py_ssize_t len, int fold,
                             uint64_t stamp, Py_ssize_t n_hits) {
    const unsigned char *names = (const unsigned char *)m->names;
    if (m->n_exts) {
        const unsigned char *at = text, *end = text + len;
        while ((at = memchr(at, '.', (size_t)(end - at))) != NULL) {
            Py_ssize_t pos = at - text;
            for (Py_ssize_t e = 0; e < m->n_exts; e++) {
                Ext *ext = &m->exts[e];
                if (pos + ext->len > len) continue;
                const unsigned char *want = names + ext->offset;
                Py_ssize_t j = 1;
                while (j < ext->len && (fold ? LOWER[at[j]] : at[j]) == want[j]) j++;
                if (j < ext->len) continue;
                Py_ssize_t stop = pos + ext->len;
                for (Py_ssize_t l = 0; l < ext->n_lengths; l++) {
                    Py_ssize_t size = ext->lengths[l], start = stop - size;
                    if (start < 0) break;
                    uint64_t h = name_hash(text + start, size, fold);
                    Py_ssize_t slot = (Py_ssize_t)(h >> m->table_shift), found;
                    while ((found = m->table[slot]) != 0) {
                        Name *name = &m->list[found - 1];
                        if (name->hash == h && name->len == size && m->name_marks[found - 1] != stamp &&
                            same_name(text + start, names + name->offset, size, fold)) {
                            m->name_marks[found - 1] = stamp;
                            m->hits[n_hits++] = found - 1;
                        }
                        slot = (slot + 1) & m->table_mask;
                    }
                }
            }
            at++;
        }
    }
    for (Py_ssize_t k = 0; k < m->n_plain; k++) {
        Py_ssize_t index = m->plain[k];
        Name *name = &m->list[index];
        if (m->name_marks[index] == stamp || name->len > len) continue;
        const unsigned char *needle = names + name->offset;
        for (Py_ssize_t start = 0; start + name->len <= len; start++) {
            if (same_name(text + start, needle, name->len, fold)) {
                m->name_marks[index] = stamp;
                m->hits[n_hits++] = index;
                break;
            }
        }
    }
    return n_hits;
}

static int cmp_index(const void *a, const void *b) {
    Py_ssize_t x = *(const Py_ssize_t *)a, y = *(const Py_ssize_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t render_stamp = 0;

/* Append the item's attachments as a JSON array; count them. -1 on a Python error. */
int attach(Page *page, Item *item, Matcher *m, Buf *out, Buf *scratch, Py_ssize_t *count) {
    if (!m || m->n_names == 0) return PUT_LIT(out, "[]");
    uint64_t stamp = ++render_stamp;
    Py_ssize_t n_hits = 0;
    for (Py_ssize_t k = 0; k < item->str_count; k++) {
        Span sp = page->strs[item->str_first + k];
        if (!(sp.flags & (F_ESC | F_NONASCII))) {
            n_hits = find_names(m, page->s + sp.start, sp.end - sp.start, 1, stamp, n_hits);
            continue;
        }
        /* escapes or non-ASCII text: decode, lower-case with Python's rules, then look */
        PyObject *text = decode_str(page->s, sp, scratch);
        if (!text) return -1;
        PyObject *lowered = PyObject_CallMethod(text, "lower", NULL);
        Py_DECREF(text);
        if (!lowered) return -1;
        Py_ssize_t len;
        const char *utf8 = PyUnicode_AsUTF8AndSize(lowered, &len);
        if (!utf8) {
            Py_DECREF(lowered);
            return -1;
        }
        n_hits = find_names(m, (const unsigned char *)utf8, len, 0, stamp, n_hits);
        Py_DECREF(lowered);
    }
    if (PUT_LIT(out, "[") < 0) return -1;
    qsort(m->hits, (size_t)n_hits, sizeof(Py_ssize_t), cmp_index);
    int first = 1;
    for (Py_ssize_t k = 0; k < n_hits; k++) {
        PyObject *entry = PyList_GET_ITEM(m->entries, m->hits[k]);
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(entry); j++) {
            PyObject *pair = PyList_GET_ITEM(entry, j);
            Py_ssize_t uri = PyLong_AsSsize_t(PyTuple_GET_ITEM(pair, 0));
            if (m->uri_marks[uri] == stamp) continue;
            m->uri_marks[uri] = stamp;
            PyObject *json = PyTuple_GET_ITEM(pair, 1);
            if ((!first && PUT_LIT(out, ",") < 0) ||
                buf_put(out, PyBytes_AS_STRING(json), PyBytes_GET_SIZE(json)) < 0)
                return -1;
            first = 0;
            (*count)++;
        }
    }
    return PUT_LIT(out, "]");
}

PyTypeObject MatcherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gateway.search._pagescan.Matcher",
    .tp_basicsize = sizeof(Matcher),
    .tp_dealloc = (destructor)Matcher_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Matcher(names, entries): one session's attachment names.",
    .tp_init = (initproc)Matcher_init,
    .tp_new = PyType_GenericNew,
};
