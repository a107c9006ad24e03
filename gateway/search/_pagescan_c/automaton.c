/* The automaton over a session's names (matcher.c says what it is for): built, then walked
   over an item's strings by `find_names`. */

#include "matching.h"

#define NO_STATE 0xFFFFFFFFu
/* full rows for two cells per state, at least DENSE_CELLS and at most MAX_DENSE_CELLS (a few
   KB for a session of ordinary names; for long names enough that most failure links land on full
   rows, and few enough to stay in the cache) */
#define DENSE_CELLS 4096
#define MAX_DENSE_CELLS 65536

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
int build_automaton(Matcher *m, NameBytes *names, Py_ssize_t n, int probe) {
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
Py_ssize_t find_names(const Matcher *m, const unsigned char *text, Py_ssize_t len, int fold,
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
