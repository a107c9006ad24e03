/* The answer's shape: the envelope, the result containers, each item's fields and the
   strings the matching walks. */

#include "pagescan.h"

/* Room for more spans in a growing list (twice the capacity, `first` the first time). */
static int grow_spans(Span **spans, Py_ssize_t *cap, Py_ssize_t first) {
    Py_ssize_t more = *cap ? *cap * 2 : first;
    Span *grown = PyMem_Realloc(*spans, (size_t)more * sizeof(Span));
    if (!grown) { PyErr_NoMemory(); return -1; }
    *spans = grown;
    *cap = more;
    return 0;
}

/* A span's fields stored one by one: a Span just written field by field and read back whole
   (one wide load of several narrow stores) waits for the stores to retire, so the scan keeps
   spans as scalars until they are stored. */
static inline void set_span(Span *sp, Py_ssize_t start, Py_ssize_t end, int kind, int flags) {
    sp->start = start;
    sp->end = end;
    sp->kind = kind;
    sp->flags = flags;
}

/* A walked string. */
static inline int push_str(Parser *p, Py_ssize_t start, Py_ssize_t end, int flags) {
    if (p->n_strs == p->cap_strs && grow_spans(&p->strs, &p->cap_strs, 256) < 0) return -1;
    set_span(&p->strs[p->n_strs++], start, end, K_STR, flags);
    return 0;
}

static Item *new_item(Parser *p) {
    if (p->n_items == p->cap_items) {
        Py_ssize_t cap = p->cap_items ? p->cap_items * 2 : 64;
        Item *items = PyMem_Realloc(p->items, (size_t)cap * sizeof(Item));
        if (!items) { PyErr_NoMemory(); return NULL; }
        p->items = items;
        p->cap_items = cap;
    }
    Item *item = &p->items[p->n_items++];
    memset(item, 0, offsetof(Item, head)); /* the spans are written as their fields are read */
    return item;
}

/* Repeated keys. A JSON reader keeps an object's last value of a key, so the Python path never
   sees the earlier ones; the walk here reads every value. Objects the walk reads are therefore
   checked: a repeated key leaves the page to the Python path. A 64-bit filter on each key's hash
   (of its decoded bytes alone, `KeyWords`) keeps the common case to one test; only a filter hit
   compares the key with the object's others, by a seeded hash of their decoded bytes (each
   key's made once, when first needed) and by their bytes where the hashes agree. Past
   MAX_CHECKED_KEYS keys the filter hits on every key and those comparisons would grow as the
   square of the keys (an object of 40,000 escaped keys took ten seconds): the keys after them
   are only noted, and once the object ends all its keys' hashes are sorted and the keys of
   equal hashes compared (`large_object_repeats`). */
#define MAX_CHECKED_KEYS 64

/* The bytes a key decodes to: the page's own, or decoded into `into`. -1 on a Python error. */
static int key_bytes(Parser *p, Span key, Buf *into, const unsigned char **bytes,
                     Py_ssize_t *len) {
    *bytes = p->s + key.start;
    *len = key.end - key.start;
    if (!(key.flags & F_ESC)) return 0;
    if (unescape(p->s, key, into) < 0) return -1;
    *bytes = (const unsigned char *)into->data;
    *len = into->len;
    return 0;
}

/* A key's hash for `repeated_key`: of the bytes it decodes to. -1 on a Python error. */
static int key_hash(Parser *p, Py_ssize_t k) {
    if (p->key_hashes[k]) return 0;
    const unsigned char *bytes;
    Py_ssize_t len;
    if (key_bytes(p, p->keys[k], &p->scratch2, &bytes, &len) < 0) return -1;
    p->key_hashes[k] = bytes_hash(bytes, len) | 1;
    return 0;
}

/* Whether `key` decodes to the `len` bytes at `text` (`scratch2` is overwritten). -1 on a
   Python error. */
