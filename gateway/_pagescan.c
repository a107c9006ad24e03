/*
 * gateway._pagescan: the search page in one pass (SPEC §9), the fast twin of gateway/search.py
 * and gateway/attachment_index.py.
 *
 *   scan(body, native) -> Page | None
 *       Validates the engine's JSON answer, finds the result items in the known containers
 *       (SPEC §6, in gateway/search.py's order), records each item's byte span, the spans of
 *       the fields a normalised result needs, and the spans of every string the matching walks
 *       (values only, nothing under a "base64" key). None when the answer is anything the fast
 *       path does not handle exactly like the Python path (invalid JSON, a missing or odd
 *       container, duplicate keys where they matter, odd ids...): the caller then runs the
 *       Python path, which is the reference and gives the errors.
 *   Page.sessions -> list[str]           distinct session ids of the items, in order
 *   Page.scopes() -> list[tuple]         (session_id, app_id, project_id) per item, None = absent
 *   Page.render(matchers, dropped) -> (bytes, int) | None
 *       The answer: `{"results": [...], "total": n}`, or in native mode the engine's own body
 *       with each kept object item given "attachments" and dropped items removed. `raw` values
 *       are the engine's bytes, copied. The int is the number of attachments attached.
 *   Matcher(names, entries)
 *       names: the session's lower-cased attachment names, sorted; entries[i]: the
 *       (uri_number, attachment_json) pairs of names[i]. A name matches an item when it occurs,
 *       case-insensitively, inside one of the item's walked strings.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define MAX_DEPTH 512

enum { K_NONE = 0, K_STR, K_NUM, K_TRUE, K_FALSE, K_NULL, K_OBJ, K_ARR };
#define F_ESC 1      /* string holds escapes */
#define F_NONASCII 2 /* string holds non-ASCII characters (raw or escaped) */
#define F_INT 4      /* number without fraction or exponent */

typedef struct {
    Py_ssize_t start, end; /* value bytes; for strings, the inside of the quotes */
    int kind, flags;
} Span;

/* ----------------------------------------------------------------------------------------- */
/* growable byte buffer                                                                       */

typedef struct {
    char *data;
    Py_ssize_t len, cap;
    PyObject *bytes; /* when set, `data` is this bytes object's buffer (the answer itself) */
} Buf;

static int buf_reserve(Buf *b, Py_ssize_t extra) {
    if (b->len + extra <= b->cap) return 0;
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

static int buf_put(Buf *b, const void *s, Py_ssize_t n) {
    if (buf_reserve(b, n) < 0) return -1;
    memcpy(b->data + b->len, s, (size_t)n);
    b->len += n;
    return 0;
}

#define PUT_LIT(b, lit) buf_put((b), (lit), (Py_ssize_t)(sizeof(lit) - 1))

static void buf_free(Buf *b) {
    if (b->bytes) Py_CLEAR(b->bytes);
    else PyMem_Free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* A buffer written straight into a new bytes object of `cap` bytes (grown as needed). */
static int buf_bytes(Buf *b, Py_ssize_t cap) {
    b->bytes = PyBytes_FromStringAndSize(NULL, cap);
    if (!b->bytes) return -1;
    b->data = PyBytes_AS_STRING(b->bytes);
    b->len = 0;
    b->cap = cap;
    return 0;
}

/* The written bytes as the bytes object; the buffer is left empty. */
static PyObject *buf_take(Buf *b) {
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

/* ----------------------------------------------------------------------------------------- */
/* the page's records                                                                         */

enum {
    H_ID, H_MEMORY_ID, H_EPISODE_ID, H_MESSAGE_ID, H_TYPE, H_MEMORY_TYPE, H_SESSION_ID,
    H_APP_ID, H_PROJECT_ID, H_SCORE, H_RELATIVITY, H_CREATED_AT, H_TIMESTAMP, H_EPISODE,
    H_SUMMARY, H_MEMORY, H_CONTENT, H_TEXT, H_DESCRIPTION, H_METADATA, H_ATTACHMENTS, N_HEAD
};
static const char *HEAD_KEYS[N_HEAD] = {
    "id", "memory_id", "episode_id", "message_id", "type", "memory_type", "session_id",
    "app_id", "project_id", "score", "relativity", "created_at", "timestamp", "episode",
    "summary", "memory", "content", "text", "description", "metadata", "attachments"};
#define ALL_HEAD ((1u << N_HEAD) - 1)
/* keys gateway/search.py reads inside `metadata` */
#define META_MASK (1u << H_ID | 1u << H_MEMORY_ID | 1u << H_EPISODE_ID | 1u << H_MESSAGE_ID | \
                   1u << H_SESSION_ID | 1u << H_SCORE | 1u << H_RELATIVITY | 1u << H_CREATED_AT | \
                   1u << H_TIMESTAMP)

/* containers, in the order gateway/search.py looks at them */
enum { C_EPISODES, C_PROFILES, C_AGENT_CASES, C_AGENT_SKILLS, C_UNPROCESSED, C_RESULTS,
       C_MEMORIES, C_DATA_MEMORIES, C_DATA_RAW_MESSAGES, N_CONTAINERS };
static const char *CONTAINER_TYPES[N_CONTAINERS] = {
    "episode", "profile", "agent_case", "agent_skill", "unprocessed_message",
    "memory", "memory", "memory", "raw_message"};

typedef struct {
    int present, kind;
    Py_ssize_t start, end; /* the array's bytes, brackets included */
    Py_ssize_t first, count; /* its items in Parser.items */
} Container;

typedef struct {
    Span raw;
    int container, members, has_meta;
    Span head[N_HEAD];
    Span meta[N_HEAD];
    Py_ssize_t str_first, str_count;
    /* resolved after the scan */
    Span id, type, content, score, session, created_at;
    int id_quoted; /* integer id: written inside quotes */
    PyObject *session_id; /* str or NULL */
} Item;

typedef struct {
    const unsigned char *s;
    Py_ssize_t n, i;
    int depth, bail;
    Item *items;
    Py_ssize_t n_items, cap_items;
    Span *strs;
    Py_ssize_t n_strs, cap_strs;
    Span *keys; /* keys of the walked objects being read, innermost last */
    Py_ssize_t n_keys, cap_keys;
    Container containers[N_CONTAINERS];
    Buf scratch, scratch2;
} Parser;

#define FAIL(p) do { (p)->bail = 1; return -1; } while (0)

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
    memset(item, 0, sizeof(Item));
    return item;
}

/* ----------------------------------------------------------------------------------------- */
/* lexing                                                                                     */

static inline void skip_ws(Parser *p) {
    const unsigned char *s = p->s;
    Py_ssize_t i = p->i, n = p->n;
    while (i < n && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) i++;
    p->i = i;
}

static int hex4(const unsigned char *s, Py_ssize_t n, Py_ssize_t at, unsigned *out) {
    if (at + 4 > n) return -1;
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned c = s[at + k], d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return -1;
        v = v << 4 | d;
    }
    *out = v;
    return 0;
}

