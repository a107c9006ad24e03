/*
 * gateway.search._pagescan: the search page in one pass (SPEC §9), the fast twin of gateway/search/items.py
 * and gateway/search/index.py.
 *
 *   scan(body, native) -> Page | None
 *       Validates the engine's JSON answer, finds the result items in the known containers
 *       (SPEC §6, in gateway/search/items.py's order), records each item's byte span, the spans of
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

/* Shared declarations of the page scanner: tokens, buffers, the parser's records, the Page and
   Matcher types. One file per part: buf.c, lex.c (JSON tokens), parse.c (the answer's shape),
   page.c (the Page type: scan, scopes, render), the Matcher in matcher.c (the type),
   automaton.c, probe.c and attach.c (matching.h says which holds what), module.c. */

#ifndef PAGESCAN_H
#define PAGESCAN_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
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

/* Sixteen bytes: a page's items and strings are records of these, read again by the answer
   (pages of 4 GiB and more are left to the Python path, `MAX_PAGE_BYTES`). */
typedef struct {
    uint32_t start, end; /* value bytes; for strings, the inside of the quotes */
    uint32_t kind, flags;
} Span;
#define MAX_PAGE_BYTES ((Py_ssize_t)UINT32_MAX - 1)

typedef struct {
    char *data;
    Py_ssize_t len, cap;
    PyObject *bytes; /* when set, `data` is this bytes object's buffer (the answer itself) */
} Buf;

int buf_grow(Buf *b, Py_ssize_t extra); /* room for `extra` more bytes, the slow way */
void buf_free(Buf *b);
int buf_bytes(Buf *b, Py_ssize_t cap);
PyObject *buf_take(Buf *b);

static inline int buf_reserve(Buf *b, Py_ssize_t extra) {
    return b->len + extra <= b->cap ? 0 : buf_grow(b, extra);
}

static inline int buf_put(Buf *b, const void *s, Py_ssize_t n) {
    /* Nothing to add: an empty buffer's data may still be NULL, and memcpy's arguments must
       not be, even for no bytes (UBSan). */
    if (n <= 0) return 0;
    if (buf_reserve(b, n) < 0) return -1;
    memcpy(b->data + b->len, s, (size_t)n);
    b->len += n;
    return 0;
}

#define PUT_LIT(b, lit) buf_put((b), (lit), (Py_ssize_t)(sizeof(lit) - 1))

/* the page's records */

enum {
    H_ID, H_MEMORY_ID, H_EPISODE_ID, H_MESSAGE_ID, H_TYPE, H_MEMORY_TYPE, H_SESSION_ID,
    H_APP_ID, H_PROJECT_ID, H_SCORE, H_RELATIVITY, H_CREATED_AT, H_TIMESTAMP, H_EPISODE,
    H_SUMMARY, H_MEMORY, H_CONTENT, H_TEXT, H_DESCRIPTION, H_METADATA, H_ATTACHMENTS,
    H_PROFILE_DATA, H_TASK_INTENT, /* the fields a derived content is made of (profiles, agent cases) */
    N_HEAD
};
extern const char *HEAD_KEYS[N_HEAD];
#define ALL_HEAD ((1u << N_HEAD) - 1)
/* keys gateway/search/items.py reads inside `metadata` */
#define META_MASK (1u << H_ID | 1u << H_MEMORY_ID | 1u << H_EPISODE_ID | 1u << H_MESSAGE_ID | \
                   1u << H_SESSION_ID | 1u << H_SCORE | 1u << H_RELATIVITY | 1u << H_CREATED_AT | \
                   1u << H_TIMESTAMP)

/* containers, in the order gateway/search/items.py looks at them */
enum { C_EPISODES, C_PROFILES, C_AGENT_CASES, C_AGENT_SKILLS, C_UNPROCESSED, C_RESULTS,
       C_MEMORIES, C_DATA_MEMORIES, C_DATA_RAW_MESSAGES, N_CONTAINERS };