static int key_is(Parser *p, Span key, const unsigned char *text, Py_ssize_t len) {
    const unsigned char *bytes;
    Py_ssize_t n;
    if (key_bytes(p, key, &p->scratch2, &bytes, &n) < 0) return -1;
    return n == len && (len == 0 || memcmp(bytes, text, (size_t)len) == 0);
}

/* Whether keys j and k decode to the same bytes (`scratch` and `scratch2` are overwritten). -1
   on a Python error. */
static int same_key(Parser *p, Py_ssize_t j, Py_ssize_t k) {
    const unsigned char *bytes;
    Py_ssize_t len;
    if (key_bytes(p, p->keys[j], &p->scratch, &bytes, &len) < 0) return -1;
    return key_is(p, p->keys[k], bytes, len);
}

typedef struct {
    uint64_t hash;
    Py_ssize_t key;
} KeyAt;

static int by_hash(const void *a, const void *b) {
    uint64_t x = ((const KeyAt *)a)->hash, y = ((const KeyAt *)b)->hash;
    return x < y ? -1 : x > y;
}

/* An object of more than MAX_CHECKED_KEYS keys, at its end: any key repeated, found by sorting
   the keys' hashes (n log n, whatever the keys). */
__attribute__((noinline, cold)) static int large_object_repeats(Parser *p, Py_ssize_t first) {
    Py_ssize_t n = p->n_keys - first;
    KeyAt *order = PyMem_Malloc((size_t)n * sizeof(KeyAt));
    if (!order) {
        PyErr_NoMemory();
        return -1;
    }
    int status = -1;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (key_hash(p, first + k) < 0) goto done;
        order[k] = (KeyAt){p->key_hashes[first + k], first + k};
    }
    qsort(order, (size_t)n, sizeof(KeyAt), by_hash);
    for (Py_ssize_t k = 1; k < n; k++) /* a run of one hash: every pair of it (runs are short) */
        for (Py_ssize_t j = k - 1; j >= 0 && order[j].hash == order[k].hash; j--) {
            int same = same_key(p, order[j].key, order[k].key);
            if (same < 0) goto done;
            if (same) {
                p->bail = 1;
                goto done;
            }
        }
    status = 0;
done:
    PyMem_Free(order);
    return status;
}

/* A filter hit: whether the key (its decoded bytes in `kw`; `scratch` when it has escapes) is
   one of the object's keys before it (then bail). */
static int repeated_key(Parser *p, const KeyWords *kw, Py_ssize_t first) {
    uint64_t mine = bytes_hash(kw->text, kw->len) | 1;
    for (Py_ssize_t k = first; k < p->n_keys; k++) {
        if (key_hash(p, k) < 0) return -1;
        if (p->key_hashes[k] != mine) continue;
        int same = key_is(p, p->keys[k], kw->text, kw->len);
        if (same < 0) return -1;
        if (same) FAIL(p);
    }
    return 0;
}

static inline __attribute__((always_inline)) int note_key(Parser *p, Py_ssize_t start, Py_ssize_t end, int flags,
                           const KeyWords *kw, Py_ssize_t first, uint64_t *seen) {
    if (p->n_keys - first < MAX_CHECKED_KEYS) {
        /* two bits of the hash's top twelve: a false hit is rare while an object has few keys */
        uint64_t h = mix_words(kw->lo, kw->hi, kw->len);
        uint64_t bit = 1ULL << (h >> 58) | 1ULL << (h >> 52 & 63);
        if ((*seen & bit) == bit && repeated_key(p, kw, first) < 0) return -1;
        *seen |= bit;
    } /* past them, the whole object's keys are checked at its end */
    if (p->n_keys == p->cap_keys) {
        if (grow_spans(&p->keys, &p->cap_keys, 64) < 0) return -1;
        uint64_t *hashes = PyMem_Realloc(p->key_hashes, (size_t)p->cap_keys * sizeof(uint64_t));
        if (!hashes) {
            PyErr_NoMemory();
            return -1;
        }
        p->key_hashes = hashes;
    }
    p->key_hashes[p->n_keys] = 0;
    set_span(&p->keys[p->n_keys++], start, end, K_STR, flags);
    return 0;
}

