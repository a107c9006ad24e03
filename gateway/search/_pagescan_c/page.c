/* The Page type: a scanned answer, its sessions and scopes, and the answer it renders. */

#include "pagescan.h"

const char *CONTAINER_TYPES[N_CONTAINERS] = {
    "episode", "profile", "agent_case", "agent_skill", "unprocessed_message",
    "memory", "memory", "memory", "raw_message"};

static void Page_dealloc(Page *self) {
    for (Py_ssize_t k = 0; k < self->n_items; k++) Py_XDECREF(self->items[k].session_id);
    PyMem_Free(self->items);
    PyMem_Free(self->strs);
    PyMem_Free(self->selected);
    Py_XDECREF(self->body);
    Py_XDECREF(self->sessions);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyObject *decode_str(const unsigned char *s, Span sp, Buf *scratch) {
    if (unescape(s, sp, scratch) < 0) return NULL;
    return PyUnicode_DecodeUTF8(scratch->data ? scratch->data : "", scratch->len, "strict");
}

static const Span NO_SPAN = {0, 0, K_NONE, 0};

/* gateway.search.items.FoundItem.field: the first key set and not null, at the top, then in metadata */
static Span field(Item *item, const int *keys, int count) {
    for (int k = 0; k < count; k++) {
        Span sp = head_span(item, keys[k]);
        if (sp.kind && sp.kind != K_NULL) return sp;
    }
    if (item->has_meta) {
        for (int k = 0; k < count; k++) {
            Span sp = meta_span(item, keys[k]);
            if (sp.kind && sp.kind != K_NULL) return sp;
        }
    }
    return NO_SPAN;
}

static const int ID_KEYS[] = {H_ID, H_MEMORY_ID, H_EPISODE_ID, H_MESSAGE_ID};
static const int SCORE_KEYS[] = {H_SCORE, H_RELATIVITY};
static const int CREATED_KEYS[] = {H_CREATED_AT, H_TIMESTAMP};
static const int CONTENT_KEYS[] = {H_EPISODE, H_SUMMARY, H_MEMORY, H_CONTENT, H_TEXT,
                                   H_DESCRIPTION};

/* The page's session ids by their bytes as sent, so an id that comes again (a page names a
   few sessions many times) is the one string object: slots hold an item's index + 1 (0 =
   empty), of items whose session id holds no escape. */
typedef struct {
    const Item *items; /* the page's */
    Py_ssize_t *slots;
    size_t mask;
    int shift;      /* 63 less the mask's bits: a hash's top bits, less one, index a slot */
    uint64_t steps; /* slots read */
} Sessions;

static Py_ssize_t *session_slot(Sessions *t, const unsigned char *s, Span sp) {
    Py_ssize_t len = sp.end - sp.start;
    /* the slot from the high bits of a seeded hash of every byte: ids an engine sends cannot
       be chosen to share a run of slots (ids alike but in their middle bytes took a second a
       page of 20,000) */
    uint64_t h = bytes_hash(s + sp.start, len);
    size_t at = (size_t)(h >> t->shift) >> 1;
    for (;; at = (at + 1) & t->mask) {
        t->steps++;
        Py_ssize_t held = t->slots[at];
        if (!held) return &t->slots[at];
        Span other = t->items[held - 1].session;
        if (other.end - other.start == len &&
            memcmp(s + other.start, s + sp.start, (size_t)len) == 0)
            return &t->slots[at];
    }
}

/* Fill an item's result fields as gateway/search/items.py computes them; -1 to bail.
   `*again`: its session id is one an earlier item of the page had, as sent. */
static int resolve(Parser *p, Item *item, Py_ssize_t at, int native, Buf *scratch,
                   Sessions *sessions, int *again) {
    const unsigned char *s = p->s;
    *again = 0;
    int is_obj = item->raw.kind == K_OBJ;
    item->type = NO_SPAN;
    if (item->container >= C_RESULTS && is_obj) {
        Span t = head_span(item, H_TYPE), mt = head_span(item, H_MEMORY_TYPE);
        if (t.kind == K_STR && t.end > t.start) item->type = t;
        else if (mt.kind == K_STR && mt.end > mt.start) item->type = mt;
    }
    if (!is_obj) {
        item->id = NO_SPAN;
        item->content = item->raw.kind == K_STR ? item->raw : NO_SPAN;
        item->score = item->session = item->created_at = NO_SPAN;
        return 0;
    }
    if (native && head_span(item, H_ATTACHMENTS).kind) return -1; /* replaced in place by Python */
    item->id = field(item, ID_KEYS, 4);
    if (item->id.kind == K_NUM) {
        if (!(item->id.flags & F_INT)) return -1;
        if (item->id.end - item->id.start == 2 && s[item->id.start] == '-' &&
            s[item->id.start + 1] == '0')
            return -1; /* -0 reads as 0 */
        item->id_quoted = 1;
    } else if (item->id.kind && item->id.kind != K_STR) {
        return -1; /* str() of a float, bool or container: left to Python */
    }
    item->content = NO_SPAN;
    for (int k = 0; k < 6; k++) {
        if (head_span(item, CONTENT_KEYS[k]).kind == K_STR) {
            item->content = head_span(item, CONTENT_KEYS[k]);
            break;
        }
    }
    /* no text field, and what gateway.search.items.derived_content reads: left to Python */
    if (!native && !item->content.kind &&
        (head_span(item, H_PROFILE_DATA).kind || head_span(item, H_TASK_INTENT).kind))
        return -1;
    item->score = field(item, SCORE_KEYS, 2);
    item->created_at = field(item, CREATED_KEYS, 2);
    /* gateway.search.items._session_of */
    Span sid = head_span(item, H_SESSION_ID);
    int truthy;
    switch (sid.kind) {
    case K_STR: truthy = sid.end > sid.start; break;
    case K_NONE: case K_NULL: case K_FALSE: truthy = 0; break;
    case K_TRUE: truthy = 1; break;
    default: return -1; /* numbers and containers: truthiness left to Python */
    }
    if (!truthy && item->has_meta) sid = meta_span(item, H_SESSION_ID);
    item->session = (sid.kind == K_STR && sid.end > sid.start) ? sid : NO_SPAN;
    if (item->session.kind) {
        Py_ssize_t *slot = NULL;
        if (!(item->session.flags & F_ESC)) {
            slot = session_slot(sessions, s, item->session);
            if (*slot) {
                item->session_id = Py_NewRef(sessions->items[*slot - 1].session_id);
                *again = 1;
                return 0;
            }
        }
        item->session_id = decode_str(s, item->session, scratch);
        if (!item->session_id) return -2;
        if (slot) *slot = at + 1;
    }
    return 0;
}

/* What the parser holds once the page has taken its items and strings (or on failure). */
static void parser_free(Parser *p) {
    PyMem_Free(p->items);
    PyMem_Free(p->strs);
    PyMem_Free(p->keys);
    PyMem_Free(p->key_hashes);
    buf_free(&p->scratch);
    buf_free(&p->scratch2);
    PyMem_Free(p->stops);
}

PyObject *scan(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *body;
    int native;
    if (!PyArg_ParseTuple(args, "Sp", &body, &native)) return NULL;
    Parser p;
    memset(&p, 0, sizeof(p));
    p.s = (const unsigned char *)PyBytes_AS_STRING(body);
    p.n = PyBytes_GET_SIZE(body);
    if (p.n > MAX_PAGE_BYTES) Py_RETURN_NONE; /* its spans would not fit: the Python path */
    /* room from the start for a walked string every 64 bytes (an engine's page holds about one
       every 70), up to 4,096 of them, so that the list is seldom copied while it grows */
    p.cap_strs = p.n / 64 < 256 ? 256 : p.n / 64 > 4096 ? 4096 : p.n / 64;
    p.strs = PyMem_Malloc((size_t)p.cap_strs * sizeof(Span));
    if (!p.strs) return PyErr_NoMemory();
    Page *page = NULL;
    int data_kind = 0;
    if (index_page(&p) < 0 || parse_page(&p, &data_kind) < 0) goto fail;

    page = PyObject_New(Page, &PageType);
    if (!page) goto fail;
    page->body = Py_NewRef(body);
    page->s = p.s;
    page->native = native;
    page->items = p.items;
    page->n_items = p.n_items;
    page->strs = p.strs;
    page->n_strs = p.n_strs;
    page->selected = NULL;
    page->n_selected = 0;
    page->sessions = NULL;
    memcpy(page->containers, p.containers, sizeof(p.containers));
    p.items = NULL; /* the page's now */
    p.strs = NULL;

    /* which containers hold the results (gateway.search.items.find_items) */
    Container *c = page->containers;
    int everos = 0;
    if (data_kind == K_OBJ) {
        for (int k = C_EPISODES; k <= C_UNPROCESSED; k++) everos |= c[k].present;
    }
    if (everos) {
        for (int k = C_EPISODES; k <= C_UNPROCESSED; k++) {
            if (!c[k].present || c[k].kind == K_NULL) continue;
            if (c[k].kind != K_ARR) goto bail_page; /* "... is not a list": Python says so */
            c[k].used = 1;
        }
    } else {
        int found = -1;
        if (c[C_RESULTS].present) found = C_RESULTS;
        else if (c[C_MEMORIES].present) found = C_MEMORIES;
        else if (data_kind == K_OBJ && c[C_DATA_MEMORIES].present) found = C_DATA_MEMORIES;
        else if (data_kind == K_OBJ && c[C_DATA_RAW_MESSAGES].present) found = C_DATA_RAW_MESSAGES;
        if (found < 0 || c[found].kind != K_ARR) goto bail_page;
        c[found].used = 1;
    }
    Py_ssize_t total = 0;
    for (int k = 0; k < N_CONTAINERS; k++) total += c[k].used ? c[k].count : 0;
    page->selected = PyMem_Malloc((size_t)(total ? total : 1) * sizeof(Py_ssize_t));
    if (!page->selected) {
        PyErr_NoMemory();
        goto fail_page;
    }
    page->sessions = PyList_New(0);
    if (!page->sessions) goto fail_page;
    Sessions table = {page->items, NULL, 1, 62, 0};
    while (table.mask + 1 < (size_t)total * 2) {
        table.mask = table.mask << 1 | 1;
        table.shift--;
    }
    table.slots = PyMem_Calloc(table.mask + 1, sizeof(Py_ssize_t));
    PyObject *seen = table.slots ? PySet_New(NULL) : NULL;
    if (!seen) {
        PyMem_Free(table.slots);
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto fail_page;
    }
    for (int k = 0; k < N_CONTAINERS; k++) {
        if (!c[k].used) continue;
        for (Py_ssize_t j = 0; j < c[k].count; j++) {
            Py_ssize_t at = c[k].first + j;
            Item *item = &page->items[at];
            int again, r = resolve(&p, item, at, native, &p.scratch, &table, &again);
            if (r < 0) {
                Py_DECREF(seen);
                PyMem_Free(table.slots);
                if (r == -2) goto fail_page;
                goto bail_page;
            }
            page->selected[page->n_selected++] = at;
            if (item->session_id && !again) {
                int had = PySet_Contains(seen, item->session_id);
                if (had < 0 || (!had && (PySet_Add(seen, item->session_id) < 0 ||
                                         PyList_Append(page->sessions, item->session_id) < 0))) {
                    Py_DECREF(seen);
                    PyMem_Free(table.slots);
                    goto fail_page;
                }
            }
        }
    }
    Py_DECREF(seen);
    PyMem_Free(table.slots);
    page->session_steps = table.steps;
    parser_free(&p);
    return (PyObject *)page;

bail_page:
    Py_DECREF(page);
    parser_free(&p);
    Py_RETURN_NONE;
fail_page:
    Py_DECREF(page);
    parser_free(&p);
    return NULL;
fail:
    parser_free(&p);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Page_sessions(Page *self, void *closure) {
    (void)closure;
    return Py_NewRef(self->sessions);
}

static PyObject *Page_scopes(Page *self, PyObject *unused) {
    (void)unused;
    PyObject *out = PyList_New(self->n_selected);
    if (!out) return NULL;
    Buf scratch = {0};
    for (Py_ssize_t k = 0; k < self->n_selected; k++) {
        Item *item = &self->items[self->selected[k]];
        PyObject *parts[3] = {NULL, NULL, NULL};
        parts[0] = item->session_id ? Py_NewRef(item->session_id) : Py_NewRef(Py_None);
        for (int j = 0; j < 2; j++) {
            Span sp = item->raw.kind == K_OBJ ? head_span(item, j ? H_PROJECT_ID : H_APP_ID) : NO_SPAN;
            parts[j + 1] = (sp.kind == K_STR && sp.end > sp.start)
                               ? decode_str(self->s, sp, &scratch) : Py_NewRef(Py_None);
        }
        if (!parts[1] || !parts[2]) {
            Py_XDECREF(parts[0]);
            Py_XDECREF(parts[1]);
            Py_XDECREF(parts[2]);
            Py_DECREF(out);
            buf_free(&scratch);
            return NULL;
        }
        PyObject *scope = PyTuple_Pack(3, parts[0], parts[1], parts[2]);
        Py_DECREF(parts[0]);
        Py_DECREF(parts[1]);
        Py_DECREF(parts[2]);
        if (!scope) {
            Py_DECREF(out);
            buf_free(&scratch);
            return NULL;
        }
        PyList_SET_ITEM(out, k, scope);
    }
    buf_free(&scratch);
    return out;
}

static int put_span(Buf *out, Page *page, Span sp) {
    if (!sp.kind) return PUT_LIT(out, "null");
    if (sp.kind == K_STR)
        return buf_put(out, page->s + sp.start - 1, sp.end - sp.start + 2); /* with quotes */
    return buf_put(out, page->s + sp.start, sp.end - sp.start);
}

/* The result's type without quotes: the item's own (escaped as sent) or its container's. */
static int put_type(Buf *out, Page *page, Item *item) {
    if (item->type.kind)
        return buf_put(out, page->s + item->type.start, item->type.end - item->type.start);
    const char *name = CONTAINER_TYPES[item->container];
    return buf_put(out, name, (Py_ssize_t)strlen(name));
}

static int put_result(Page *page, Item *item, Py_ssize_t index, Matcher *m, Marks *marks,
                      Buf *out, Buf *scratch, Py_ssize_t *count) {
    if (PUT_LIT(out, "{\"id\":") < 0) return -1;
    if (item->id.kind == K_STR) {
        if (put_span(out, page, item->id) < 0) return -1;
    } else if (item->id_quoted) { /* an integer id, as str() writes it */
        if (PUT_LIT(out, "\"") < 0 || put_span(out, page, item->id) < 0 || PUT_LIT(out, "\"") < 0)
            return -1;
    } else { /* "{type}:{position}" */
        char number[32];
        int written = snprintf(number, sizeof(number), ":%zd\"", index);
        if (PUT_LIT(out, "\"") < 0 || put_type(out, page, item) < 0 ||
            buf_put(out, number, written) < 0)
            return -1;
    }
    if (PUT_LIT(out, ",\"type\":\"") < 0 || put_type(out, page, item) < 0 ||
        PUT_LIT(out, "\"") < 0)
        return -1;
    if (PUT_LIT(out, ",\"content\":") < 0 || put_span(out, page, item->content) < 0 ||
        PUT_LIT(out, ",\"score\":") < 0 || put_span(out, page, item->score) < 0 ||
        PUT_LIT(out, ",\"session_id\":") < 0 || put_span(out, page, item->session) < 0 ||
        PUT_LIT(out, ",\"created_at\":") < 0 || put_span(out, page, item->created_at) < 0 ||
        PUT_LIT(out, ",\"raw\":") < 0 || put_span(out, page, item->raw) < 0 ||
        PUT_LIT(out, ",\"attachments\":") < 0 || attach(page, item, m, marks, out, scratch, count) < 0 ||
        PUT_LIT(out, "}") < 0)
        return -1;
    return 0;
}

static int cmp_container(const void *a, const void *b) {
    const Container *x = *(Container *const *)a, *y = *(Container *const *)b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* A session id object of the page, its matcher (borrowed from the render's dict, or NULL) and
   the marks this render holds for it (`hold_marks`). */
typedef struct {
    PyObject *id;
    Matcher *matcher;
    Marks *marks;
} SessionMatch;

/* What a render holds for its items, given back (with the GIL held). */
static void render_free(Matcher **chosen, Marks **marks_of, HeldMarks *held, Py_ssize_t n_held,
                        char *gone, SessionMatch *by_session) {
    for (Py_ssize_t k = 0; k < n_held; k++) release_marks(&held[k]);
    PyMem_Free(chosen);
    PyMem_Free(marks_of);
    PyMem_Free(held);
    PyMem_Free(gone);
    PyMem_Free(by_session);
}

static PyObject *Page_render(Page *self, PyObject *args) {
    PyObject *matchers, *dropped;
    if (!PyArg_ParseTuple(args, "O!O", &PyDict_Type, &matchers, &dropped)) return NULL;
    if (dropped != Py_None && !PyAnySet_Check(dropped)) {
        PyErr_SetString(PyExc_TypeError, "dropped is a set of item positions or None");
        return NULL;
    }
    Buf out = {0}, scratch = {0};
    Py_ssize_t count = 0, kept = 0, n_held = 0;
    size_t n = (size_t)(self->n_items ? self->n_items : 1);
    /* per item: its matcher, its marks, and whether it is dropped; per session id object (the
       items of one session share it: `resolve`), in the table `by_session` by its address, its
       matcher and marks: the dict is asked, and marks held, once a session */
    size_t mask = 1;
    while (mask + 1 < 2 * n) mask = mask << 1 | 1;
    Matcher **chosen = PyMem_Calloc(n, sizeof(Matcher *));
    Marks **marks_of = PyMem_Calloc(n, sizeof(Marks *));
    HeldMarks *held = PyMem_Calloc(n, sizeof(HeldMarks));
    char *gone = PyMem_Calloc(n, 1);
    SessionMatch *by_session = PyMem_Calloc(mask + 1, sizeof(SessionMatch));
    if (!chosen || !marks_of || !held || !gone || !by_session) {
        PyErr_NoMemory();
        goto error;
    }
    for (Py_ssize_t k = 0; k < self->n_selected; k++) {
        Py_ssize_t at_item = self->selected[k];
        Item *item = &self->items[at_item];
        if (dropped != Py_None) {
            PyObject *position = PyLong_FromSsize_t(k);
            if (!position) goto error;
            int is_gone = PySet_Contains(dropped, position);
            Py_DECREF(position);
            if (is_gone < 0) goto error;
            gone[at_item] = (char)is_gone;
        }
        if (!item->session_id) continue;
        size_t at = (size_t)(((uintptr_t)item->session_id >> 4) * 0x9E3779B97F4A7C15ULL >> 32)
                    & mask;
        while (by_session[at].id && by_session[at].id != item->session_id)
            at = (at + 1) & mask;
        SessionMatch *session = &by_session[at];
        if (!session->id) {
            PyObject *m = PyDict_GetItemWithError(matchers, item->session_id);
            if (!m && PyErr_Occurred()) goto error;
            if (m && !PyObject_TypeCheck(m, &MatcherType)) {
                PyErr_SetString(PyExc_TypeError, "matchers maps session ids to Matcher");
                goto error;
            }
            /* a matcher given for two sessions has marks held for each: both are right */
            if (m && hold_marks(&held[n_held], (Matcher *)m) < 0) goto error;
            *session = (SessionMatch){item->session_id, (Matcher *)m,
                                      m ? held[n_held++].use : NULL};
        }
        chosen[at_item] = session->matcher;
        marks_of[at_item] = session->marks;
    }
    Py_ssize_t size = PyBytes_GET_SIZE(self->body);
    if (buf_bytes(&out, (self->native ? size : 2 * size) + 256 * self->n_selected + 1024) < 0)
        goto error;
    if (!self->native) {
        if (PUT_LIT(&out, "{\"results\":[") < 0) goto error;
        for (Py_ssize_t k = 0; k < self->n_selected; k++) {
            Py_ssize_t at = self->selected[k];
            if (gone[at]) continue;
            if ((kept && PUT_LIT(&out, ",") < 0) ||
                put_result(self, &self->items[at], kept, chosen[at], marks_of[at], &out, &scratch,
                           &count) < 0)
                goto error;
            kept++;
        }
        char tail[48];
        int written = snprintf(tail, sizeof(tail), "],\"total\":%zd}", kept);
        if (buf_put(&out, tail, written) < 0) goto error;
    } else {
        /* the engine's body, each result container written anew */
        Container *order[N_CONTAINERS];
        int n_order = 0;
        for (int k = 0; k < N_CONTAINERS; k++) {
            Container *c = &self->containers[k];
            if (c->used && c->count) order[n_order++] = c;
        }
        qsort(order, (size_t)n_order, sizeof(Container *), cmp_container);
        Py_ssize_t copied = 0;
        for (int k = 0; k < n_order; k++) {
            Container *c = order[k];
            if (buf_put(&out, self->s + copied, c->start - copied) < 0 || PUT_LIT(&out, "[") < 0)
                goto error;
            int first = 1;
            for (Py_ssize_t j = 0; j < c->count; j++) {
                Py_ssize_t at = c->first + j;
                Item *item = &self->items[at];
                if (gone[at]) continue;
                if (!first && PUT_LIT(&out, ",") < 0) goto error;
                first = 0;
                if (item->raw.kind != K_OBJ) {
                    if (put_span(&out, self, item->raw) < 0) goto error;
                    continue;
                }
                if (buf_put(&out, self->s + item->raw.start, item->raw.end - 1 - item->raw.start) < 0 ||
                    (item->members && PUT_LIT(&out, ",") < 0) ||
                    PUT_LIT(&out, "\"attachments\":") < 0 ||
                    attach(self, item, chosen[at], marks_of[at], &out, &scratch, &count) < 0 ||
                    PUT_LIT(&out, "}") < 0)
                    goto error;
            }
            if (PUT_LIT(&out, "]") < 0) goto error;
            copied = c->end;
        }
        if (buf_put(&out, self->s + copied, PyBytes_GET_SIZE(self->body) - copied) < 0) goto error;
    }
    render_free(chosen, marks_of, held, n_held, gone, by_session);
    buf_free(&scratch);
    PyObject *bytes = buf_take(&out);
    if (!bytes) return NULL;
    return Py_BuildValue("(Nn)", bytes, count);
error:
    render_free(chosen, marks_of, held, n_held, gone, by_session);
    buf_free(&scratch);
    buf_free(&out);
    return NULL;
}

static PyMethodDef Page_methods[] = {
    {"scopes", (PyCFunction)Page_scopes, METH_NOARGS,
     "(session_id, app_id, project_id) of each item; None where absent or not a non-empty string."},
    {"render", (PyCFunction)Page_render, METH_VARARGS,
     "render(matchers, dropped) -> (bytes, attachments attached)."},
    {NULL}};

static PyObject *Page_session_steps(Page *self, void *closure) {
    (void)closure;
    return PyLong_FromUnsignedLongLong(self->session_steps);
}

static PyGetSetDef Page_getset[] = {
    {"sessions", (getter)Page_sessions, NULL, "Distinct session ids of the items, in order.", NULL},
    {"session_steps", (getter)Page_session_steps, NULL,
     "Slots read in the table of the page's session ids (a slot or two an item).", NULL},
    {NULL}};

PyTypeObject PageType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gateway.search._pagescan.Page",
    .tp_basicsize = sizeof(Page),
    .tp_dealloc = (destructor)Page_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A scanned search answer.",
    .tp_methods = Page_methods,
    .tp_getset = Page_getset,
};