extern const char *CONTAINER_TYPES[N_CONTAINERS];

typedef struct {
    int present, kind;
    int used; /* its items are the results (set once the shape is known) */
    Py_ssize_t start, end; /* the array's bytes, brackets included */
    Py_ssize_t first, count; /* its items in Parser.items */
} Container;

typedef struct {
    Span raw;
    int container, members, has_meta;
    Py_ssize_t str_first, str_count;
    /* resolved after the scan */
    Span id, type, content, score, session, created_at;
    int id_quoted; /* integer id: written inside quotes */
    PyObject *session_id; /* str or NULL */
    /* the fields read, at the top and in `metadata`: head[k] is set when bit k of `heads` is
       (`meta`, `metas`), else unwritten (read through `head_span` / `meta_span`) */
    uint32_t heads, metas;
    Span head[N_HEAD];
    Span meta[N_HEAD];
} Item;

static inline Span head_span(const Item *item, int k) {
    static const Span none = {0, 0, K_NONE, 0};
    return item->heads >> k & 1 ? item->head[k] : none;
}

static inline Span meta_span(const Item *item, int k) {
    static const Span none = {0, 0, K_NONE, 0};
    return item->metas >> k & 1 ? item->meta[k] : none;
}

typedef struct {
    const unsigned char *s;
    Py_ssize_t n, i;
    int depth, bail;
    Item *items;
    Py_ssize_t n_items, cap_items;
    Span *strs;
    Py_ssize_t n_strs, cap_strs;
    Span *keys; /* keys of the walked objects being read, innermost last */
    uint64_t *key_hashes; /* by key: a seeded hash of its decoded bytes | 1, 0 until needed */
    Py_ssize_t n_keys, cap_keys;
    Container containers[N_CONTAINERS];
    Buf scratch, scratch2;
    /* the page's index (lex.c `index_page`), a bit per byte in words of 64: its quotes and
       the bytes a plain string cannot hold (backslash, control, non-ASCII) */
    uint64_t *stops;
    Py_ssize_t n_words;
} Parser;

/* leave the page to the Python path */
#define FAIL(p) do { (p)->bail = 1; return -1; } while (0)

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
    PyObject *sessions;
    uint64_t session_steps; /* slots read in the table of the page's session ids */
} Page;

/* the bytes at a position the lead filter reads: its own and the next two */
#define LEAD_BYTES 3

/* One session's names as an Aho-Corasick automaton over byte classes (automaton.c). The
   shallowest states, taken breadth first, have a full row of transitions (where ordinary text
   spends its time) and come first; the others are numbered depth first after them (a state's
   first child is the next state, so walking down a name reads memory in order, and its next
   bytes, `into` the next states, can be compared with the text eight at a time: `runs`). */
typedef struct {
    uint32_t fail;      /* the longest proper suffix that is a state */
    int32_t report;     /* the deepest state ending a name among it and its suffixes, -1 = none */
    int32_t name;       /* the name it ends, -1 = none */
    uint32_t row;       /* while built: its row's offset in `delta` + 1, 0 = none */
    uint32_t edges;     /* its children after the first, in `edge_cls` / `edge_next` */
    uint16_t n_edges;   /* children in all */
    uint8_t first_cls;  /* the class of its first child (the next state) */
} State;

/* A slot of the names' hash table (probe.c `probe_names`), sixteen bytes so that a session's
   table stays in few cache lines: a name's tag (its hash's low 32 bits), length, bytes and
   index (-1: an empty slot). Other names of that tag and length are chained from the slot
   (`SLOT_CHAINED` set in `len`; the chain's first in Matcher.slot_more). */
typedef struct {
    uint32_t tag;
    uint32_t len; /* the name's length, with SLOT_CHAINED */
    uint32_t off; /* in Matcher.name_bytes */
    int32_t name;
} ProbeSlot;
#define SLOT_CHAINED 0x80000000u