/* length of the valid UTF-8 sequence at s[i] (a byte >= 0x80), or 0 */
static Py_ssize_t utf8_len(const unsigned char *s, Py_ssize_t n, Py_ssize_t i) {
    unsigned c = s[i];
    if (c >= 0xC2 && c <= 0xDF) {
        return (i + 1 < n && (s[i + 1] & 0xC0) == 0x80) ? 2 : 0;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if (i + 2 >= n) return 0;
        unsigned c1 = s[i + 1];
        if ((c1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && c1 < 0xA0) return 0; /* overlong */
        if (c == 0xED && c1 >= 0xA0) return 0; /* surrogate */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (i + 3 >= n) return 0;
        unsigned c1 = s[i + 1];
        if ((c1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 || (s[i + 3] & 0xC0) != 0x80)
            return 0;
        if (c == 0xF0 && c1 < 0x90) return 0; /* overlong */
        if (c == 0xF4 && c1 >= 0x90) return 0; /* beyond U+10FFFF */
        return 4;
    }
    return 0;
}

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL
#define HAS_ZERO(x) (((x) - ONES) & ~(x) & HIGHS)

/* The end of the run of plain bytes at s[i]: no quote, backslash, control or non-ASCII byte. */
static inline Py_ssize_t plain_run(const unsigned char *s, Py_ssize_t n, Py_ssize_t i) {
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'),
                  space = _mm_set1_epi8(0x20);
    while (i + 16 <= n) {
        __m128i x = _mm_loadu_si128((const __m128i *)(s + i));
        /* signed: bytes >= 0x80 are negative, so one comparison finds them and controls */
        __m128i special = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote),
                                                    _mm_cmpeq_epi8(x, backslash)),
                                       _mm_cmplt_epi8(x, space));
        int mask = _mm_movemask_epi8(special);
        if (mask) return i + __builtin_ctz((unsigned)mask);
        i += 16;
    }
#endif
    while (i + 8 <= n) {
        uint64_t x;
        memcpy(&x, s + i, 8);
        uint64_t special = HAS_ZERO(x ^ (ONES * '"')) | HAS_ZERO(x ^ (ONES * '\\')) |
                           ((x - ONES * 0x20) & ~x & HIGHS) | (x & HIGHS);
        if (special) break;
        i += 8;
    }
    return i;
}

