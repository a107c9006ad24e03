/* An item's attachments: its strings matched (by probing or by the automaton) with the marks
   a render holds, and the attachments of the names found written once each. */

#include "matching.h"

/* The names occurring in text[0:len], by probing where the matcher has its tables, else by the
   automaton. */
static inline Py_ssize_t match_text(const Matcher *m, const unsigned char *text, Py_ssize_t len,
                                    int fold, Marks *marks, uint64_t stamp, uint64_t again,
                                    Py_ssize_t n_hits) {
#ifdef LEAD_SKIP
    if (m->probe) {
        /* text that keeps probing over its budget (a session's adversarial names) goes to the
           automaton straight away, all but about one string in four, still probed to see */
        Matcher *counted = (Matcher *)m;
        /* a count, not a lock: two threads may count one string between them (no locked
           instruction on every string of every search) */
        uint64_t tried = __atomic_load_n(&counted->tried, __ATOMIC_RELAXED);
        __atomic_store_n(&counted->tried, tried + 1, __ATOMIC_RELAXED);
        if (__atomic_load_n(&counted->handed_over, __ATOMIC_RELAXED) * 4 <= tried)
            return probe_names(m, text, len, fold, marks, stamp, again, n_hits);
    }
#endif
    (void)stamp;
    return find_names(m, text, len, fold, marks, again, n_hits);
}

static int cmp_index(const void *a, const void *b) {
    Py_ssize_t x = *(const Py_ssize_t *)a, y = *(const Py_ssize_t *)b;
    return x < y ? -1 : x > y;
}

/* An item's names found, in the order their attachments are listed (the names' order): few
   as a rule, so sorted in place by insertion; many by qsort. */
#define FEW_HITS 32
static void sort_hits(Py_ssize_t *hits, Py_ssize_t n) {
    if (n > FEW_HITS) {
        qsort(hits, (size_t)n, sizeof(Py_ssize_t), cmp_index);
        return;
    }
    for (Py_ssize_t k = 1; k < n; k++) {
        Py_ssize_t x = hits[k], j = k;
        for (; j > 0 && hits[j - 1] > x; j--) hits[j] = hits[j - 1];
        hits[j] = x;
    }
}

static uint64_t render_stamp = 0;
#define FEW_STRINGS 64 /* an item's strings, listed on the stack up to this many */

/* The marks a render uses for `m` (with the GIL held): its own, unless another render (in
   another thread) or this one (for another session given the same matcher) holds them, then a
   set made for this hold. -1 out of memory. */
int hold_marks(HeldMarks *held, Matcher *m) {
    held->m = m;
    held->spare = (Marks){0};
    if (!m->busy) {
        m->busy = 1;
        held->use = &m->own;
        return 0;
    }
    if (marks_alloc(&held->spare, m->n_names, m->n_uris) < 0) return -1;
    m->spare_marks++;
    held->use = &held->spare;
    return 0;
}

/* The render is done with them (with the GIL held). */
void release_marks(HeldMarks *held) {
    if (held->use == &held->m->own) held->m->busy = 0;
    else marks_free(&held->spare);
    held->use = NULL;
}

/* Append the attachments of the item's `n_hits` names found (`marks->hits`) as a JSON array,
   in the names' order, each uri once (marked with `stamp`); count them. */
static int put_found(const Matcher *m, Marks *marks, uint64_t stamp, Py_ssize_t n_hits,
                     Buf *out, Py_ssize_t *count) {
    if (PUT_LIT(out, "[") < 0) return -1;
    sort_hits(marks->hits, n_hits);
    int first = 1;
    for (Py_ssize_t k = 0; k < n_hits; k++) {
        Py_ssize_t name = marks->hits[k];
        for (Py_ssize_t j = m->entry_first[name]; j < m->entry_first[name + 1]; j++) {
            Py_ssize_t uri = m->entry_uri[j];
            if (marks->uris[uri] == stamp) continue;
            marks->uris[uri] = stamp;
            if ((!first && PUT_LIT(out, ",") < 0) ||
                buf_put(out, m->json + m->entry_json[j], m->entry_json[j + 1] - m->entry_json[j]) < 0)
                return -1;
            first = 0;
            (*count)++;
        }
    }
    return PUT_LIT(out, "]");
}