/* Whether a held slot is the one of names of this tag and length. */
static inline int slot_is(const ProbeSlot *slot, uint32_t tag, uint32_t len) {
    return slot->tag == tag && (slot->len & ~SLOT_CHAINED) == len;
}

/* A name chained from its tag and length's slot: its bytes, index and the next such name. */
typedef struct {
    uint32_t off; /* in Matcher.name_bytes */
    int32_t name;
    int32_t next; /* -1: the chain's last */
} ProbeLink;

typedef struct {
    uint64_t *names;   /* per render call: the stamp of the last item that found each name */
    uint64_t *uris;    /* the same per uri number */
    Py_ssize_t *hits;  /* names found in the item, in the order found */
} Marks;

typedef struct {
    PyObject_HEAD
    Py_ssize_t n_names;
    /* the entries, flat (read per match without touching Python objects): name k's are
       [entry_first[k], entry_first[k + 1]), each a uri number and a span of `json` */
    Py_ssize_t *entry_first, *entry_uri, *entry_json; /* entry_json: n_entries + 1 offsets */
    char *json;
    Py_ssize_t n_uris;
    Py_ssize_t min_len;    /* the shortest name's bytes: shorter strings are not walked */
    uint8_t cls[256];      /* byte -> class (0: in no name) */
    uint8_t cls_fold[256]; /* the same after ASCII lower-casing */
    uint8_t root_moves[2][256]; /* [fold][byte]: the root has an edge on it */
    /* the lead filter (probe.c `lead_skip`): [fold][position][low, high nibble] -> the
       buckets of the names whose first LEAD_BYTES bytes may be those; set when `leads` */
    uint8_t lead[2][LEAD_BYTES][2][16];
    int leads;
    uint32_t n_cls, n_states;
    uint32_t n_rows;       /* states [0, n_rows) have a row, state k's at delta[k << row_shift] */
    uint32_t row_shift;    /* a row's cells: the power of two from n_cls - 1 on */
    State *states;
    uint32_t *delta;       /* rows of next states by class (1 to n_cls - 1, at cell class - 1) */
    /* pair rows (automaton.c `pair_rows`): for the first n_pair_rows rows, where the names use
       few classes, the state two bytes on, found by both bytes' classes with one load */
    uint32_t *pair;
    uint32_t n_pair_rows;
    /* by [fold][first or second byte][byte]: its part of a pair cell's place in the row,
       (class - 1) << row_shift for the first, class - 1 for the second; PAIR_NONE for a byte
       of class 0, so the sum of the two says both bytes are in names when it is below it */
    uint16_t (*pair_cols)[2][256];
    uint8_t *edge_cls;
    uint32_t *edge_next;
    uint8_t *into;         /* by state: the name byte on the trie edge into it (+ 8 spare bytes) */
    uint8_t *runs;         /* by state: how many of the states after it follow as its first
                              child, each from the one before, and report nothing (at most 255) */
    /* probing (probe.c `probe_names`), set when `probe`: each place the lead filter lets
       through is looked up in a hash table of the names, once for each length of the names
       that start with its byte (at most PROBE_LENGTHS) */
    int probe;
    uint64_t handed_over;  /* strings probing left to the automaton (counted atomically) */
    uint64_t tried;        /* strings matched, probed or not (the same) */
    uint32_t probe_mask;   /* the table's slots - 1 (a power of two) */
    ProbeSlot *slots;
    int32_t *slot_more;    /* by slot: the first name chained from it, in `chained` */
    ProbeLink *chained;    /* names of a tag and length another name's slot holds */
    uint64_t build_steps;  /* table slots read and names compared while the table was built */
    unsigned char *name_bytes; /* the names' bytes, one after another, and 8 spare */
    Py_ssize_t *lens;      /* by first byte: the lengths of its names, rising */
    uint16_t len_first[256];
    uint8_t len_count[256];
    Marks own;             /* marks used by one render at a time */
    int busy;              /* `own` is in use (set and read with the GIL held) */
    uint64_t spare_marks;  /* mark sets made for renders that found `own` in use */
} Matcher;

