/* Growable byte buffers; one can be the answer's own bytes object, written in place. */

#include "pagescan.h"

int buf_grow(Buf *b, Py_ssize_t extra) {
    Py_ssize_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra) cap *= 2;
    if (b->bytes) {
        if (_PyBytes_Resize(&b->bytes, cap) < 0) return -1;
        b->data = PyBytes_AS_STRING(b->bytes);
        b->cap = cap;
        return 0;
    }
    char *data = PyMem_Realloc(b->data, (size_t)cap);
    if (!data) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

void buf_free(Buf *b) {
    if (b->bytes) Py_CLEAR(b->bytes);
    else PyMem_Free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* A buffer written straight into a new bytes object of `cap` bytes (grown as needed). */
int buf_bytes(Buf *b, Py_ssize_t cap) {
    b->bytes = PyBytes_FromStringAndSize(NULL, cap);
    if (!b->bytes) return -1;
    b->data = PyBytes_AS_STRING(b->bytes);
    b->len = 0;
    b->cap = cap;
    return 0;
}

/* The written bytes as the bytes object; the buffer is left empty. */
PyObject *buf_take(Buf *b) {
    if (_PyBytes_Resize(&b->bytes, b->len) < 0) {
        b->data = NULL;
        b->len = b->cap = 0;
        return NULL;
    }
    PyObject *out = b->bytes;
    b->bytes = NULL;
    b->data = NULL;
    b->len = b->cap = 0;
    return out;
}