/* At the opening quote: validate the string, fill `out` (inside of the quotes). */
static int lex_string(Parser *p, Span *out) {
    const unsigned char *s = p->s;
    Py_ssize_t n = p->n, i = p->i + 1;
    int flags = 0;
    for (;;) {
        i = plain_run(s, n, i);
        if (i >= n) FAIL(p);
        unsigned c = s[i];
        if (c == '"') break;
        if (c == '\\') {
            flags |= F_ESC;
            if (i + 1 >= n) FAIL(p);
            unsigned e = s[i + 1];
            if (e == 'u') {
                unsigned cp;
                if (hex4(s, n, i + 2, &cp) < 0) FAIL(p);
                i += 6;
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    unsigned lo;
                    if (i + 1 >= n || s[i] != '\\' || s[i + 1] != 'u' || hex4(s, n, i + 2, &lo) < 0 ||
                        lo < 0xDC00 || lo > 0xDFFF)
                        FAIL(p); /* a lone surrogate: left to the Python path */
                    i += 6;
                    flags |= F_NONASCII;
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    FAIL(p);
                } else if (cp >= 0x80) {
                    flags |= F_NONASCII;
                }
                continue;
            }
            if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
                e == 't') {
                i += 2;
                continue;
            }
            FAIL(p);
        }
        if (c < 0x20) FAIL(p);
        if (c < 0x80) {
            i++;
            continue;
        }
        Py_ssize_t len = utf8_len(s, n, i);
        if (!len) FAIL(p);
        flags |= F_NONASCII;
        i += len;
    }
    out->start = p->i + 1;
    out->end = i;
    out->kind = K_STR;
    out->flags = flags;
    p->i = i + 1;
    return 0;
}

static int lex_number(Parser *p, Span *out) {
    const unsigned char *s = p->s;
    Py_ssize_t n = p->n, i = p->i;
    int is_int = 1;
    if (i < n && s[i] == '-') i++;
    if (i >= n) FAIL(p);
    if (s[i] == '0') {
        i++;
    } else if (s[i] >= '1' && s[i] <= '9') {
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    } else {
        FAIL(p);
    }
    if (i < n && s[i] == '.') {
        is_int = 0;
        i++;
        if (i >= n || s[i] < '0' || s[i] > '9') FAIL(p);
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        is_int = 0;
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= n || s[i] < '0' || s[i] > '9') FAIL(p);
        Py_ssize_t digits = i;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        /* beyond about 1e300 a float may read as infinity, which the Python path writes as
           null: such pages are left to it */
        if (i - digits > 2) FAIL(p);
    }
    if (!is_int && i - p->i > 40) FAIL(p); /* very long mantissas: the same care */
    out->start = p->i;
    out->end = i;
    out->kind = K_NUM;
    out->flags = is_int ? F_INT : 0;
    p->i = i;
    return 0;
}

static int lex_word(Parser *p, const char *word, int kind, Span *out) {
    size_t len = strlen(word);
    if (p->i + (Py_ssize_t)len > p->n || memcmp(p->s + p->i, word, len) != 0) FAIL(p);
    out->start = p->i;
    out->end = p->i + (Py_ssize_t)len;
    out->kind = kind;
    out->flags = 0;
    p->i += (Py_ssize_t)len;
    return 0;
}

