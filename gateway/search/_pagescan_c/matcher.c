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
   automaton reads as before. */

#include "pagescan.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define LEAD_SKIP 1
#endif
/* the lead filter's blocks, 16 positions at a time, need this many bytes from the first */
#define LEAD_BLOCK (16 + LEAD_BYTES - 1)

#define NO_STATE 0xFFFFFFFFu
/* full rows for two cells per state, at least DENSE_CELLS and at most MAX_DENSE_CELLS (a few
   KB for a session of ordinary names; for long names enough that most failure links land on full
   rows, and few enough to stay in the cache) */
#define DENSE_CELLS 4096
#define MAX_DENSE_CELLS 65536
/* an item's strings are matched with the GIL released from this many bytes on */
#define NOGIL_BYTES 16384

static void marks_free(Marks *marks) {
    PyMem_RawFree(marks->names);
    PyMem_RawFree(marks->uris);
    PyMem_RawFree(marks->hits);
    marks->names = marks->uris = NULL;
    marks->hits = NULL;
}

static int marks_alloc(Marks *marks, Py_ssize_t n_names, Py_ssize_t n_uris) {
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

/* The trie edge from `state` on class `c`, or NO_STATE. */
static inline uint32_t edge(const Matcher *m, uint32_t state, uint32_t c) {
    const State *st = &m->states[state];
    if (st->n_edges == 0) return NO_STATE;
    if (st->first_cls == c) return state + 1;
    for (uint32_t e = st->edges, end = st->edges + st->n_edges - 1u; e < end; e++) {
        if (m->edge_cls[e] == c) return m->edge_next[e];
        if (m->edge_cls[e] > c) break; /* children in rising class order */
    }
    return NO_STATE;
}

/* The automaton's move from `state` on class `c` > 0 (a DFA step: failure links followed),
   while it is built: states keep their depth-first numbers, and the rows are found through
   `row`. */
static inline uint32_t build_step(const Matcher *m, uint32_t state, uint32_t c) {
    for (;;) {
        const State *st = &m->states[state];
        if (st->row) return m->delta[st->row - 1 + c - 1];
        uint32_t next = edge(m, state, c);
        if (next != NO_STATE) return next;
        state = st->fail;
    }
}

/* A row has a cell for each class from 1 on (a byte of class 0 goes to the root without one):
   the next state, with these bits set when that state ends a name or has a suffix that does,
   when it has a run, and when it has no row (the scan looks at nothing else on a full row). A
   next state with a row is given as its row's offset (its number << row_shift), so a step from
   row to row is one load, its address the cell before it plus the class; states without rows
   by their number. The root's row is at offset 0 and the root reports nothing, has no run and
   has a row, so a cell of the root is 0: text that keeps coming back to the root can step
   through it without leaving the rows, and without masking a bit off (see find_names). */
#define REPORTS 0x80000000u
#define RUNS 0x40000000u
#define LEAVES 0x20000000u
#define FLAGS (REPORTS | RUNS | LEAVES)
#define STATE_BITS 0x0FFFFFFFu
/* The cell of class c in the row at offset `row`: the address of the class's first cell is
   made from the text alone, so the step the automaton waits on is the load itself (without the
   barrier, the compiler adds the row to the class first, an addition on the path from one
   byte's load to the next). */
static inline uint32_t cell_at(const uint32_t *delta, uint32_t c, uint32_t row) {
    const uint32_t *column = delta + (c - 1);
#if defined(__GNUC__)
    __asm__("" : "+r"(column));
#endif
    return column[row];
}

/* Pair rows: text dense in the names' bytes steps the rows one load a byte, each load's address
   the load before's value, so a byte costs a load's latency whatever else the loop does. Where
   the names use at most MAX_PAIR_CLASSES classes, the shallowest states (at most PAIR_ROWS of
   them) also have a row of cells for two bytes' classes, (c1 - 1) << shift | (c2 - 1): the state
   two bytes on, as its pair row's offset (its number << 2 * shift), when neither step reaches a
   state the scan must look at (a cell with a flag: it reports, has a run or has no row) and
   that state has a pair row too; else PAIR_STOP, and those two bytes are stepped one at a time.
   The dense loop then waits on one load per two bytes. */
#define MAX_PAIR_CLASSES 4
#define PAIR_ROWS 4096
#define PAIR_STOP 0x10000000u
#define PAIR_NONE 0x100u

/* The next state a cell names. */
static inline uint32_t cell_state(uint32_t cell, uint32_t shift) {
    return cell & LEAVES ? cell & STATE_BITS : (cell & STATE_BITS) >> shift;
}

/* the shortest run walked as one (shorter ones are stepped through), and the most bytes a walk
   is put off by */
#define RUN_MIN 8
#define GAP_MAX 1024

typedef struct {
    const unsigned char *bytes;
    Py_ssize_t len, index;
} NameBytes;

/* The lead filter's tables: each distinct first byte gets one of eight buckets, in turn; a
   name sets its bucket's bit for each of its first three bytes (at positions 0, 1, 2; every
   byte at the positions past a shorter name's end), in the low- and high-nibble tables, for
   the byte as given and, when text is lower-cased on the way (`fold`), its ASCII upper case. */
static void lead_tables(Matcher *m, const NameBytes *names, Py_ssize_t n) {
    memset(m->lead, 0, sizeof m->lead);
    m->leads = 0;
#ifdef LEAD_SKIP
    if (n == 0 || !__builtin_cpu_supports("ssse3")) return;
    int bucket_of[256], buckets = 0;
    for (int b = 0; b < 256; b++) bucket_of[b] = -1;
    for (Py_ssize_t k = 0; k < n; k++) {
        const unsigned char *s = names[k].bytes;
        if (bucket_of[s[0]] < 0) bucket_of[s[0]] = buckets++ % 8;
        uint8_t bit = (uint8_t)(1u << bucket_of[s[0]]);
        for (int fold = 0; fold < 2; fold++) {
            for (int at = 0; at < LEAD_BYTES; at++) {
                if (at >= names[k].len) {
                    for (int nib = 0; nib < 16; nib++)
                        m->lead[fold][at][0][nib] |= bit, m->lead[fold][at][1][nib] |= bit;
                    continue;
                }
                unsigned c = s[at], variants[2] = {c, c};
                if (fold && c >= 'a' && c <= 'z') variants[1] = c - 'a' + 'A';
                for (int v = 0; v < 2; v++) {
                    m->lead[fold][at][0][variants[v] & 15] |= bit;
                    m->lead[fold][at][1][variants[v] >> 4] |= bit;
                }
            }
        }
    }
    m->leads = 1;
#else
    (void)names;
    (void)n;
#endif
}

/* Probing: used when the names starting with any one byte come in at most this many lengths */
#define PROBE_LENGTHS 6

/* Every byte with its 0x20 bit set: ASCII letters of either case alike, and a name's bytes
   (lower-cased) alike with any text that lower-cases to them, without lower-casing the text. */
#define CASE_BITS 0x2020202020202020ULL

/* A name's hash for the probes, of its length, first and last eight bytes and, beyond sixteen
   bytes, the eight in its middle, where names that share their start and extension tend to
   differ ("Screenshot 2026-11-25 at 10.02.02.png"); each byte read with `CASE_BITS` set, so text
   hashes as the name it lower-cases to (and a few bytes alike, '_' and DEL, '@' and '`':
   names of one hash are told apart by their bytes). */
static inline uint64_t probe_hash(const unsigned char *s, Py_ssize_t n) {
    uint64_t a = 0, b;
    if (n >= 8) {
        memcpy(&a, s, 8);
        memcpy(&b, s + n - 8, 8);
    } else {
        for (Py_ssize_t k = 0; k < n; k++) a = a << 8 | s[k];
        b = a;
    }
    uint64_t h = mix_words(a | CASE_BITS, b | CASE_BITS, n);
    if (n > 16) {
        uint64_t mid;
        memcpy(&mid, s + n / 2 - 4, 8);
        h ^= ((mid | CASE_BITS) + h) * 0xFF51AFD7ED558CCDULL;
    }
    return h;
}

/* A hash's slot in a table of mask + 1: from its bits mixed with the process's random seed, so
   names cannot be chosen to fall in one run of slots (the table's build and every probe would
   walk it). */
static inline uint32_t probe_slot(uint64_t h, uint32_t mask) {
    return (uint32_t)(((h ^ hash_seed) * 0x9E3779B97F4A7C15ULL) >> 32) & mask;
}

/* The hash table of the names and their lengths by first byte, for `probe_names`; nothing
   (and `probe` unset) when the lead filter is not there or some first byte has names of too
   many lengths. `names` are sorted by `by_bytes` (`build` sorts them): names equal as bytes are
   next to each other, the first given first, and are one name, that one (as the automaton keeps
   it). Names of one tag and length share a slot, chained from it, so the build reads a slot or
   two a name whatever the names (`build_steps`). -1 out of memory. */
static int probe_tables(Matcher *m, const NameBytes *names, Py_ssize_t n) {
    m->probe = 0;
    if (!m->leads || n == 0 || !__builtin_cpu_supports("avx2")) return 0;
    /* each first byte's distinct lengths, rising */
    Py_ssize_t total = 0, found[256][PROBE_LENGTHS];
    uint8_t counts[256] = {0};
    for (Py_ssize_t k = 0; k < n; k++) {
        unsigned b = names[k].bytes[0];
        Py_ssize_t len = names[k].len, j = 0, *held = found[b];
        total += len;
        while (j < counts[b] && held[j] < len) j++;
        if (j < counts[b] && held[j] == len) continue;
        if (counts[b] == PROBE_LENGTHS) return 0; /* too many lengths for this byte */
        memmove(held + j + 1, held + j, (size_t)(counts[b] - j) * sizeof(Py_ssize_t));
        held[j] = len;
        counts[b]++;
    }
    Py_ssize_t *lens = PyMem_RawMalloc(256 * PROBE_LENGTHS * sizeof(Py_ssize_t));
    /* at most a quarter full: runs of held slots stay short whatever the seed (half full,
       4,000 ordinary names took 1.1 to 2.3 slots a name to build, by the seed, and a probe
       met the runs as often) */
    uint32_t size = 2;
    while (size < 4 * (uint64_t)n) size <<= 1;
    m->slots = PyMem_RawMalloc((size_t)size * sizeof(ProbeSlot));
    m->slot_more = PyMem_RawMalloc((size_t)size * sizeof(int32_t));
    m->chained = PyMem_RawMalloc((size_t)n * sizeof(ProbeLink));
    m->name_bytes = PyMem_RawMalloc((size_t)total + 8);
    if (!lens || !m->slots || !m->slot_more || !m->chained || !m->name_bytes) {
        PyMem_RawFree(lens);
        PyMem_RawFree(m->slots);
        PyMem_RawFree(m->slot_more);
        PyMem_RawFree(m->chained);
        PyMem_RawFree(m->name_bytes);
        m->slots = NULL;
        m->slot_more = NULL;
        m->chained = NULL;
        m->name_bytes = NULL;
        return -1;
    }
    Py_ssize_t at = 0;
    for (int b = 0; b < 256; b++) {
        m->len_first[b] = (uint16_t)at;
        m->len_count[b] = counts[b];
        memcpy(lens + at, found[b], counts[b] * sizeof(Py_ssize_t));
        at += counts[b];
    }
    memset(m->name_bytes + total, 0, 8);
    for (uint32_t k = 0; k < size; k++) m->slots[k].name = -1;
    m->probe_mask = size - 1;
    Py_ssize_t off = 0;
    int32_t n_chained = 0;
    uint64_t steps = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        const unsigned char *bytes = names[k].bytes;
        Py_ssize_t len = names[k].len;
        if (k > 0 && names[k - 1].len == len && memcmp(names[k - 1].bytes, bytes, (size_t)len) == 0)
            continue; /* the same bytes as the name before it */
        uint64_t h = probe_hash(bytes, len);
        memcpy(m->name_bytes + off, bytes, (size_t)len);
        for (uint32_t slot = probe_slot(h, m->probe_mask);; slot = (slot + 1) & m->probe_mask) {
            ProbeSlot *held = &m->slots[slot];
            steps++;
            if (held->name < 0) {
                *held = (ProbeSlot){(uint32_t)h, (uint32_t)len, (uint32_t)off,
                                    (int32_t)names[k].index};
                m->slot_more[slot] = -1;
                break;
            }
            if (slot_is(held, (uint32_t)h, (uint32_t)len)) {
                /* names differ: chained from this one */
                m->chained[n_chained] = (ProbeLink){(uint32_t)off, (int32_t)names[k].index,
                                                    m->slot_more[slot]};
                m->slot_more[slot] = n_chained++;
                held->len |= SLOT_CHAINED;
                break;
            }
        }
        off += len;
    }
    m->build_steps = steps;
    m->lens = lens;
    m->probe = 1;
    return 0;
}

