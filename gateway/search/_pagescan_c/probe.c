/* Where a session's names may start, and which of them start there: the lead filter (a
   position's byte and the next two against the names' first three, by nibble tables, 16 or 32
   positions at a time) and the probing table (the names by a hash of their bytes), which
   `probe_names` reads at each place the filter lets through. */

#include "matching.h"

/* The lead filter's tables: each distinct first byte gets one of eight buckets, in turn; a
   name sets its bucket's bit for each of its first three bytes (at positions 0, 1, 2; every
   byte at the positions past a shorter name's end), in the low- and high-nibble tables, for
   the byte as given and, when text is lower-cased on the way (`fold`), its ASCII upper case. */
void lead_tables(Matcher *m, const NameBytes *names, Py_ssize_t n) {
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
int probe_tables(Matcher *m, const NameBytes *names, Py_ssize_t n) {
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

/* Probing leaves a string to the automaton once its work (places let through, probes, names
   of a chain read past its first, and a unit per eight bytes compared in vain) passes an eighth
   of the bytes it has read, plus this: what it does stays linear in the text, and text that
   keeps it busy costs it a few probes. A name is compared to the text until it is found in the
   item, once at most, so the comparisons that find names are bounded by the names' bytes and
   are not counted. */
#define PROBE_SLACK 8

#ifdef LEAD_SKIP
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
Py_ssize_t lead_skip(const uint8_t (*t)[2][16], const unsigned char *text, Py_ssize_t i,
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
Py_ssize_t probe_names(const Matcher *m, const unsigned char *text, Py_ssize_t len, int fold,
                       Marks *marks, uint64_t stamp, uint64_t again, Py_ssize_t n_hits) {
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