/* Decode the string `sp` (escapes resolved) into `b` as UTF-8. */
static int unescape(const unsigned char *s, Span sp, Buf *b) {
    b->len = 0;
    if (!(sp.flags & F_ESC)) return buf_put(b, s + sp.start, sp.end - sp.start);
    if (buf_reserve(b, sp.end - sp.start) < 0) return -1; /* decoding never grows a string */
    char *o = b->data;
    Py_ssize_t i = sp.start, k = 0;
    while (i < sp.end) {
        unsigned c = s[i];
        if (c != '\\') {
            o[k++] = (char)c;
            i++;
            continue;
        }
        unsigned e = s[i + 1];
        if (e != 'u') {
            o[k++] = e == 'b' ? '\b' : e == 'f' ? '\f' : e == 'n' ? '\n' : e == 'r' ? '\r'
                   : e == 't' ? '\t' : (char)e;
            i += 2;
            continue;
        }
        unsigned cp, lo;
        hex4(s, sp.end, i + 2, &cp);
        i += 6;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            hex4(s, sp.end, i + 2, &lo);
            i += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        if (cp < 0x80) {
            o[k++] = (char)cp;
        } else if (cp < 0x800) {
            o[k++] = (char)(0xC0 | cp >> 6);
            o[k++] = (char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            o[k++] = (char)(0xE0 | cp >> 12);
            o[k++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            o[k++] = (char)(0x80 | (cp & 0x3F));
        } else {
            o[k++] = (char)(0xF0 | cp >> 18);
            o[k++] = (char)(0x80 | ((cp >> 12) & 0x3F));
            o[k++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            o[k++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    b->len = k;
    return 0;
}

/* Does the string `sp` decode to `word`? */
static int key_is(Parser *p, Span sp, const char *word) {
    size_t len = strlen(word);
    if (!(sp.flags & F_ESC))
        return (size_t)(sp.end - sp.start) == len && memcmp(p->s + sp.start, word, len) == 0;
    if (unescape(p->s, sp, &p->scratch) < 0) return -1;
    return (size_t)p->scratch.len == len && memcmp(p->scratch.data, word, len) == 0;
}

/* HEAD_KEYS indexes by key length, each list ended by -1 (filled at import) */
static signed char heads_by_length[12][N_HEAD + 1];

/* Index of the key among HEAD_KEYS (or -1; -2 on a Python error). */
static int head_index(Parser *p, Span sp) {
    const char *text = (const char *)p->s + sp.start;
    Py_ssize_t len = sp.end - sp.start;
    if (sp.flags & F_ESC) {
        if (unescape(p->s, sp, &p->scratch) < 0) return -2;
        text = p->scratch.data;
        len = p->scratch.len;
    }
    if (len < 2 || len > 11) return -1;
    for (const signed char *k = heads_by_length[len]; *k >= 0; k++) {
        if (HEAD_KEYS[*k][0] == text[0] && memcmp(HEAD_KEYS[*k], text, (size_t)len) == 0)
            return *k;
    }
    return -1;
}

/* Index of the key among `keys` (or -1; -2 on a Python error). */
static int key_index(Parser *p, Span sp, const char **keys, int count) {
    const char *text = (const char *)p->s + sp.start;
    Py_ssize_t len = sp.end - sp.start;
    if (sp.flags & F_ESC) {
        if (unescape(p->s, sp, &p->scratch) < 0) return -2;
        text = p->scratch.data;
        len = p->scratch.len;
    }
    for (int k = 0; k < count; k++) {
        if ((Py_ssize_t)strlen(keys[k]) == len && memcmp(keys[k], text, (size_t)len) == 0) return k;
    }
    return -1;
}

/* Repeated keys. A JSON reader keeps an object's last value of a key, so the Python path never
   sees the earlier ones; the walk here reads every value. Objects the walk reads are therefore
   checked: a repeated key leaves the page to the Python path. A 64-bit filter on each key's hash
   keeps the common case to one test; only a filter hit compares keys. */
static inline uint64_t name_hash(const unsigned char *s, Py_ssize_t n, int fold);

static int note_key(Parser *p, Span key, Py_ssize_t first, uint64_t *seen) {
    const unsigned char *text = p->s + key.start;
    Py_ssize_t len = key.end - key.start;
    if (key.flags & F_ESC) {
        if (unescape(p->s, key, &p->scratch) < 0) return -1;
        text = (const unsigned char *)p->scratch.data;
        len = p->scratch.len;
    }
    uint64_t bit = 1ULL << (name_hash(text, len, 0) >> 58);
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

/* ----------------------------------------------------------------------------------------- */
/* parsing                                                                                    */

/* Any JSON value; with `collect`, its strings (not keys, not under "base64") are walked. */
static int parse_value(Parser *p, int collect, Span *out);

static int parse_object(Parser *p, int collect, Span *out, int *members) {
    Py_ssize_t start = p->i, first_key = p->n_keys;
    uint64_t seen = 0;
    int count = 0;
    if (++p->depth > MAX_DEPTH) FAIL(p);
    p->i++;
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == '}') {
        p->i++;
    } else {
        for (;;) {
            Span key, value;
            if (p->i >= p->n || p->s[p->i] != '"') FAIL(p);
            if (lex_string(p, &key) < 0) return -1;
            skip_ws(p);
            if (p->i >= p->n || p->s[p->i] != ':') FAIL(p);
            p->i++;
            skip_ws(p);
            int walk = collect;
            if (walk) {
                if (note_key(p, key, first_key, &seen) < 0) return -1;
                int b64 = key_is(p, key, "base64");
                if (b64 < 0) return -1;
                walk = !b64;
            }
            if (parse_value(p, walk, &value) < 0) return -1;
            count++;
            skip_ws(p);
            if (p->i < p->n && p->s[p->i] == ',') {
                p->i++;
                skip_ws(p);
                continue;
            }
            if (p->i < p->n && p->s[p->i] == '}') {
                p->i++;
                break;
            }
            FAIL(p);
        }
    }
    p->depth--;
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
    if (++p->depth > MAX_DEPTH) FAIL(p);
    p->i++;
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == ']') {
        p->i++;
    } else {
        for (;;) {
            Span value;
            if (parse_value(p, collect, &value) < 0) return -1;
            skip_ws(p);
            if (p->i < p->n && p->s[p->i] == ',') {
                p->i++;
                skip_ws(p);
                continue;
            }
            if (p->i < p->n && p->s[p->i] == ']') {
                p->i++;
                break;
            }
            FAIL(p);
        }
    }
    p->depth--;
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

/* An object whose members named in `keys` are recorded in `spans` (a repeat of one: bail). */
static int parse_fields(Parser *p, Span *spans, uint32_t wanted, int *members, Item *item) {
    Py_ssize_t first_key = p->n_keys;
    uint64_t seen = 0;
    uint32_t heads = 0;
    int count = 0;
    if (++p->depth > MAX_DEPTH) FAIL(p);
    p->i++;
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == '}') {
        p->i++;
        p->depth--;
        *members = 0;
        return 0;
    }
    for (;;) {
        Span key, value;
        if (p->i >= p->n || p->s[p->i] != '"') FAIL(p);
        if (lex_string(p, &key) < 0) return -1;
        skip_ws(p);
        if (p->i >= p->n || p->s[p->i] != ':') FAIL(p);
        p->i++;
        skip_ws(p);
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
            if (spans[H_METADATA].kind) FAIL(p);
            if (parse_fields(p, item->meta, META_MASK, &inner, NULL) < 0) return -1;
            value.start = start;
            value.end = p->i;
            value.kind = K_OBJ;
            value.flags = 0;
            item->has_meta = 1;
        } else {
            int b64 = key_is(p, key, "base64");
            if (b64 < 0) return -1;
            if (parse_value(p, !b64, &value) < 0) return -1;
        }
        if (known) {
            if (spans[at].kind) FAIL(p); /* a repeated key the result reads */
            spans[at] = value;
        }
        count++;
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            skip_ws(p);
            continue;
        }
        if (p->i < p->n && p->s[p->i] == '}') {
            p->i++;
            break;
        }
        FAIL(p);
    }
    p->depth--;
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
        if (parse_fields(p, item->head, ALL_HEAD, &members, item) < 0) return -1;
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
    if (++p->depth > MAX_DEPTH) FAIL(p);
    p->i++;
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == ']') {
        p->i++;
    } else {
        for (;;) {
            if (parse_item(p, which) < 0) return -1;
            skip_ws(p);
            if (p->i < p->n && p->s[p->i] == ',') {
                p->i++;
                skip_ws(p);
                continue;
            }
            if (p->i < p->n && p->s[p->i] == ']') {
                p->i++;
                break;
            }
            FAIL(p);
        }
    }
    p->depth--;
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
    if (++p->depth > MAX_DEPTH) FAIL(p);
    p->i++;
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == '}') {
        p->i++;
        p->depth--;
        return 0;
    }
    for (;;) {
        Span key, value;
        if (p->i >= p->n || p->s[p->i] != '"') FAIL(p);
        if (lex_string(p, &key) < 0) return -1;
        skip_ws(p);
        if (p->i >= p->n || p->s[p->i] != ':') FAIL(p);
        p->i++;
        skip_ws(p);
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
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            skip_ws(p);
            continue;
        }
        if (p->i < p->n && p->s[p->i] == '}') {
            p->i++;
            break;
        }
        FAIL(p);
    }
    p->depth--;
    return 0;
}