#ifdef LEAD_SKIP
/* Whether a name may start with bytes x, y, z, by the lead filter's tables. */
static inline int may_start(const uint8_t (*t)[2][16], unsigned x, unsigned y, unsigned z) {
    return (t[0][0][x & 15] & t[0][1][x >> 4] & t[1][0][y & 15] & t[1][1][y >> 4] &
            t[2][0][z & 15] & t[2][1][z >> 4]) != 0;
}

/* The buckets byte by byte of the 16 at `at`, by one position's nibble tables. */
__attribute__((target("ssse3")))
static inline __m128i buckets_at(const unsigned char *at, __m128i lo, __m128i hi) {
    const __m128i nibble = _mm_set1_epi8(0x0f);
    __m128i x = _mm_loadu_si128((const __m128i *)at);
    return _mm_and_si128(_mm_shuffle_epi8(lo, _mm_and_si128(x, nibble)),
                         _mm_shuffle_epi8(hi, _mm_and_si128(_mm_srli_epi16(x, 4), nibble)));
}

/* The first position from `i` where a name may start by the lead filter, or the first from
   which fewer than LEAD_BLOCK bytes are left (the caller's byte loop reads those). */
__attribute__((target("ssse3")))
static Py_ssize_t lead_skip(const uint8_t (*t)[2][16], const unsigned char *text, Py_ssize_t i,
                            Py_ssize_t len) {
    const __m128i lo0 = _mm_loadu_si128((const __m128i *)t[0][0]),
                  hi0 = _mm_loadu_si128((const __m128i *)t[0][1]),
                  lo1 = _mm_loadu_si128((const __m128i *)t[1][0]),
                  hi1 = _mm_loadu_si128((const __m128i *)t[1][1]),
                  lo2 = _mm_loadu_si128((const __m128i *)t[2][0]),
                  hi2 = _mm_loadu_si128((const __m128i *)t[2][1]),
                  zero = _mm_setzero_si128();
    for (; i + LEAD_BLOCK <= len; i += 16) {
        __m128i all = _mm_and_si128(
            _mm_and_si128(buckets_at(text + i, lo0, hi0), buckets_at(text + i + 1, lo1, hi1)),
            buckets_at(text + i + 2, lo2, hi2));
        int mask = _mm_movemask_epi8(_mm_cmpeq_epi8(all, zero)) ^ 0xFFFF;
        if (mask) return i + __builtin_ctz((unsigned)mask);
    }
    return i;
}
#endif

