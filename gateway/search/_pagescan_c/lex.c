/* JSON tokens: strings (validated, escapes and UTF-8 checked), numbers, words; keys. */

#include "pagescan.h"

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
int lex_string(Parser *p, Span *out) {
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

/* Does the string `sp` decode to `word`? */
int key_is(Parser *p, Span sp, const char *word) {
    size_t len = strlen(word);
    if (!(sp.flags & F_ESC))
        return (size_t)(sp.end - sp.start) == len && memcmp(p->s + sp.start, word, len) == 0;
    if (unescape(p->s, sp, &p->scratch) < 0) return -1;
    return (size_t)p->scratch.len == len && memcmp(p->scratch.data, word, len) == 0;
}

/* HEAD_KEYS indexes by key length, each list ended by -1 (filled at import) */
#define LONGEST_HEAD 12
static signed char heads_by_length[LONGEST_HEAD + 1][N_HEAD + 1];

/* Index of the key among HEAD_KEYS (or -1; -2 on a Python error). */
int head_index(Parser *p, Span sp) {
    const char *text = (const char *)p->s + sp.start;
    Py_ssize_t len = sp.end - sp.start;
    if (sp.flags & F_ESC) {
        if (unescape(p->s, sp, &p->scratch) < 0) return -2;
        text = p->scratch.data;
        len = p->scratch.len;
    }
    if (len < 2 || len > LONGEST_HEAD) return -1;
    for (const signed char *k = heads_by_length[len]; *k >= 0; k++) {
        if (HEAD_KEYS[*k][0] == text[0] && memcmp(HEAD_KEYS[*k], text, (size_t)len) == 0)
            return *k;
    }
    return -1;
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
    for (int len = 0; len <= LONGEST_HEAD; len++) {
        int at = 0;
        for (int k = 0; k < N_HEAD; k++) {
            if (strlen(HEAD_KEYS[k]) == (size_t)len) heads_by_length[len][at++] = (signed char)k;
        }
        heads_by_length[len][at] = -1;
    }
}