/* ----------------------------------------------------------------------------------------- */
/* the Page type                                                                              */

typedef struct {
    PyObject_HEAD
    PyObject *body;
    const unsigned char *s;
    int native;
    Item *items;
    Py_ssize_t n_items;
    Span *strs;
    Py_ssize_t n_strs;
    Py_ssize_t *selected; /* indexes into items, in answer order */
    Py_ssize_t n_selected;
    Container containers[N_CONTAINERS];
    int everos;
    PyObject *sessions;
} Page;

static void Page_dealloc(Page *self) {
    for (Py_ssize_t k = 0; k < self->n_items; k++) Py_XDECREF(self->items[k].session_id);
    PyMem_Free(self->items);
    PyMem_Free(self->strs);
    PyMem_Free(self->selected);
    Py_XDECREF(self->body);
    Py_XDECREF(self->sessions);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *decode_str(const unsigned char *s, Span sp, Buf *scratch) {
    if (unescape(s, sp, scratch) < 0) return NULL;
    return PyUnicode_DecodeUTF8(scratch->data ? scratch->data : "", scratch->len, "strict");
}

static const Span NO_SPAN = {0, 0, K_NONE, 0};

/* gateway.search.FoundItem.field: the first key set and not null, at the top, then in metadata */
static Span field(Item *item, const int *keys, int count) {
    for (int k = 0; k < count; k++) {
        Span sp = item->head[keys[k]];
        if (sp.kind && sp.kind != K_NULL) return sp;
    }
    if (item->has_meta) {
        for (int k = 0; k < count; k++) {
            Span sp = item->meta[keys[k]];
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

/* Fill an item's result fields as gateway/search.py computes them; -1 to bail. */
static int resolve(Parser *p, Item *item, int native, Buf *scratch) {
    const unsigned char *s = p->s;
    int is_obj = item->raw.kind == K_OBJ;
    item->type = NO_SPAN;
    if (item->container >= C_RESULTS && is_obj) {
        Span t = item->head[H_TYPE], mt = item->head[H_MEMORY_TYPE];
        if (t.kind == K_STR && t.end > t.start) item->type = t;
        else if (mt.kind == K_STR && mt.end > mt.start) item->type = mt;
    }
    if (!is_obj) {
        item->id = NO_SPAN;
        item->content = item->raw.kind == K_STR ? item->raw : NO_SPAN;
        item->score = item->session = item->created_at = NO_SPAN;
        return 0;
    }
    if (native && item->head[H_ATTACHMENTS].kind) return -1; /* replaced in place by Python */
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
        if (item->head[CONTENT_KEYS[k]].kind == K_STR) {
            item->content = item->head[CONTENT_KEYS[k]];
            break;
        }
    }
    item->score = field(item, SCORE_KEYS, 2);
    item->created_at = field(item, CREATED_KEYS, 2);
    /* gateway.search._session_of */
    Span sid = item->head[H_SESSION_ID];
    int truthy;
    switch (sid.kind) {
    case K_STR: truthy = sid.end > sid.start; break;
    case K_NONE: case K_NULL: case K_FALSE: truthy = 0; break;
    case K_TRUE: truthy = 1; break;
    default: return -1; /* numbers and containers: truthiness left to Python */
    }
    if (!truthy && item->has_meta) sid = item->meta[H_SESSION_ID];
    item->session = (sid.kind == K_STR && sid.end > sid.start) ? sid : NO_SPAN;
    if (item->session.kind) {
        item->session_id = decode_str(s, item->session, scratch);
        if (!item->session_id) return -2;
    }
    return 0;
}

static PyTypeObject PageType;

static PyObject *scan(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *body;
    int native;
    if (!PyArg_ParseTuple(args, "Sp", &body, &native)) return NULL;
    Parser p;
    memset(&p, 0, sizeof(p));
    p.s = (const unsigned char *)PyBytes_AS_STRING(body);
    p.n = PyBytes_GET_SIZE(body);
    Page *page = NULL;
    int data_kind = 0;
    static const int ROOT_CONTAINERS[] = {-1, C_RESULTS, C_MEMORIES};
    skip_ws(&p);
    if (p.i >= p.n || p.s[p.i] != '{') goto bail;
    if (parse_envelope(&p, ROOT_KEYS, ROOT_CONTAINERS, 3, &data_kind) < 0) goto fail;
    skip_ws(&p);
    if (p.i != p.n) goto bail;

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
    p.items = NULL;
    p.strs = NULL;
    for (Py_ssize_t k = 0; k < page->n_items; k++) page->items[k].session_id = NULL;

    /* which containers hold the results (gateway.search.find_items) */
    Container *c = page->containers;
    int use[N_CONTAINERS] = {0};
    page->everos = 0;
    if (data_kind == K_OBJ) {
        for (int k = C_EPISODES; k <= C_UNPROCESSED; k++) page->everos |= c[k].present;
    }
    if (page->everos) {
        for (int k = C_EPISODES; k <= C_UNPROCESSED; k++) {
            if (!c[k].present || c[k].kind == K_NULL) continue;
            if (c[k].kind != K_ARR) goto bail_page; /* "... is not a list": Python says so */
            use[k] = 1;
        }
    } else {
        int found = -1;
        if (c[C_RESULTS].present) found = C_RESULTS;
        else if (c[C_MEMORIES].present) found = C_MEMORIES;
        else if (data_kind == K_OBJ && c[C_DATA_MEMORIES].present) found = C_DATA_MEMORIES;
        else if (data_kind == K_OBJ && c[C_DATA_RAW_MESSAGES].present) found = C_DATA_RAW_MESSAGES;
        if (found < 0 || c[found].kind != K_ARR) goto bail_page;
        use[found] = 1;
    }
    Py_ssize_t total = 0;
    for (int k = 0; k < N_CONTAINERS; k++) total += use[k] ? c[k].count : 0;
    page->selected = PyMem_Malloc((size_t)(total ? total : 1) * sizeof(Py_ssize_t));
    if (!page->selected) {
        PyErr_NoMemory();
        goto fail_page;
    }
    page->sessions = PyList_New(0);
    if (!page->sessions) goto fail_page;
    PyObject *seen = PySet_New(NULL);
    if (!seen) goto fail_page;
    for (int k = 0; k < N_CONTAINERS; k++) {
        if (!use[k]) continue;
        for (Py_ssize_t j = 0; j < c[k].count; j++) {
            Py_ssize_t at = c[k].first + j;
            Item *item = &page->items[at];
            int r = resolve(&p, item, native, &p.scratch);
            if (r == -2) { Py_DECREF(seen); goto fail_page; }
            if (r < 0) { Py_DECREF(seen); goto bail_page; }
            page->selected[page->n_selected++] = at;
            if (item->session_id) {
                int had = PySet_Contains(seen, item->session_id);
                if (had < 0 || (!had && (PySet_Add(seen, item->session_id) < 0 ||
                                         PyList_Append(page->sessions, item->session_id) < 0))) {
                    Py_DECREF(seen);
                    goto fail_page;
                }
            }
        }
    }
    Py_DECREF(seen);
    buf_free(&p.scratch);
    PyMem_Free(p.keys);
    buf_free(&p.scratch2);
    return (PyObject *)page;

bail_page:
    Py_DECREF(page);
    buf_free(&p.scratch);
    PyMem_Free(p.keys);
    buf_free(&p.scratch2);
    Py_RETURN_NONE;
fail_page:
    Py_DECREF(page);
    buf_free(&p.scratch);
    PyMem_Free(p.keys);
    buf_free(&p.scratch2);
    return NULL;
bail:
fail:
    PyMem_Free(p.items);
    PyMem_Free(p.strs);
    PyMem_Free(p.keys);
    buf_free(&p.scratch2);
    buf_free(&p.scratch);
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
            Span sp = item->raw.kind == K_OBJ ? item->head[j ? H_PROJECT_ID : H_APP_ID] : NO_SPAN;
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

/* ----------------------------------------------------------------------------------------- */
/* the Matcher type                                                                           */

typedef struct {
    Py_ssize_t offset, len; /* into names */
    uint64_t hash;
} Name;

typedef struct {
    Py_ssize_t offset, len; /* ext bytes (with the dot) in names */
    Py_ssize_t *lengths;    /* distinct byte lengths of names with this ext, ascending */
    Py_ssize_t n_lengths;
} Ext;

typedef struct {
    PyObject_HEAD
    char *names; /* every name's lower-cased UTF-8 bytes */
    Name *list;
    Py_ssize_t n_names;
    Py_ssize_t *table; /* open addressing: name index + 1, 0 = empty */
    Py_ssize_t table_mask;
    int table_shift; /* slot = hash >> table_shift */
    Ext *exts;
    Py_ssize_t n_exts;
    Py_ssize_t *plain; /* names without an extension, found by substring search */
    Py_ssize_t n_plain;
    PyObject *entries; /* list of lists of (uri number, json bytes) */
    Py_ssize_t n_uris;
    /* per-render marks, so nothing is cleared between items */
    uint64_t *name_marks, *uri_marks;
    Py_ssize_t *hits;
} Matcher;

static const unsigned char *LOWER;
static unsigned char lower_table[256];

/* ASCII letters of an all-ASCII word lower-cased (no byte has its high bit set) */
static inline uint64_t lower_word(uint64_t x) {
    uint64_t at_least_a = x + ONES * (0x80 - 'A'), beyond_z = x + ONES * (0x80 - 'Z' - 1);
    return x | ((at_least_a & ~beyond_z & HIGHS) >> 2);
}

/* A name's hash: its length, first and last eight bytes. `fold`: lower-case ASCII text first. */
static inline uint64_t name_hash(const unsigned char *s, Py_ssize_t n, int fold) {
    uint64_t a = 0, b;
    if (n >= 8) {
        memcpy(&a, s, 8);
        memcpy(&b, s + n - 8, 8);
    } else {
        for (Py_ssize_t k = 0; k < n; k++) a = a << 8 | s[k];
        b = a;
    }
    if (fold) {
        a = lower_word(a);
        b = lower_word(b);
    }
    /* the high bits mix every input bit: the table slot is taken from them */
    return a * 0x9E3779B97F4A7C15ULL ^ (b + (uint64_t)n) * 0xC2B2AE3D27D4EB4FULL;
}

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
            Py_ssize_t q = 0;
            while (q < name->len && (fold ? LOWER[text[start + q]] : text[start + q]) == needle[q]) q++;
            if (q == name->len) {
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
static int attach(Page *page, Item *item, Matcher *m, Buf *out, Buf *scratch, Py_ssize_t *count) {
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

static PyTypeObject MatcherType;

static int put_span(Buf *out, Page *page, Span sp) {
    if (!sp.kind) return PUT_LIT(out, "null");
    if (sp.kind == K_STR)
        return buf_put(out, page->s + sp.start - 1, sp.end - sp.start + 2); /* with quotes */
    return buf_put(out, page->s + sp.start, sp.end - sp.start);
}

static int put_result(Page *page, Item *item, Py_ssize_t index, Matcher *m, Buf *out,
                      Buf *scratch, Py_ssize_t *count) {
    const char *type_name = CONTAINER_TYPES[item->container];
    if (PUT_LIT(out, "{\"id\":") < 0) return -1;
    if (item->id.kind == K_STR) {
        if (put_span(out, page, item->id) < 0) return -1;
    } else if (item->id_quoted) {
        if (PUT_LIT(out, "\"") < 0 || put_span(out, page, item->id) < 0 || PUT_LIT(out, "\"") < 0)
            return -1;
    } else {
        char number[32];
        int written = snprintf(number, sizeof(number), ":%zd\"", index);
        if (PUT_LIT(out, "\"") < 0) return -1;
        if (item->type.kind) {
            if (buf_put(out, page->s + item->type.start, item->type.end - item->type.start) < 0)
                return -1;
        } else if (buf_put(out, type_name, (Py_ssize_t)strlen(type_name)) < 0) {
            return -1;
        }
        if (buf_put(out, number, written) < 0) return -1;
    }
    if (PUT_LIT(out, ",\"type\":") < 0) return -1;
    if (item->type.kind) {
        if (put_span(out, page, item->type) < 0) return -1;
    } else if (PUT_LIT(out, "\"") < 0 || buf_put(out, type_name, (Py_ssize_t)strlen(type_name)) < 0 ||
               PUT_LIT(out, "\"") < 0) {
        return -1;
    }
    if (PUT_LIT(out, ",\"content\":") < 0 || put_span(out, page, item->content) < 0 ||
        PUT_LIT(out, ",\"score\":") < 0 || put_span(out, page, item->score) < 0 ||
        PUT_LIT(out, ",\"session_id\":") < 0 || put_span(out, page, item->session) < 0 ||
        PUT_LIT(out, ",\"created_at\":") < 0 || put_span(out, page, item->created_at) < 0 ||
        PUT_LIT(out, ",\"raw\":") < 0 || put_span(out, page, item->raw) < 0 ||
        PUT_LIT(out, ",\"attachments\":") < 0 || attach(page, item, m, out, scratch, count) < 0 ||
        PUT_LIT(out, "}") < 0)
        return -1;
    return 0;
}

static int cmp_container(const void *a, const void *b) {
    const Container *x = *(Container *const *)a, *y = *(Container *const *)b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static PyObject *Page_render(Page *self, PyObject *args) {
    PyObject *matchers, *dropped;
    if (!PyArg_ParseTuple(args, "O!O", &PyDict_Type, &matchers, &dropped)) return NULL;
    if (dropped != Py_None && !PyAnySet_Check(dropped)) {
        PyErr_SetString(PyExc_TypeError, "dropped is a set of item positions or None");
        return NULL;
    }
    Buf out = {0}, scratch = {0};
    Py_ssize_t count = 0, kept = 0;
    /* per item: its matcher, and whether it is dropped */
    Matcher **chosen = PyMem_Calloc((size_t)(self->n_items ? self->n_items : 1), sizeof(Matcher *));
    char *gone = PyMem_Calloc((size_t)(self->n_items ? self->n_items : 1), 1);
    if (!chosen || !gone) {
        PyErr_NoMemory();
        goto error;
    }
    for (Py_ssize_t k = 0; k < self->n_selected; k++) {
        Item *item = &self->items[self->selected[k]];
        if (dropped != Py_None) {
            PyObject *position = PyLong_FromSsize_t(k);
            if (!position) goto error;
            int is_gone = PySet_Contains(dropped, position);
            Py_DECREF(position);
            if (is_gone < 0) goto error;
            gone[self->selected[k]] = (char)is_gone;
        }
        if (item->session_id) {
            PyObject *m = PyDict_GetItemWithError(matchers, item->session_id);
            if (!m && PyErr_Occurred()) goto error;
            if (m && !PyObject_TypeCheck(m, &MatcherType)) {
                PyErr_SetString(PyExc_TypeError, "matchers maps session ids to Matcher");
                goto error;
            }
            chosen[self->selected[k]] = (Matcher *)m;
        }
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
                put_result(self, &self->items[at], kept, chosen[at], &out, &scratch, &count) < 0)
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
            int used = 0;
            for (Py_ssize_t j = 0; j < self->n_selected && !used; j++)
                used = self->items[self->selected[j]].container == k;
            if (used) order[n_order++] = c;
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
                    attach(self, item, chosen[at], &out, &scratch, &count) < 0 ||
                    PUT_LIT(&out, "}") < 0)
                    goto error;
            }
            if (PUT_LIT(&out, "]") < 0) goto error;
            copied = c->end;
        }
        if (buf_put(&out, self->s + copied, PyBytes_GET_SIZE(self->body) - copied) < 0) goto error;
    }
    PyMem_Free(chosen);
    PyMem_Free(gone);
    buf_free(&scratch);
    PyObject *bytes = buf_take(&out);
    if (!bytes) return NULL;
    return Py_BuildValue("(Nn)", bytes, count);
error:
    PyMem_Free(chosen);
    PyMem_Free(gone);
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

static PyGetSetDef Page_getset[] = {
    {"sessions", (getter)Page_sessions, NULL, "Distinct session ids of the items, in order.", NULL},
    {NULL}};

static PyTypeObject PageType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gateway._pagescan.Page",
    .tp_basicsize = sizeof(Page),
    .tp_dealloc = (destructor)Page_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A scanned search answer.",
    .tp_methods = Page_methods,
    .tp_getset = Page_getset,
};

static PyTypeObject MatcherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gateway._pagescan.Matcher",
    .tp_basicsize = sizeof(Matcher),
    .tp_dealloc = (destructor)Matcher_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Matcher(names, entries): one session's attachment names.",
    .tp_init = (initproc)Matcher_init,
    .tp_new = PyType_GenericNew,
};

static PyMethodDef module_methods[] = {
    {"scan", scan, METH_VARARGS, "scan(body, native) -> Page | None"},
    {NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "gateway._pagescan",
    .m_doc = "Search pages scanned, matched and written in one pass (the fast twin of "
             "gateway/search.py).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__pagescan(void) {
    for (int len = 0; len < 12; len++) {
        int at = 0;
        for (int k = 0; k < N_HEAD; k++) {
            if (strlen(HEAD_KEYS[k]) == (size_t)len) heads_by_length[len][at++] = (signed char)k;
        }
        heads_by_length[len][at] = -1;
    }
    for (int c = 0; c < 256; c++) lower_table[c] = (unsigned char)((c >= 'A' && c <= 'Z') ? c + 32 : c);
    LOWER = lower_table;
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