/* The same once built: the states with rows are numbered first, so a state's row is found by
   its number. */
static inline uint32_t step(const Matcher *m, uint32_t state, uint32_t c) {
    for (;;) {
        if (state < m->n_rows)
            return cell_state(m->delta[((size_t)state << m->row_shift) + c - 1], m->row_shift);
        uint32_t next = edge(m, state, c);
        if (next != NO_STATE) return next;
        state = m->states[state].fail;
    }
}

static int by_bytes(const void *a, const void *b) {
    const NameBytes *x = a, *y = b;
    Py_ssize_t n = x->len < y->len ? x->len : y->len;
    int order = memcmp(x->bytes, y->bytes, (size_t)n);
    if (order) return order;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index; /* names given twice: the first first */
}

/* The pair rows, when the names use few classes; -1 out of memory. */
static int pair_rows(Matcher *m) {
    m->pair = NULL;
    m->pair_cols = NULL;
    m->n_pair_rows = 0;
    if (m->n_cls < 2 || m->n_cls - 1 > MAX_PAIR_CLASSES) return 0;
    const uint32_t shift = m->row_shift, n = m->n_rows < PAIR_ROWS ? m->n_rows : PAIR_ROWS;
    m->pair = PyMem_RawMalloc(((size_t)n << (2 * shift)) * sizeof(uint32_t));
    m->pair_cols = PyMem_RawMalloc(2 * sizeof(*m->pair_cols));
    if (!m->pair || !m->pair_cols) return -1;
    for (int fold = 0; fold < 2; fold++) {
        for (int b = 0; b < 256; b++) {
            uint32_t c = fold ? m->cls_fold[b] : m->cls[b];
            m->pair_cols[fold][0][b] = (uint16_t)(c ? (c - 1) << shift : PAIR_NONE);
            m->pair_cols[fold][1][b] = (uint16_t)(c ? c - 1 : PAIR_NONE);
        }
    }
    for (uint32_t k = 0; k < n; k++) {
        for (uint32_t c1 = 1; c1 < m->n_cls; c1++) {
            uint32_t first = m->delta[((size_t)k << shift) + c1 - 1];
            for (uint32_t c2 = 1; c2 < m->n_cls; c2++) {
                uint32_t *cell = &m->pair[((size_t)k << (2 * shift)) + ((c1 - 1) << shift) + c2 - 1];
                *cell = PAIR_STOP;
                if (first & FLAGS) continue; /* a row's offset: k' << shift */
                uint32_t second = m->delta[first + c2 - 1];
                if (!(second & FLAGS) && (second >> shift) < n) *cell = second << shift;
            }
        }
    }
    m->n_pair_rows = n;
    return 0;
}

