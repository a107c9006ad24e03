/* JSON tokens: strings (validated, escapes and UTF-8 checked), numbers, words; keys. */

#include "pagescan.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define INDEX_AVX2 1
#endif

const char *HEAD_KEYS[N_HEAD] = {
    "id", "memory_id", "episode_id", "message_id", "type", "memory_type", "session_id",
    "app_id", "project_id", "score", "relativity", "created_at", "timestamp", "episode",
    "summary", "memory", "content", "text", "description", "metadata", "attachments",
    "profile_data", "task_intent"};

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

#ifdef __SSE2__
/* A bit for each of 16 bytes that stops a plain string: a quote, a backslash, or (signed: bytes
   from 0x80 on are negative, so one comparison finds them and controls) below 0x20. */
static inline uint64_t stops16(__m128i x) {
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'),
                  space = _mm_set1_epi8(0x20);
    return (unsigned)_mm_movemask_epi8(_mm_or_si128(
        _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)),
        _mm_cmplt_epi8(x, space)));
}
#endif

/* The end of the run of plain bytes at s[i]: no quote, backslash, control or non-ASCII byte. */
static inline Py_ssize_t plain_run(const unsigned char *s, Py_ssize_t n, Py_ssize_t i) {
#ifdef __SSE2__
    for (; i + 16 <= n; i += 16) {
        uint64_t mask = stops16(_mm_loadu_si128((const __m128i *)(s + i)));
        if (mask) return i + __builtin_ctzll(mask);
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

/* The page's index: a bit for each byte that stops a plain string, a quote or a byte no
   plain string holds (a backslash, or below 0x20 or from 0x80 on: signed, below 0x20). One
   word more than the bytes need, its bytes past the end read as spaces, so that the word
   after a page's last byte can always be read; a stop there is never at a byte of the page. */
static uint64_t stops_scalar(const unsigned char *block) {
    uint64_t bits = 0;
    for (int k = 0; k < 64; k++) {
        unsigned c = block[k];
        bits |= (uint64_t)(c == '"' || c == '\\' || c < 0x20 || c >= 0x80) << k;
    }
    return bits;
}

#ifdef __SSE2__
static void stops_sse2(const unsigned char *s, Py_ssize_t words, uint64_t *out) {
    for (Py_ssize_t w = 0; w < words; w++, s += 64) {
        out[w] = stops16(_mm_loadu_si128((const __m128i *)s)) |
                 stops16(_mm_loadu_si128((const __m128i *)(s + 16))) << 16 |
                 stops16(_mm_loadu_si128((const __m128i *)(s + 32))) << 32 |
                 stops16(_mm_loadu_si128((const __m128i *)(s + 48))) << 48;
    }
}

#endif

#ifdef INDEX_AVX2
__attribute__((target("avx2")))
static inline uint64_t stops32(__m256i x) {
    const __m256i quote = _mm256_set1_epi8('"'), backslash = _mm256_set1_epi8('\\'),
                  space = _mm256_set1_epi8(0x20);
    return (uint32_t)_mm256_movemask_epi8(_mm256_or_si256(
        _mm256_or_si256(_mm256_cmpeq_epi8(x, quote), _mm256_cmpeq_epi8(x, backslash)),
        _mm256_cmpgt_epi8(space, x)));
}

__attribute__((target("avx2")))
static void stops_avx2(const unsigned char *s, Py_ssize_t words, uint64_t *out) {
    for (Py_ssize_t w = 0; w < words; w++, s += 64) {
        out[w] = stops32(_mm256_loadu_si256((const __m256i *)s)) |
                 stops32(_mm256_loadu_si256((const __m256i *)(s + 32))) << 32;
    }
}
#endif

int index_page(Parser *p) {
    Py_ssize_t whole = p->n / 64, words = whole + 1;
    p->stops = PyMem_Malloc((size_t)words * sizeof(uint64_t));
    if (!p->stops) { PyErr_NoMemory(); return -1; }
    p->n_words = words;
#if defined(INDEX_AVX2)
    if (__builtin_cpu_supports("avx2")) stops_avx2(p->s, whole, p->stops);
    else stops_sse2(p->s, whole, p->stops);
#elif defined(__SSE2__)
    stops_sse2(p->s, whole, p->stops);
#else
    for (Py_ssize_t w = 0; w < whole; w++) p->stops[w] = stops_scalar(p->s + (w << 6));
#endif
    unsigned char tail[64];
    memset(tail, ' ', sizeof(tail));
    memcpy(tail, p->s + (whole << 6), (size_t)(p->n - (whole << 6)));
    p->stops[whole] = stops_scalar(tail);
    return 0;
}

/* lex_string's way for strings with escapes, controls or non-ASCII bytes, byte by byte. */
int lex_string_slow(Parser *p, Span *out) {
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

int lex_number(Parser *p, Span *out) {
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

int lex_word(Parser *p, const char *word, int kind, Span *out) {
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
int unescape(const unsigned char *s, Span sp, Buf *b) {
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

/* A key's bytes as two words: the first sixteen, zeros past its end (`read_key_words`). Keys of
   at most sixteen bytes are classified and hashed from these alone. */
uint64_t KEY_MASKS[17][2]; /* filled at import */

static inline void words_of(const unsigned char *s, Py_ssize_t len, int readable,
                            uint64_t *lo, uint64_t *hi) {
    if (readable) { /* sixteen bytes can be read from s: two loads, masked */
        memcpy(lo, s, 8);
        memcpy(hi, s + 8, 8);
        *lo &= KEY_MASKS[len][0];
        *hi &= KEY_MASKS[len][1];
        return;
    }
    *lo = *hi = 0;
    memcpy(lo, s, (size_t)(len < 8 ? len : 8));
    if (len > 8) memcpy(hi, s + 8, (size_t)(len - 8));
}

HeadSlot head_slots[HEAD_SLOTS];
uint64_t head_seed;

int read_key_words_slow(Parser *p, Span sp, KeyWords *kw) {
    Py_ssize_t len = sp.end - sp.start;
    const unsigned char *text = p->s + sp.start;
    if (sp.flags & F_ESC) {
        if (unescape(p->s, sp, &p->scratch) < 0) return -1;
        text = (const unsigned char *)p->scratch.data;
        len = p->scratch.len;
        kw->text = text;
        kw->len = len;
        if (len <= 16) words_of(text, len, 0, &kw->lo, &kw->hi);
    } else {
        kw->text = text;
        kw->len = len;
        if (len <= 16) words_of(text, len, p->n - sp.start >= 16, &kw->lo, &kw->hi);
    }
    if (len > 16) { /* hashed by its first and last eight; never a head key */
        memcpy(&kw->lo, text, 8);
        memcpy(&kw->hi, text + len - 8, 8);
        kw->head = -1;
        return 0;
    }
    kw->head = len <= LONGEST_HEAD ? head_of(kw->lo, kw->hi, len) : -1;
    return 0;
}

/* Index of the key among `keys` (or -1; -2 on a Python error). */
int key_index(Parser *p, Span sp, const char **keys, int count) {
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

void init_lex_tables(void) {
    for (int len = 0; len <= 16; len++) {
        for (int half = 0; half < 2; half++) {
            int bytes = len - 8 * half;
            KEY_MASKS[len][half] = bytes <= 0 ? 0 : bytes >= 8 ? ~0ULL : (1ULL << (8 * bytes)) - 1;
        }
    }
    /* the first odd seed (from a fixed start) under which every head key has its own slot */
    for (uint64_t seed = 0xC2B2AE3D27D4EB4FULL;; seed += 2) {
        int clash = 0;
        for (int k = 0; k < HEAD_SLOTS; k++) head_slots[k].index = head_slots[k].len = -1;
        for (int k = 0; k < N_HEAD; k++) {
            const unsigned char *key = (const unsigned char *)HEAD_KEYS[k];
            Py_ssize_t len = (Py_ssize_t)strlen(HEAD_KEYS[k]);
            uint64_t lo, hi;
            words_of(key, len, 0, &lo, &hi);
            HeadSlot *slot = &head_slots[head_slot(lo, hi, len, seed)];
            if (slot->index >= 0) {
                clash = 1;
                break;
            }
            slot->lo = lo;
            slot->hi = hi;
            slot->index = (int8_t)k;
            slot->len = (int8_t)len;
        }
        if (!clash) {
            head_seed = seed;
            return;
        }
    }
}