static inline int is_base64(const KeyWords *kw) {
    return kw->len == 6 && kw->lo == WORD_BASE64;
}

/* The steps every object and array shares. `open_members` steps in at '{' or '[': 1 when a
   member follows, 0 when it is empty (and closed). `next_member` after each member: 1 when
   another follows, 0 at the close (stepped past). `read_key`: a member's key and colon. */
static int open_members(Parser *p, char close) {
    if (++p->depth > MAX_DEPTH) FAIL(p);
    p->i++;
    skip_ws(p);
    if (p->s[p->i] == close) {
        p->i++;
        p->depth--;
        return 0;
    }
    return 1;
}

static int next_member(Parser *p, char close) {
    skip_ws(p);
    if (p->s[p->i] == ',') {
        p->i++;
        skip_ws(p);
        return 1;
    }
    if (p->s[p->i] == close) {
        p->i++;
        p->depth--;
        return 0;
    }
    FAIL(p);
}

static inline int read_key(Parser *p, Span *key) {
    if (p->s[p->i] != '"') FAIL(p);
    if (lex_string(p, key) < 0) return -1;
    skip_ws(p);
    if (p->s[p->i] != ':') FAIL(p);
    p->i++;
    skip_ws(p);
    return 0;
}

/* Any JSON value; with `collect`, its strings (not keys, not under "base64") are walked. */
static int parse_value(Parser *p, int collect, Span *out);

static int parse_object(Parser *p, int collect, Span *out, int *members) {
    Py_ssize_t start = p->i, first_key = p->n_keys;
    uint64_t seen = 0;
    int count = 0, more = open_members(p, '}');
    while (more > 0) {
        Span key, value;
        if (read_key(p, &key) < 0) return -1;
        int walk = collect;
        if (walk) {
            KeyWords kw;
            if (read_key_words(p, key.start, key.end, key.flags, &kw) < 0 ||
                note_key(p, key.start, key.end, key.flags, &kw, first_key, &seen) < 0)
                return -1;
            walk = !is_base64(&kw);
        }
        if (parse_value(p, walk, &value) < 0) return -1;
        count++;
        more = next_member(p, '}');
    }
    if (more < 0) return -1;
    if (p->n_keys - first_key > MAX_CHECKED_KEYS && large_object_repeats(p, first_key) < 0)
        return -1;
    p->n_keys = first_key;
    out->start = start;
    out->end = p->i;
    out->kind = K_OBJ;
    out->flags = 0;
    if (members) *members = count;
    return 0;
}

static int parse_array(Parser *p, int collect, Span *out) {
    Py_ssize_t start = p->i;
    int more = open_members(p, ']');
    while (more > 0) {
        Span value;
        if (parse_value(p, collect, &value) < 0) return -1;
        more = next_member(p, ']');
    }
    if (more < 0) return -1;
    out->start = start;
    out->end = p->i;
    out->kind = K_ARR;
    out->flags = 0;
    return 0;
}

static int parse_value(Parser *p, int collect, Span *out) {
    if (p->i >= p->n) FAIL(p);
    switch (p->s[p->i]) {
    case '"':
        if (lex_string(p, out) < 0) return -1;
        return collect ? push_str(p, out->start, out->end, out->flags) : 0;
    case '{':
        return parse_object(p, collect, out, NULL);
    case '[':
        return parse_array(p, collect, out);
    case 't':
        return lex_word(p, "true", K_TRUE, out);
    case 'f':
        return lex_word(p, "false", K_FALSE, out);
    case 'n':
        return lex_word(p, "null", K_NULL, out);
    default:
        return lex_number(p, out);
    }
}