/* Build the automaton over names (UTF-8, already lower-cased; sorted here). Needs no GIL (raw
   allocations only): -1 out of memory, -2 too many bytes. */
static int build(Matcher *m, NameBytes *names, Py_ssize_t n, int probe) {
    uint32_t *parent = NULL, *path = NULL, *queue = NULL, *at_depth = NULL;
    uint8_t *label = NULL;
    int status = -1;
    size_t total = 0, longest = 0;
    memset(m->cls, 0, sizeof(m->cls));
    for (Py_ssize_t k = 0; k < n; k++) {
        for (Py_ssize_t j = 0; j < names[k].len; j++) m->cls[names[k].bytes[j]] = 1;
        total += (size_t)names[k].len;
        if ((size_t)names[k].len > longest) longest = (size_t)names[k].len;
    }
    if (total >= STATE_BITS) return -2;
    uint32_t n_cls = 1;
    for (int b = 0; b < 256; b++) m->cls[b] = m->cls[b] ? (uint8_t)n_cls++ : 0;
    for (int b = 0; b < 256; b++) m->cls_fold[b] = m->cls[LOWER[b]];
    m->n_cls = n_cls;
    qsort(names, (size_t)n, sizeof(NameBytes), by_bytes);
    size_t cap = total + 1;
    m->states = PyMem_RawCalloc(cap, sizeof(State));
    parent = PyMem_RawCalloc(cap, sizeof(uint32_t));
    label = PyMem_RawCalloc(cap, 1);
    queue = PyMem_RawMalloc(cap * sizeof(uint32_t));
    path = PyMem_RawMalloc((longest + 1) * sizeof(uint32_t));
    at_depth = PyMem_RawCalloc(longest + 2, sizeof(uint32_t));
    m->edge_cls = PyMem_RawMalloc(cap);
    m->edge_next = PyMem_RawMalloc(cap * sizeof(uint32_t));
    if (!m->states || !parent || !label || !queue || !path || !at_depth || !m->edge_cls ||
        !m->edge_next)
        goto done;
    /* the trie, depth first: each name shares its prefix with the previous one */
    uint32_t n_states = 1;
    m->states[0].name = -1;
    path[0] = 0;
    Py_ssize_t previous_len = 0;
    const unsigned char *previous = NULL;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t shared = 0, len = names[k].len;
        while (previous && shared < previous_len && shared < len &&
               previous[shared] == names[k].bytes[shared])
            shared++;
        for (Py_ssize_t d = shared; d < len; d++) {
            uint32_t s = n_states++, up = path[d];
            m->states[s].name = -1;
            parent[s] = up;
            label[s] = m->cls[names[k].bytes[d]];
            if (m->states[up].n_edges == 0) m->states[up].first_cls = label[s];
            m->states[up].n_edges++;
            path[d + 1] = s;
            at_depth[d + 1]++;
        }
        if (m->states[path[len]].name < 0) m->states[path[len]].name = (int32_t)names[k].index;
        previous = names[k].bytes;
        previous_len = len;
    }
    m->n_states = n_states;
    /* children after the first, grouped by parent, in rising class order (the names' order) */
    uint32_t next_edge = 0;
    for (uint32_t s = 0; s < n_states; s++) {
        m->states[s].edges = next_edge;
        if (m->states[s].n_edges > 1) next_edge += m->states[s].n_edges - 1u;
        m->states[s].n_edges = 0; /* counted again below */
    }
    for (uint32_t s = 1; s < n_states; s++) {
        State *up = &m->states[parent[s]];
        if (up->n_edges > 0) {
            uint32_t e = up->edges + up->n_edges - 1u;
            m->edge_cls[e] = label[s];
            m->edge_next[e] = s;
        }
        up->n_edges++;
    }
    /* rows for the shallowest states, breadth first: as many as `cells` cells of n_cls classes
       hold, each stored in a power of two cells (a shift finds it) for classes 1 to n_cls - 1 */
    size_t cells = 2 * (size_t)n_states;
    if (cells < DENSE_CELLS) cells = DENSE_CELLS;
    if (cells > MAX_DENSE_CELLS) cells = MAX_DENSE_CELLS;
    uint32_t shift = 0;
    while ((1u << shift) < n_cls - 1) shift++;
    m->row_shift = shift;
    uint32_t n_rows = (uint32_t)(cells / n_cls);
    if (n_rows < 1) n_rows = 1;
    if (n_rows > n_states) n_rows = n_states;
    uint32_t n_built = n_rows; /* all of them while failure links are found, which they speed */
    /* and none deeper than two levels below the deepest level among them that still branches
       (the next level holds an eighth more states): below it names seldom branch, failure links
       seldom land, and states without rows walk runs */
    uint32_t through = 1, cut = 0;
    at_depth[0] = 1;
    for (size_t d = 0; d < longest && through < n_rows; d++) {
        through += at_depth[d + 1];
        if (at_depth[d + 1] > at_depth[d] && at_depth[d + 1] >= at_depth[d] + at_depth[d] / 8)
            cut = through + (d + 2 <= longest ? at_depth[d + 2] : 0);
    }
    if (cut && cut < n_rows) n_rows = cut;
    m->delta = PyMem_RawCalloc((size_t)n_built << shift, sizeof(uint32_t));
    if (!m->delta) goto done;
    /* breadth first: failure links, reports and rows; every state they use is already done */
    size_t head = 0, tail = 0;
    queue[tail++] = 0;
    uint32_t rows = 0;
    while (head < tail) {
        uint32_t s = queue[head++];
        State *st = &m->states[s];
        if (s == 0) {
            st->fail = 0;
            st->report = -1;
        } else {
            st->fail = parent[s] == 0 ? 0 : build_step(m, m->states[parent[s]].fail, label[s]);
            st->report = st->name >= 0 ? (int32_t)s : m->states[st->fail].report;
        }
        if (rows < n_built) {
            uint32_t *row = m->delta + ((size_t)rows << shift);
            for (uint32_t c = 1; c < n_cls; c++) {
                uint32_t next = edge(m, s, c);
                row[c - 1] = next != NO_STATE ? next : (s == 0 ? 0 : build_step(m, st->fail, c));
            }
            st->row = (rows << shift) + 1;
            rows++;
        }
        if (st->n_edges) {
            queue[tail++] = s + 1;
            for (uint32_t e = st->edges, end = st->edges + st->n_edges - 1u; e < end; e++)
                queue[tail++] = m->edge_next[e];
        }
    }
    for (uint32_t k = n_rows; k < n_built; k++) m->states[queue[k]].row = 0;
    if (n_built > n_rows) { /* the rows past the cut were only for the failure links */
        uint32_t *kept = PyMem_RawRealloc(m->delta, ((size_t)n_rows << shift) * sizeof(uint32_t));
        if (kept) m->delta = kept;
    }
    /* renumbered: the states with rows first (breadth first), then the others depth first,
       which keeps every such state's first child right after it (its subtree has no rows) */
    uint32_t *renamed = parent; /* no longer needed as parents */
    for (uint32_t k = 0; k < n_rows; k++) renamed[queue[k]] = k;
    uint32_t deep = n_rows;
    for (uint32_t s = 0; s < n_states; s++) {
        if (!m->states[s].row) renamed[s] = deep++;
    }
    State *states = PyMem_RawCalloc(n_states, sizeof(State));
    m->into = PyMem_RawCalloc((size_t)n_states + 8, 1);
    m->runs = PyMem_RawCalloc(n_states, 1);
    if (!states || !m->into || !m->runs) {
        PyMem_RawFree(states);
        goto done;
    }
    uint8_t byte_of[256] = {0};
    for (int b = 0; b < 256; b++) byte_of[m->cls[b]] = (uint8_t)b;
    for (uint32_t s = 0; s < n_states; s++) {
        State st = m->states[s];
        uint32_t to = renamed[s];
        st.fail = renamed[st.fail];
        if (st.report >= 0) st.report = (int32_t)renamed[st.report];
        st.row = 0;
        states[to] = st;
        if (s) m->into[to] = byte_of[label[s]];
        /* for now: 1 its first child is next, 2 it reports, 4 it has one child */
        m->runs[to] = (uint8_t)((st.n_edges && renamed[s + 1] == to + 1) | (st.report >= 0) << 1 |
                                (st.n_edges == 1) << 2);
    }
    for (uint32_t e = 0; e < next_edge; e++) m->edge_next[e] = renamed[m->edge_next[e]];
    /* runs: from each state, how many of the next states follow as first children (its name's
       next bytes) without reporting, counted from the last state back; kept from RUN_MIN on,
       where the state has one child (a walk starts where the name does not branch) */
    uint32_t after = 0, after_reports = 0; /* the state after: its run, whether it reports */
    for (uint32_t s = n_states; s-- > 0;) {
        uint32_t bits = m->runs[s], run = (bits & 1) && !after_reports ? 1u + after : 0;
        after = run > 255 ? 255 : run;
        after_reports = bits & 2;
        m->runs[s] = (uint8_t)(after >= RUN_MIN && (bits & 4) ? after : 0);
    }
    for (uint32_t k = 0; k < n_rows; k++) {
        for (uint32_t c = 1; c < n_cls; c++) {
            uint32_t *cell = &m->delta[((size_t)k << shift) + c - 1], next = renamed[*cell];
            int leaves = next >= n_rows;
            *cell = (leaves ? next : next << shift) | (states[next].report >= 0 ? REPORTS : 0) |
                    (m->runs[next] ? RUNS : 0) | (leaves ? LEAVES : 0);
        }
    }
    PyMem_RawFree(m->states);
    m->states = states;
    m->n_rows = n_rows;
    for (int fold = 0; fold < 2; fold++) {
        for (int b = 0; b < 256; b++) {
            uint32_t c = fold ? m->cls_fold[b] : m->cls[b];
            m->root_moves[fold][b] = c && (m->delta[c - 1] & STATE_BITS) != 0;
        }
    }
    lead_tables(m, names, n);
    if (probe && probe_tables(m, names, n) < 0) goto done;
    if (pair_rows(m) < 0) goto done;
    status = 0;
