/* The module gateway.search._pagescan: see pagescan.h for what it does. */

#include "pagescan.h"

unsigned char LOWER[256];
uint64_t hash_seed;

/* Eight random bytes from the operating system (os.urandom), for `hash_seed`. */
static int random_seed(uint64_t *seed) {
    PyObject *os = PyImport_ImportModule("os");
    if (!os) return -1;
    PyObject *bytes = PyObject_CallMethod(os, "urandom", "i", 8);
    Py_DECREF(os);
    if (!bytes) return -1;
    if (!PyBytes_Check(bytes) || PyBytes_GET_SIZE(bytes) != 8) {
        Py_DECREF(bytes);
        PyErr_SetString(PyExc_RuntimeError, "os.urandom(8) gave no eight bytes");
        return -1;
    }
    memcpy(seed, PyBytes_AS_STRING(bytes), 8);
    Py_DECREF(bytes);
    return 0;
}

static PyMethodDef module_methods[] = {
    {"scan", scan, METH_VARARGS, "scan(body, native) -> Page | None"},
    {NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "gateway.search._pagescan",
    .m_doc = "Search pages scanned, matched and written in one pass (the fast twin of "
             "gateway/search/items.py).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__pagescan(void) {
    init_lex_tables();
    if (random_seed(&hash_seed) < 0) return NULL;
    for (int c = 0; c < 256; c++) LOWER[c] = (unsigned char)((c >= 'A' && c <= 'Z') ? c + 32 : c);
    if (PyType_Ready(&PageType) < 0 || PyType_Ready(&MatcherType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "Page", (PyObject *)&PageType) < 0 ||
        PyModule_AddObjectRef(m, "Matcher", (PyObject *)&MatcherType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