/* A string whose quote is at p->i read the slow way: its span's fields, p->i past it */
static int slow_string(Parser *p, Py_ssize_t *start, Py_ssize_t *end, int *flags) {
    Span sp;
    if (lex_string_slow(p, &sp) < 0) return -1;
    *start = sp.start;
    *end = sp.end;
    *flags = sp.flags;
    return 0;
}

/* An object whose members named in `wanted` are recorded in `spans`; any repeated key: bail.
   The hot loop of a scan (every member of every item): the position is kept in a local and
   handed to `p->i` only around the calls that read on from it. */
static int parse_fields(Parser *p, Span *spans, uint32_t *set, uint32_t wanted, int *members,
                        Item *item) {
    const unsigned char *s = p->s;
    Py_ssize_t first_key = p->n_keys, i = p->i;
    uint64_t seen = 0;
    uint32_t heads = 0, found = 0;
    int count = 0;
    if (++p->depth > MAX_DEPTH) FAIL(p);
    i++;
    if (s[i] <= ' ') i = ws_from(s, i);
    if (s[i] == '}') {
        i++;
    } else {
        for (;;) {
            /* spans as scalars until stored (see set_span) */
            Py_ssize_t kstart = i + 1, kend, vstart, vend;
            int kflags = 0, vkind = K_STR, vflags = 0;
            if (s[i] != '"') FAIL(p);
            kend = plain_end(p, i);
            if (kend >= 0) {
                i = kend + 1;
            } else {
                p->i = i;
                if (slow_string(p, &kstart, &kend, &kflags) < 0) return -1;
                i = p->i;
            }
            if (s[i] != ':') {
                i = ws_from(s, i);
                if (s[i] != ':') FAIL(p);
            }
            i++;
            if (s[i] <= ' ') i = ws_from(s, i);
            p->i = i;
            KeyWords kw;
            if (read_key_words(p, kstart, kend, kflags, &kw) < 0) return -1;
            int at = kw.head;
            if (at >= 0) { /* a field name: repeats found by a bit per name */
                if (heads & (1u << at)) FAIL(p);
                heads |= 1u << at;
            } else if (note_key(p, kstart, kend, kflags, &kw, first_key, &seen) < 0) {
                return -1;
            }
            int known = at >= 0 && (wanted >> at & 1);
            if (s[i] == '"') { /* the most common value, without a call */
                vstart = i + 1;
                vend = plain_end(p, i);
                if (vend >= 0) {
                    i = vend + 1;
                } else {
                    if (slow_string(p, &vstart, &vend, &vflags) < 0) return -1;
                    i = p->i;
                }
                if (!is_base64(&kw) && push_str(p, vstart, vend, vflags) < 0) return -1;
            } else if (known && item && at == H_METADATA && s[i] == '{') {
                /* the item's metadata: walked, and its own fields recorded */
                int inner;
                if (parse_fields(p, item->meta, &item->metas, META_MASK, &inner, NULL) < 0)
                    return -1;
                vstart = i;
                vend = i = p->i;
                vkind = K_OBJ;
                item->has_meta = 1;
            } else {
                Span value;
                if (parse_value(p, !is_base64(&kw), &value) < 0) return -1;
                i = p->i;
                vstart = value.start;
                vend = value.end;
                vkind = value.kind;
                vflags = value.flags;
            }
            if (known) {
                set_span(&spans[at], vstart, vend, vkind, vflags);
                found |= 1u << at;
            }
            count++;
            if (s[i] <= ' ') i = ws_from(s, i);
            if (s[i] == ',') {
                i++;
                if (s[i] <= ' ') i = ws_from(s, i);
                continue;
            }
            if (s[i] != '}') FAIL(p);
            i++;
            break;
        }
    }
    p->depth--;
    p->i = i;
    if (p->n_keys - first_key > MAX_CHECKED_KEYS && large_object_repeats(p, first_key) < 0)
        return -1;
    p->n_keys = first_key;
    *set |= found;
    *members = count;
    return 0;
}