done:
    PyMem_RawFree(parent);
    PyMem_RawFree(label);
    PyMem_RawFree(queue);
    PyMem_RawFree(path);
    PyMem_RawFree(at_depth);
    return status;
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
        built = build(self, live, n_live, probe);
        Py_END_ALLOW_THREADS
    } else {
        built = build(self, live, n_live, probe);
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

/* How many of the n bytes at `text` (ASCII lower-cased first when `fold`) equal those at
   `name`; `text` has `avail` >= n bytes, `name` n + 7 readable ones. */
static inline Py_ssize_t common_prefix(const unsigned char *text, const unsigned char *name,
                                       Py_ssize_t n, Py_ssize_t avail, int fold) {
    Py_ssize_t k = 0;
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (k < n && avail - k >= 8) { /* eight bytes at a time; the first that differs */
        uint64_t a, b;
        memcpy(&a, text + k, 8);
        memcpy(&b, name + k, 8);
        if (fold && a != b) { /* text as the name is, as a rule: lower-cased only if not */
            if (a & HIGHS) break;
            a = lower_word(a);
        }
        if (a != b) {
            k += __builtin_ctzll(a ^ b) >> 3;
            return k < n ? k : n;
        }
        k += 8;
    }
    if (k >= n) return n;
#else
    (void)avail;
#endif
    while (k < n && (fold ? LOWER[text[k]] : text[k]) == name[k]) k++;
    return k;
}

/* Mark the names ending at `state` (those its chain of suffixes reports) */
static inline Py_ssize_t report(const State *states, uint32_t state, Marks *marks, uint64_t stamp,
                                Py_ssize_t n_hits) {
    int32_t found = states[state].report;
    while (found >= 0) {
        int32_t name = states[found].name;
        if (marks->names[name] == stamp) break; /* and the rest of the chain with it */
        marks->names[name] = stamp;
        marks->hits[n_hits++] = name;
        found = states[states[found].fail].report;
    }
    return n_hits;
}

/* Text that comes back to the root this close to where the root leaves it again, this many
   times running, is stepped through densely for a while (at first DENSE_MIN bytes, twice as
   many each time it comes back to that, at most DENSE_MAX; back to DENSE_MIN once the root skips
   far): there the lead filter finds nothing to skip and leaving the rows costs more than a load
   a byte. */
#define NEAR_BYTES 8
#define NEAR_TIMES 4
#define FAR_BYTES 64
#define DENSE_MIN 256
#define DENSE_MAX 8192

/* Mark the names occurring in text[0:len] (lower-cased on the way when `fold`). Runs without
   the GIL: touches only the automaton (read only) and `marks` (this call's). */
static Py_ssize_t find_names(const Matcher *m, const unsigned char *text, Py_ssize_t len, int fold,
                             Marks *marks, uint64_t stamp, Py_ssize_t n_hits) {
    const uint8_t *cls = fold ? m->cls_fold : m->cls, *moves = m->root_moves[fold];
    const uint32_t *delta = m->delta;
    const State *states = m->states;
    const uint8_t *runs = m->runs, *into = m->into;
#ifdef LEAD_SKIP
    const uint8_t (*leads)[2][16] = m->leads ? m->lead[fold] : NULL;
#endif
    const uint32_t n_rows = m->n_rows, shift = m->row_shift;
    const uint32_t *pair = m->pair, n_pair = m->n_pair_rows;
    const uint16_t *first_col = pair ? m->pair_cols[fold][0] : NULL,
                   *second_col = pair ? m->pair_cols[fold][1] : NULL;
    uint32_t state = 0;
    /* A run walk that stops short puts the next ones off by `gap` bytes, twice as many each
       time (until one goes through): text that keeps leaving names costs one load a byte.
       Meanwhile the rows' loop ignores RUNS (`look`) until byte `retry`. While the text is
       dense (until byte `dense_until`), the rows' loop steps through the root's row as through
       any other. The loop stops at `stop`, the nearer of the two, to end either. */
    Py_ssize_t i = 0, retry = len, gap = RUN_MIN, stop = len, dense_until = 0;
    Py_ssize_t span = DENSE_MIN;
    int near = 0, dense = 0;
    uint32_t look = FLAGS;
    for (;;) {
        int walk;
        if (state < n_rows) {
            uint32_t next, c = 1;
            if (state == 0) { /* the root stays put on every byte it has no edge for */
                Py_ssize_t from = i;
#ifdef LEAD_SKIP
                while (leads && !dense) { /* to where a name may start: a few bytes one at a
                                   time (text that comes back to names soon pays no vector
                                   set-up), then sixteen at a time */
                    Py_ssize_t last = len - (LEAD_BYTES - 1), few = i + 8 < last ? i + 8 : last;
                    while (i < few && !may_start(leads, text[i], text[i + 1], text[i + 2])) i++;
                    if (i >= few && i + LEAD_BLOCK <= len) i = lead_skip(leads, text, i, len);
                    if (i >= last || moves[text[i]] || (i >= few && i + LEAD_BLOCK > len)) break;
                    i++; /* a bucket's other first byte: no name starts here */
                }
#endif
                while (i < len && !moves[text[i]]) i++;
                if (i == len) break;
                if (!dense) {
                    if (i - from >= NEAR_BYTES) {
                        near = 0;
                        if (i - from >= FAR_BYTES) span = DENSE_MIN;
                    } else if (++near >= NEAR_TIMES) { /* dense for a while */
                        near = 0;
                        dense = 1;
                        dense_until = len - i > span ? i + span : len;
                        if (dense_until < stop) stop = dense_until;
                        if (span < DENSE_MAX) span *= 2;
                    }
                }
                /* the root's row: this load waits on no other, so that the way back from the
                   last excursion and this one overlap */
                next = delta[cls[text[i++]] - 1];
            } else {
                next = state << shift;
            }
            /* full rows: one load a byte (the cell is the next row's offset), until a cell says
               to look at its state; a byte of no name goes back to the root without one. A run
               while walks are put off is stepped through; while the text is dense, the root's
               row too (a cell of the root is 0, its row's offset); otherwise the root stops it. */
            for (;;) {
                if (dense) {
                    for (;;) {
                        /* two bytes a load while the state has a pair row and neither the
                           bytes nor the state between them say to stop (`pair_rows`) */
                        if (pair && !(next & FLAGS) && (next >> shift) < n_pair) {
                            uint32_t at = next << shift;
                            while (i + 1 < stop) {
                                uint32_t col = (uint32_t)first_col[text[i]] + second_col[text[i + 1]];
                                if (col >= PAIR_NONE) break; /* a byte of no name */
                                uint32_t cell = pair[at + col];
                                if (cell & PAIR_STOP) break;
                                at = cell;
                                i += 2;
                            }
                            next = at >> shift;
                        }
                        if ((next & FLAGS) || i >= stop) break;
                        if (!(c = cls[text[i++]])) break;
                        next = cell_at(delta, c, next);
                    }
                } else {
                    while (next && !(next & FLAGS) && i < stop) {
                        if (!(c = cls[text[i++]])) break;
                        next = cell_at(delta, c, next);
                    }
                }
                if (!c || (next & look) || (!next && !dense) || i >= stop) break;
                next &= ~RUNS;
            }
            if (!c) next = 0;
            state = cell_state(next, shift);
            if (state == 0 && !(next & RUNS) && i < stop) continue; /* (the root reports
                                                                        nothing) */
            if (next & REPORTS) n_hits = report(states, state, marks, stamp, n_hits);
            walk = (next & RUNS) != 0;
        } else { /* states without rows, a byte at a time, until one has a row, reports or
                    has a run (a byte of no name: back to the root) */
            for (;;) {
                uint32_t c = cls[text[i++]];
                state = c ? step(m, state, c) : 0;
                if (state < n_rows || i == len || states[state].report >= 0 || runs[state]) break;
            }
            n_hits = report(states, state, marks, stamp, n_hits);
            walk = runs[state] != 0;
        }
        if (i == len) break;
        if (i >= stop) { /* the walks put off resume, or the dense stretch ends */
            if (i >= retry) {
                retry = len;
                look = FLAGS;
            }
            if (dense && i >= dense_until) dense = 0;
            stop = dense && dense_until < retry ? dense_until : retry;
        }
        if (!walk || look != FLAGS) continue;
        /* down the name's next bytes, several at a time, while the text follows them (none of
           those states reports) */
        Py_ssize_t left = len - i, n = runs[state] < left ? runs[state] : left;
        Py_ssize_t k = common_prefix(text + i, into + state + 1, n, left, fold);
        state += (uint32_t)k;
        i += k;
        if (i == len) break;
        if (k >= RUN_MIN || k == n) {
            gap = RUN_MIN;
        } else {
            retry = i + gap;
            if (retry > len) retry = len;
            if (retry < stop) stop = retry;
            look = FLAGS & ~RUNS;
            if (gap < GAP_MAX) gap *= 2;
        }
    }
    return n_hits;
}

/* Probing leaves a string to the automaton once its work (places let through, probes, names
   of a chain read past its first, and a unit per eight bytes compared in vain) passes an eighth
   of the bytes it has read,
   plus this: what it does stays linear in the text, and text that keeps it busy costs it a few
   probes. A name is compared to the text until it is found in the item, once at most, so the
   comparisons that find names are bounded by the names' bytes and are not counted. */
#define PROBE_SLACK 8

#ifdef LEAD_SKIP
/* The buckets byte by byte of the 32 at `at`, by one position's nibble tables (both halves). */
__attribute__((target("avx2")))
static inline __m256i wide_buckets_at(const unsigned char *at, __m256i lo, __m256i hi) {
    const __m256i nibble = _mm256_set1_epi8(0x0f);
    __m256i x = _mm256_loadu_si256((const __m256i *)at);
    return _mm256_and_si256(_mm256_shuffle_epi8(lo, _mm256_and_si256(x, nibble)),
                            _mm256_shuffle_epi8(hi, _mm256_and_si256(_mm256_srli_epi16(x, 4),
                                                                     nibble)));
}

#define WIDE_BLOCK (32 + LEAD_BYTES - 1)

/* One position's nibble tables for each of the lead filter's bytes, in both halves. */
typedef struct {
    __m256i lo[LEAD_BYTES], hi[LEAD_BYTES];
} LeadVectors;

__attribute__((target("avx2")))
static inline LeadVectors lead_vectors(const uint8_t (*leads)[2][16]) {
    LeadVectors v;
    for (int at = 0; at < LEAD_BYTES; at++) {
        v.lo[at] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)leads[at][0]));
        v.hi[at] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)leads[at][1]));
    }
    return v;
}

