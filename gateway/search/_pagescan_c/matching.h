/* What the Matcher's files share: matcher.c the type (a session's names and their
   attachments), automaton.c the Aho-Corasick automaton over the names (built and walked),
   probe.c the lead filter and the probing table, attach.c an item's attachments found and
   written. */

#ifndef MATCHING_H
#define MATCHING_H

#include "pagescan.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define LEAD_SKIP 1
#endif
/* the lead filter's blocks, 16 positions at a time, need this many bytes from the first */
#define LEAD_BLOCK (16 + LEAD_BYTES - 1)
/* an item's strings are matched with the GIL released from this many bytes on */
#define NOGIL_BYTES 16384

typedef struct {
    const unsigned char *bytes;
    Py_ssize_t len, index;
} NameBytes;

#ifdef LEAD_SKIP
/* Whether a name may start with bytes x, y, z, by the lead filter's tables. */
static inline int may_start(const uint8_t (*t)[2][16], unsigned x, unsigned y, unsigned z) {
    return (t[0][0][x & 15] & t[0][1][x >> 4] & t[1][0][y & 15] & t[1][1][y >> 4] &
            t[2][0][z & 15] & t[2][1][z >> 4]) != 0;
}
#endif

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

/* matcher.c */
int marks_alloc(Marks *marks, Py_ssize_t n_names, Py_ssize_t n_uris);
void marks_free(Marks *marks);

/* automaton.c: -1 out of memory, -2 too many bytes */
int build_automaton(Matcher *m, NameBytes *names, Py_ssize_t n, int probe);
Py_ssize_t find_names(const Matcher *m, const unsigned char *text, Py_ssize_t len, int fold,
                      Marks *marks, uint64_t stamp, Py_ssize_t n_hits);

/* probe.c */
void lead_tables(Matcher *m, const NameBytes *names, Py_ssize_t n);
int probe_tables(Matcher *m, const NameBytes *names, Py_ssize_t n);
#ifdef LEAD_SKIP
__attribute__((target("ssse3")))
Py_ssize_t lead_skip(const uint8_t (*t)[2][16], const unsigned char *text, Py_ssize_t i,
                     Py_ssize_t len);
__attribute__((target("avx2")))
Py_ssize_t probe_names(const Matcher *m, const unsigned char *text, Py_ssize_t len, int fold,
                       Marks *marks, uint64_t stamp, uint64_t again, Py_ssize_t n_hits);
#endif

#endif