extern PyTypeObject PageType, MatcherType;

/* ASCII upper case to lower case, every other byte unchanged (filled at import) */
extern unsigned char LOWER[256];
/* random per process: seeds the hashes that place in tables what clients and engines chose
   (names, session ids), so none can be chosen to fall in one run of slots */
extern uint64_t hash_seed;

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL
#define HAS_ZERO(x) (((x) - ONES) & ~(x) & HIGHS)

/* The page's bytes are a bytes object's, which end in a NUL one past the last (`s[n]`): a
   byte that must be a given character (not NUL) or whitespace is read without testing the
   bound first. */
static inline Py_ssize_t ws_from(const unsigned char *s, Py_ssize_t i) {
    while (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t') i++;
    return i;
}

static inline void skip_ws(Parser *p) {
    if (p->s[p->i] > ' ') return; /* the usual case: no whitespace */
    p->i = ws_from(p->s, p->i);
}

/* ASCII letters of an all-ASCII word lower-cased (no byte has its high bit set) */
static inline uint64_t lower_word(uint64_t x) {
    uint64_t at_least_a = x + ONES * (0x80 - 'A'), beyond_z = x + ONES * (0x80 - 'Z' - 1);
    return x | ((at_least_a & ~beyond_z & HIGHS) >> 2);
}


/* A 64-bit hash of two words and a length (its high bits mix every input bit) */
static inline uint64_t mix_words(uint64_t a, uint64_t b, Py_ssize_t n) {
    return a * 0x9E3779B97F4A7C15ULL ^ (b + (uint64_t)n) * 0xC2B2AE3D27D4EB4FULL;
}

/* A hash of all of the n bytes at `s`, seeded with `hash_seed`: its high bits mix every byte. */
static inline uint64_t bytes_hash(const unsigned char *s, Py_ssize_t n) {
    uint64_t h = hash_seed ^ (uint64_t)n * 0x9E3779B97F4A7C15ULL, w;
    Py_ssize_t k = 0;
    for (; k + 8 <= n; k += 8) {
        memcpy(&w, s + k, 8);
        h = (h ^ w) * 0xC2B2AE3D27D4EB4FULL;
        h ^= h >> 29;
    }
    if (k < n) {
        w = 0;
        memcpy(&w, s + k, (size_t)(n - k));
        h = (h ^ w) * 0xC2B2AE3D27D4EB4FULL;
        h ^= h >> 29;
    }
    return h * 0x9E3779B97F4A7C15ULL;
}

/* lex.c: JSON tokens. -1 with p->bail set leaves the page to Python; -1 alone is a Python error */
void init_lex_tables(void);
int index_page(Parser *p);
int lex_string_slow(Parser *p, Span *out);

/* The closing quote of the string whose opening quote is at s[i], when the string is plain
   (the first stop after its opening quote is its closing quote): read from the page's index,
   64 bytes a step; else -1, and `lex_string_slow` reads it byte by byte. */
static inline Py_ssize_t plain_end(const Parser *p, Py_ssize_t i) {
    Py_ssize_t start = i + 1, w = start >> 6;
    uint64_t stops = p->stops[w] & (~0ULL << (start & 63));
    while (!stops) {
        if (++w >= p->n_words) return -1;
        stops = p->stops[w];
    }
    Py_ssize_t end = (w << 6) + __builtin_ctzll(stops);
    return p->s[end] == '"' ? end : -1;
}

/* At the opening quote: validate the string, fill `out` (inside of the quotes). */
static inline int lex_string(Parser *p, Span *out) {
    Py_ssize_t end = plain_end(p, p->i);
    if (end < 0) return lex_string_slow(p, out);
    out->start = p->i + 1;
    out->end = end;
    out->kind = K_STR;
    out->flags = 0;
    p->i = end + 1;
    return 0;
}
int lex_number(Parser *p, Span *out);
int lex_word(Parser *p, const char *word, int kind, Span *out);
int unescape(const unsigned char *s, Span sp, Buf *b);
/* A member's key as read for the walk: its decoded bytes (`text`, `len`), its index among
   HEAD_KEYS or -1, and two words the repeated-key filter hashes (a key of at most sixteen
   bytes: those bytes, zeros past its end; a longer one: its first and last eight) */
typedef struct {
    const unsigned char *text; /* the page's bytes, or the parser's scratch when escaped */
    Py_ssize_t len;
    uint64_t lo, hi;
    int head;
} KeyWords;
int read_key_words_slow(Parser *p, Span sp, KeyWords *kw); /* -1 on a Python error */

/* HEAD_KEYS by a hash of a key's two words and length (`head_slot`): each key has a slot of
   its own (the seed is found at import, lex.c), holding its index, length and words; an empty
   slot has index -1 */
#define LONGEST_HEAD 12
#define HEAD_SLOTS 128
typedef struct {
    uint64_t lo, hi;
    int8_t index, len;
} HeadSlot;
extern HeadSlot head_slots[HEAD_SLOTS];
extern uint64_t head_seed;
extern uint64_t KEY_MASKS[17][2]; /* by length: the masks of a key's two words */

/* One multiplication between a key's bytes and its slot's load (every member of every item
   waits on it); the seed found at import makes it perfect on HEAD_KEYS. */
static inline unsigned head_slot(uint64_t lo, uint64_t hi, Py_ssize_t len, uint64_t seed) {
    return (unsigned)(((lo + (hi + (uint64_t)len) * 3) * seed) >> 57);
}

static inline int head_of(uint64_t lo, uint64_t hi, Py_ssize_t len) {
    const HeadSlot *slot = &head_slots[head_slot(lo, hi, len, head_seed)];
    return ((slot->lo ^ lo) | (slot->hi ^ hi) | (uint64_t)(slot->len ^ len)) ? -1 : slot->index;
}

/* The common case inline: a key of at most sixteen bytes without escapes, sixteen bytes
   readable from its start (a bytes object ends in a NUL, so any key but the page's last). */
static inline int read_key_words(Parser *p, Py_ssize_t start, Py_ssize_t end, int flags,
                                  KeyWords *kw) {
    Py_ssize_t len = end - start;
    if ((flags & F_ESC) || len > 16 || p->n - start < 16) {
        Span sp = {start, end, K_STR, flags};
        return read_key_words_slow(p, sp, kw);
    }
    const unsigned char *text = p->s + start;
    memcpy(&kw->lo, text, 8);
    memcpy(&kw->hi, text + 8, 8);
    kw->lo &= KEY_MASKS[len][0];
    kw->hi &= KEY_MASKS[len][1];
    kw->text = text;
    kw->len = len;
    kw->head = head_of(kw->lo, kw->hi, len);
    return 0;
}
#define WORD_BASE64 0x343665736162ULL /* "base64" as a little-endian word */
int key_index(Parser *p, Span sp, const char **keys, int count);

/* parse.c: the whole answer, its containers and items */
int parse_page(Parser *p, int *data_kind);

/* page.c */
PyObject *scan(PyObject *module, PyObject *args);
PyObject *decode_str(const unsigned char *s, Span sp, Buf *scratch);

/* attach.c: the item's attachments as a JSON array appended to `out`, counted */
int attach(Page *page, Item *item, Matcher *m, Marks *marks, Buf *out, Buf *scratch,
           Py_ssize_t *count);

/* A render's marks for one matcher: the matcher's own, held for the whole render, or a set of
   its own while another thread's render holds those (made once a render, not once an item). */
typedef struct {
    Matcher *m;
    Marks spare;
    Marks *use;
} HeldMarks;
int hold_marks(HeldMarks *held, Matcher *m);
void release_marks(HeldMarks *held);

#endif