/* The places among the 32 from `at` where a name may start, by the lead filter: a bit each. */
__attribute__((target("avx2")))
static inline unsigned wide_places(const unsigned char *at, const LeadVectors *v) {
    __m256i all = _mm256_and_si256(
        _mm256_and_si256(wide_buckets_at(at, v->lo[0], v->hi[0]),
                         wide_buckets_at(at + 1, v->lo[1], v->hi[1])),
        wide_buckets_at(at + 2, v->lo[2], v->hi[2]));
    return ~(unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(all, _mm256_setzero_si256()));
}

/* The first block of 32 places, from `base` on in steps of 32 up to `full`, where the filter
   lets a place through: its places in `found` and its first place returned; else the first
   block past `full`. Ordinary text is mostly such blocks, so this loop holds only the filter
   (its tables in registers) and reads two blocks a step. */
__attribute__((target("avx2"), noinline))
static Py_ssize_t next_places(const unsigned char *text, Py_ssize_t base, Py_ssize_t full,
                              const LeadVectors *tables, unsigned *found) {
    const LeadVectors v = *tables;
    for (; base + 32 <= full; base += 64) {
        unsigned a = wide_places(text + base, &v), b = wide_places(text + base + 32, &v);
        if (a | b) {
            *found = a ? a : b;
            return a ? base : base + 32;
        }
    }
    if (base <= full) {
        unsigned a = wide_places(text + base, &v);
        if (a) {
            *found = a;
            return base;
        }
        base += 32;
    }
    return base;
}