static int parse_item(Parser *p, int container) {
    Item *item = new_item(p);
    if (!item) return -1;
    Py_ssize_t index = p->n_items - 1;
    Py_ssize_t first = p->n_strs;
    Span raw;
    if (p->i < p->n && p->s[p->i] == '{') {
        int members;
        Py_ssize_t start = p->i;
        /* items are only added between items, so `item` stays put while its fields parse */
        if (parse_fields(p, item->head, &item->heads, ALL_HEAD, &members, item) < 0) return -1;
        item->members = members;
        raw.start = start;
        raw.end = p->i;
        raw.kind = K_OBJ;
        raw.flags = 0;
    } else {
        if (parse_value(p, 1, &raw) < 0) return -1;
        item = &p->items[index];
    }
    item->raw = raw;
    item->container = container;
    item->str_first = first;
    item->str_count = p->n_strs - first;
    return 0;
}

static int parse_container(Parser *p, int which) {
    Container *c = &p->containers[which];
    if (c->present) FAIL(p);
    c->present = 1;
    if (p->i >= p->n || p->s[p->i] != '[') {
        Span value;
        if (parse_value(p, 0, &value) < 0) return -1;
        c->kind = value.kind;
        return 0;
    }
    c->kind = K_ARR;
    c->start = p->i;
    c->first = p->n_items;
    int more = open_members(p, ']');
    while (more > 0) {
        if (parse_item(p, which) < 0) return -1;
        more = next_member(p, ']');
    }
    if (more < 0) return -1;
    c->end = p->i;
    c->count = p->n_items - c->first;
    return 0;
}

static const char *DATA_KEYS[] = {"episodes", "profiles", "agent_cases", "agent_skills",
                                  "unprocessed_messages", "memories", "raw_messages"};
static const int DATA_CONTAINERS[] = {C_EPISODES, C_PROFILES, C_AGENT_CASES, C_AGENT_SKILLS,
                                      C_UNPROCESSED, C_DATA_MEMORIES, C_DATA_RAW_MESSAGES};
static const char *ROOT_KEYS[] = {"data", "results", "memories"};

/* The members of an object, each either a container (by key) or skipped. */
static int parse_envelope(Parser *p, const char **keys, const int *containers, int count,
                          int *data_kind) {
    int more = open_members(p, '}');
    while (more > 0) {
        Span key, value;
        if (read_key(p, &key) < 0) return -1;
        int at = key_index(p, key, keys, count);
        if (at == -2) return -1;
        if (at >= 0 && containers[at] < 0) { /* root "data" */
            if (*data_kind) FAIL(p);
            if (p->i < p->n && p->s[p->i] == '{') {
                int ignored = 0;
                *data_kind = K_OBJ;
                if (parse_envelope(p, DATA_KEYS, DATA_CONTAINERS, 7, &ignored) < 0) return -1;
            } else {
                if (parse_value(p, 0, &value) < 0) return -1;
                *data_kind = value.kind;
            }
        } else if (at >= 0) {
            if (parse_container(p, containers[at]) < 0) return -1;
        } else {
            if (parse_value(p, 0, &value) < 0) return -1;
        }
        more = next_member(p, '}');
    }
    return more < 0 ? -1 : 0;
}

/* The whole body: an object with the containers somewhere in it, and nothing after it. */
int parse_page(Parser *p, int *data_kind) {
    static const int ROOT_CONTAINERS[] = {-1, C_RESULTS, C_MEMORIES};
    skip_ws(p);
    if (p->i >= p->n || p->s[p->i] != '{') FAIL(p);
    if (parse_envelope(p, ROOT_KEYS, ROOT_CONTAINERS, 3, data_kind) < 0) return -1;
    skip_ws(p);
    if (p->i != p->n) FAIL(p);
    return 0;
}
