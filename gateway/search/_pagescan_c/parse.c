/* The answer's shape: the envelope, the result containers, each item's fields and the
   strings the matching walks. */

#include "pagescan.h"

static int push_str(Parser *p, Span sp) {
    if (p->n_strs == p->cap_strs) {
        Py_ssize_t cap = p->cap_strs ? p->cap_strs * 2 : 256;
        Span *strs = PyMem_Realloc(p->strs, (size_t)cap * sizeof(Span));
        if (!strs) { PyErr_NoMemory(); return -1; }
        p->strs = strs;
        p->cap_strs = cap;
    }
    p->strs[p->n_strs++] = sp;
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
   keeps the common case to one test; only a filter hit compares keys. */
static int note_key(Parser *p, Span key, Py_ssize_t first, uint64_t *seen) {
    const unsigned char *text = p->s + key.start;
    Py_ssize_t len = key.end - key.start;
    if (key.flags & F_ESC) {
        if (unescape(p->s, key, &p->scratch) < 0) return -1;
        text = (const unsigned char *)p->scratch.data;
        len = p->scratch.len;
    }
    /* any hash will do for the filter, as long as a key's decoded bytes alone decide it (an
       escaped spelling must set the same bit as the plain one): the key's length and first
       and last eight bytes (a shorter key: its bytes in the low end of a word, zeros above;
       read as one masked word where eight bytes of the page follow its start) */
    uint64_t a = 0, b = 0;
    if (len >= 8) {
        memcpy(&a, text, 8);
        memcpy(&b, text + len - 8, 8);
    } else if (!(key.flags & F_ESC) && p->n - key.start >= 8) {
        memcpy(&a, text, 8);
        a &= len ? ~0ULL >> (64 - 8 * len) : 0;
    } else {
        memcpy(&a, text, (size_t)len);
    }
    uint64_t bit = 1ULL << (mix_words(a, b, len) >> 58);
    if (*seen & bit) {
        for (Py_ssize_t k = first; k < p->n_keys; k++) {
            Span other = p->keys[k];
            if (!((key.flags | other.flags) & F_ESC)) {
                if (other.end - other.start == len &&
                    memcmp(p->s + other.start, text, (size_t)len) == 0)
                    FAIL(p);
                continue;
            }
            /* escapes on either side: compare what they decode to (the key's own decoded
               bytes stay in `scratch`; the other key is decoded into `scratch2`) */
            if (unescape(p->s, other, &p->scratch2) < 0) return -1;
            if (p->scratch2.len == len &&
                (len == 0 || memcmp(p->scratch2.data, text, (size_t)len) == 0))
                FAIL(p);
        }
    }
    *seen |= bit;
    if (p->n_keys == p->cap_keys) {
        Py_ssize_t cap = p->cap_keys ? p->cap_keys * 2 : 64;
        Span *keys = PyMem_Realloc(p->keys, (size_t)cap * sizeof(Span));
        if (!keys) { PyErr_NoMemory(); return -1; }
        p->keys = keys;
        p->cap_keys = cap;
    }
    p->keys[p->n_keys++] = key;
    return 0;
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
            if (note_key(p, key, first_key, &seen) < 0) return -1;
            int b64 = key_is(p, key, "base64");
            if (b64 < 0) return -1;
            walk = !b64;
        }
        if (parse_value(p, walk, &value) < 0) return -1;
        count++;
        more = next_member(p, '}');
    }
    if (more < 0) return -1;
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
        return collect ? push_str(p, *out) : 0;
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

/* An object whose members named in `wanted` are recorded in `spans`; any repeated key: bail. */
static int parse_fields(Parser *p, Span *spans, uint32_t *set, uint32_t wanted, int *members,
                        Item *item) {
    Py_ssize_t first_key = p->n_keys;
    uint64_t seen = 0;
    uint32_t heads = 0;
    int count = 0, more = open_members(p, '}');
    while (more > 0) {
        Span key, value;
        if (read_key(p, &key) < 0) return -1;
        int at = head_index(p, key);
        if (at == -2) return -1;
        if (at >= 0) { /* a field name: repeats found by a bit per name */
            if (heads & (1u << at)) FAIL(p);
            heads |= 1u << at;
        } else if (note_key(p, key, first_key, &seen) < 0) {
            return -1;
        }
        int known = at >= 0 && (wanted >> at & 1);
        if (known && item && at == H_METADATA && p->i < p->n && p->s[p->i] == '{') {
            /* the item's metadata: walked, and its own fields recorded */
            int inner;
            Py_ssize_t start = p->i;
            if (parse_fields(p, item->meta, &item->metas, META_MASK, &inner, NULL) < 0)
                return -1;
            value.start = start;
            value.end = p->i;
            value.kind = K_OBJ;
            value.flags = 0;
            item->has_meta = 1;
        } else {
            int b64 = at >= 0 ? 0 : key_is(p, key, "base64"); /* no field name is "base64" */
            if (b64 < 0) return -1;
            if (p->s[p->i] == '"') { /* parse_value's most common case, without the call */
                if (lex_string(p, &value) < 0 || (!b64 && push_str(p, value) < 0)) return -1;
            } else if (parse_value(p, !b64, &value) < 0) {
                return -1;
            }
        }
        if (known) {
            spans[at] = value;
            *set |= 1u << at;
        }
        count++;
        more = next_member(p, '}');
    }
    if (more < 0) return -1;
    p->n_keys = first_key;
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