/* Mark the names occurring in text[0:len], as `find_names`, by probing: at each place the lead
   filter lets through, the names of each length starting with its byte are looked up by the
   hash of as many of the text's bytes, and a slot with that hash compared. Every name occurring
   starts at such a place, so each is found. The places are read 32 at a time as a bit mask,
   and a string's last block overlaps the one before it (it ends at the string's end), so no
   byte is read past the string and none one at a time but in strings shorter than a block;
   places from which no name fits are never let through. Text that keeps the probes busy (many
   places let through, long names compared in vain) is read again by the automaton, whole,
   under its own stamp `again`: the automaton stops a chain of suffixes at the first name it
   has marked (`report`), which is right only for names it marked itself, so probes never
   overwrite its marks. A name found both ways is listed twice at most; its attachments are
   written once (`attach` marks their uris). */
__attribute__((target("avx2")))
static Py_ssize_t probe_names(const Matcher *m, const unsigned char *text, Py_ssize_t len,
                              int fold, Marks *marks, uint64_t stamp, uint64_t again,
                              Py_ssize_t n_hits) {
    const uint8_t (*leads)[2][16] = m->lead[fold];
    const LeadVectors v = lead_vectors(leads);
    const ProbeSlot *slots = m->slots;
    const uint32_t mask = m->probe_mask;
    /* past `end` no name fits in what is left; from `last` on the filter cannot read three
       bytes, so those places (only there when a name is shorter than three) are all let
       through */
    Py_ssize_t work = 0, last = len - (LEAD_BYTES - 1), end = len - m->min_len;
    /* blocks past `full` hold a place past `end` or end past the string: the last one or
       two, read the careful way */
    Py_ssize_t full = len - WIDE_BLOCK < end - 31 ? len - WIDE_BLOCK : end - 31;
    for (Py_ssize_t base = 0; base <= end; base += 32) {
        unsigned places;
        if (base <= full) {
            base = next_places(text, base, full, &v, &places);
            if (base > full) { /* no place in the full blocks: the last ones, if any */
                base -= 32;
                continue;
            }
        } else {
            places = 0;
            if (len >= WIDE_BLOCK) { /* inside the string: the last block ends at its end */
                Py_ssize_t from = base + WIDE_BLOCK <= len ? base : len - WIDE_BLOCK;
                if (base - from < 32) places = wide_places(text + from, &v) >> (base - from);
            } else { /* a string shorter than a block */
                for (Py_ssize_t i = base; i < last && i <= end; i++)
                    if (may_start(leads, text[i], text[i + 1], text[i + 2]))
                        places |= 1u << (i - base);
            }
            for (Py_ssize_t i = last > base ? last : base; i <= end && i < base + 32; i++)
                places |= 1u << (i - base);
            if (end - base < 31) places &= (2u << (end - base)) - 1;
        }
        while (places) {
            Py_ssize_t i = base + __builtin_ctz(places);
            places &= places - 1;
            work++; /* a place let through */
            unsigned b = fold ? LOWER[text[i]] : text[i];
            const Py_ssize_t *lens = m->lens + m->len_first[b];
            for (int k = 0, count = m->len_count[b]; k < count && lens[k] <= len - i; k++) {
                Py_ssize_t n = lens[k];
                uint64_t h = probe_hash(text + i, n);
                /* a probe counts one, not the run of held slots it reads to its own: the
                   slots are seeded, so runs are short whatever the names and the text */
                work++;
                for (uint32_t at = probe_slot(h, mask);; at = (at + 1) & mask) {
                    const ProbeSlot *slot = &slots[at];
                    if (slot->name < 0) break;
                    if (!slot_is(slot, (uint32_t)h, (uint32_t)n)) continue;
                    /* the one slot of this tag and length: its names in turn, but those found
                       already in the item, by a probe or by the automaton (whose marks stay its
                       own), until one is these bytes */
                    Py_ssize_t name = slot->name, off = slot->off;
                    for (int32_t more = slot->len & SLOT_CHAINED ? m->slot_more[at] : -1;;) {
                        uint64_t held = marks->names[name];
                        if (held != stamp && held != again) {
                            if (common_prefix(text + i, m->name_bytes + off, n, len - i, fold) ==
                                n) {
                                marks->names[name] = stamp;
                                marks->hits[n_hits++] = name;
                                break;
                            }
                            work += n >> 3; /* compared in vain */
                        }
                        if (more < 0) break;
                        const ProbeLink *link = &m->chained[more];
                        name = link->name;
                        off = link->off;
                        more = link->next;
                        work++;
                    }
                    break;
                }
            }
            if (work > ((i + 1) >> 3) + PROBE_SLACK) {
                /* the one write to the matcher here, by any thread: atomic */
                __atomic_fetch_add(&((Matcher *)m)->handed_over, 1, __ATOMIC_RELAXED);
                return find_names(m, text, len, fold, marks, again, n_hits);
            }
        }
    }
    return n_hits;
}
#endif

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

/* The marks a render uses for `m` (with the GIL held): its own, unless another thread's render
   holds them, then a set made for this render. -1 out of memory. */
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