/* Append the item's attachments as a JSON array, found with `marks` (`hold_marks`); count
   them. -1 on a Python error. */
int attach(Page *page, Item *item, Matcher *m, Marks *marks, Buf *out, Buf *scratch,
           Py_ssize_t *count) {
    if (!m || m->n_names == 0) return PUT_LIT(out, "[]");
    /* the item's marks: `stamp` for probing and the uris written, `again` for the automaton */
    uint64_t stamp = ++render_stamp, again = ++render_stamp;
    int status = -1;
    Py_ssize_t n_hits = 0, n_strs = item->str_count, total = 0;
    const Span *strs = page->strs + item->str_first;
    /* the common item: its strings all as sent (no escape, ASCII) and too few bytes in all to
       match without the GIL (its own bytes bound them): each matched where it lies */
    int as_sent = item->raw.end - item->raw.start < NOGIL_BYTES;
    for (Py_ssize_t k = 0; as_sent && k < n_strs; k++)
        if (strs[k].flags & (F_ESC | F_NONASCII)) as_sent = 0;
    if (as_sent) {
        for (Py_ssize_t k = 0; k < n_strs; k++) {
            Py_ssize_t len = strs[k].end - strs[k].start;
            if (len >= m->min_len)
                n_hits = match_text(m, page->s + strs[k].start, len, 1, marks, stamp, again,
                                    n_hits);
        }
        return put_found(m, marks, stamp, n_hits, out, count);
    }
    /* else strings holding escapes or non-ASCII text are decoded and lower-cased with
       Python's rules first; then every string is matched, without the GIL when there are
       many bytes */
    PyObject **lowered = NULL;
    const unsigned char *few_texts[FEW_STRINGS], **texts = few_texts;
    Py_ssize_t few_lens[FEW_STRINGS], *lens = few_lens;
    if (n_strs > FEW_STRINGS) {
        texts = PyMem_RawMalloc((size_t)n_strs * sizeof(*texts));
        lens = PyMem_RawMalloc((size_t)n_strs * sizeof(*lens));
    }
    if (!texts || !lens) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < n_strs; k++) {
        Span sp = strs[k];
        texts[k] = NULL;
        lens[k] = 0;
        /* no name fits in fewer bytes than its own: an ASCII string is never longer than as
           sent (an escape stands for fewer bytes); lower-casing may lengthen non-ASCII text,
           so that is measured once lowered, below */
        if (sp.end - sp.start < m->min_len && !(sp.flags & F_NONASCII)) continue;
        if (!(sp.flags & (F_ESC | F_NONASCII))) {
            texts[k] = page->s + sp.start;
            lens[k] = sp.end - sp.start;
            total += lens[k];
            continue;
        }
        if (!lowered) {
            lowered = PyMem_RawCalloc((size_t)n_strs, sizeof(PyObject *));
            if (!lowered) {
                PyErr_NoMemory();
                goto done;
            }
        }
        PyObject *text = decode_str(page->s, sp, scratch);
        if (!text) goto done;
        lowered[k] = PyObject_CallMethod(text, "lower", NULL);
        Py_DECREF(text);
        if (!lowered[k]) goto done;
        const char *utf8 = PyUnicode_AsUTF8AndSize(lowered[k], &lens[k]);
        if (!utf8) goto done;
        texts[k] = (const unsigned char *)utf8;
        total += lens[k];
    }
    PyThreadState *released = total >= NOGIL_BYTES ? PyEval_SaveThread() : NULL;
    for (Py_ssize_t k = 0; k < n_strs; k++)
        if (lens[k] >= m->min_len)
            n_hits = match_text(m, texts[k], lens[k], !(lowered && lowered[k]), marks, stamp,
                                again, n_hits);
    if (released) PyEval_RestoreThread(released);
    status = put_found(m, marks, stamp, n_hits, out, count);
done:
    if (lowered) {
        for (Py_ssize_t k = 0; k < n_strs; k++) Py_XDECREF(lowered[k]);
        PyMem_RawFree(lowered);
    }
    if (texts != few_texts) PyMem_RawFree(texts);
    if (lens != few_lens) PyMem_RawFree(lens);
    return status;
}
