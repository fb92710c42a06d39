/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Varlink-style framing and message (de)serialization; see doc/protocol.md. */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "macro.h"
#include "wire/protocol.h"

/* A buffer that held a huge message is given back once drained, so an idle
 * connection does not keep megabytes pinned. */
#define MSGBUF_KEEP_BYTES (64u * 1024u)

void msgbuf_init(msgbuf *m, size_t max_message) {
        *m = (msgbuf) { .max_message = max_message };
}

void msgbuf_done(msgbuf *m) {
        free(m->buf);
        msgbuf_init(m, m->max_message);
}

size_t msgbuf_pending(const msgbuf *m) {
        return m->len - m->head;
}

/* Makes room for size more bytes: moves the unread bytes to the front
 * first (amortized: it happens only when the buffer is full), then grows. */
static int msgbuf_reserve(msgbuf *m, size_t size) {
        size_t need;
        int r;

        if (m->alloc - m->len >= size)
                return 0;

        if (m->head > 0) {
                memmove(m->buf, m->buf + m->head, m->len - m->head);
                m->len -= m->head;
                m->complete -= m->head;
                m->head = 0;
                if (m->alloc - m->len >= size)
                        return 0;
        }

        if (size_add(m->len, size, &need) < 0)
                return -ENOMEM;
        r = GREEDY_REALLOC(m->buf, m->alloc, MAX(need, (size_t) 4096));
        if (r < 0)
                return r;
        return 0;
}

int msgbuf_feed(msgbuf *m, const void *data, size_t size) {
        const char *d = data, *end = d + size, *p = d, *nul = NULL;
        size_t tail = m->len - m->complete;     /* bytes of the pending, unterminated message */
        int r;

        if (size == 0)
                return 0;

        /* Check every message boundary in the new bytes before storing any:
         * one scan, and an oversized message is refused before it costs
         * memory. */
        for (;;) {
                const char *q = memchr(p, 0, (size_t) (end - p));
                size_t n = (size_t) ((q ? q : end) - p);

                if (n > m->max_message || tail > m->max_message - n)
                        return -EMSGSIZE;
                if (!q)
                        break;
                nul = q;
                tail = 0;
                p = q + 1;
                if (p == end)
                        break;
        }

        if (m->head == m->len) {
                /* Everything was consumed: start over at the front for free. */
                m->head = m->len = m->complete = 0;
                if (m->alloc > MSGBUF_KEEP_BYTES && size <= MSGBUF_KEEP_BYTES) {
                        free(m->buf);
                        m->buf = NULL;
                        m->alloc = 0;
                }
        }

        r = msgbuf_reserve(m, size);
        if (r < 0)
                return r;

        memcpy(m->buf + m->len, d, size);
        if (nul)
                m->complete = m->len + (size_t) (nul - d) + 1;
        m->len += size;
        return 0;
}

int msgbuf_next(msgbuf *m, char **ret) {
        const char *start, *nul;
        char *s;
        size_t n;

        if (m->head >= m->complete)
                return 0;

        /* A NUL lies in [head, complete): the one ending this message. */
        start = m->buf + m->head;
        nul = memchr(start, 0, m->complete - m->head);
        if (!nul)
                return -EIO; /* cannot happen: complete always ends at a NUL */
        n = (size_t) (nul - start);

        s = malloc(n + 1);
        if (!s)
                return -ENOMEM;
        memcpy(s, start, n + 1);

        m->head += n + 1;
        if (m->head == m->len)
                m->head = m->len = m->complete = 0;

        *ret = s;
        return 1;
}

/* Length of the UTF-8 sequence at p (n > 0 bytes left), 0 if it is not
 * valid: shortest form, no surrogates, at most U+10FFFF (RFC 3629).
 * json-c's own check lets all three through. */
static size_t utf8_sequence(const unsigned char *p, size_t n) {
        unsigned char c = p[0];
        size_t len;

        if (c < 0x80)
                return 1;
        if (c < 0xc2 || c > 0xf4)       /* a continuation byte, an overlong 2-byte form, beyond U+10FFFF */
                return 0;
        len = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
        if (n < len)
                return 0;
        for (size_t i = 1; i < len; i++)
                if ((p[i] & 0xc0) != 0x80)
                        return 0;
        if ((c == 0xe0 && p[1] < 0xa0) ||       /* overlong 3-byte */
            (c == 0xed && p[1] >= 0xa0) ||      /* U+D800..U+DFFF */
            (c == 0xf0 && p[1] < 0x90) ||       /* overlong 4-byte */
            (c == 0xf4 && p[1] >= 0x90))        /* beyond U+10FFFF */
                return 0;
        return len;
}

static size_t utf8_bad_bytes(const char *s, size_t len) {
        const unsigned char *p = (const unsigned char *) s;
        size_t bad = 0, n;

        for (size_t i = 0; i < len; i += n) {
                n = utf8_sequence(p + i, len - i);
                if (n == 0) {
                        bad++;
                        n = 1;
                }
        }
        return bad;
}

#define UTF8_INVALID "invalid UTF-8 (a stray byte, an overlong form, a surrogate or beyond U+10FFFF)"

static int hex4(const unsigned char *p, const unsigned char *end, unsigned *ret) {
        unsigned v = 0;

        if (end - p < 4)
                return -EBADMSG;
        for (int i = 0; i < 4; i++) {
                int d = unhexchar((char) p[i]);

                if (d < 0)
                        return -EBADMSG;
                v = v * 16 + (unsigned) d;
        }
        *ret = v;
        return 0;
}

/* The string starting at *pp (its opening quote): valid UTF-8, and every
 * \u escape of a surrogate one of a pair. *pp ends after the closing
 * quote. */
static int check_string(const unsigned char **pp, const unsigned char *end, const char **why) {
        const unsigned char *p = *pp + 1;

        while (p < end && *p != '"') {
                unsigned u, lo;
                size_t n;

                if (*p != '\\') {
                        n = utf8_sequence(p, (size_t) (end - p));
                        if (n == 0) {
                                *why = UTF8_INVALID;
                                return -EBADMSG;
                        }
                        p += n;
                        continue;
                }
                if (end - p < 2)
                        return -EBADMSG;
                if (p[1] != 'u') {
                        p += 2;
                        continue;
                }
                if (hex4(p + 2, end, &u) < 0)
                        return -EBADMSG;
                p += 6;
                if (u >= 0xdc00 && u <= 0xdfff) {
                        *why = "a \\u escape of a lone low surrogate";
                        return -EBADMSG;
                }
                if (u >= 0xd800 && u <= 0xdbff) {
                        if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, end, &lo) < 0 || lo < 0xdc00 ||
                            lo > 0xdfff) {
                                *why = "a \\u escape of a lone high surrogate";
                                return -EBADMSG;
                        }
                        p += 6;
                }
        }
        if (p >= end)
                return -EBADMSG;
        *pp = p + 1;
        return 0;
}

/* The number at *pp: an integer must fit int64 or uint64, which json-c
 * would otherwise clamp without a word. */
static int check_number(const unsigned char **pp, const unsigned char *end, const char **why) {
        static const char max_pos[] = "18446744073709551615", max_neg[] = "9223372036854775808";
        const unsigned char *p = *pp, *digits;
        bool negative = false, integer = true;
        const char *max;
        size_t n;

        if (*p == '-') {
                negative = true;
                p++;
        }
        digits = p;
        while (p < end && *p >= '0' && *p <= '9')
                p++;
        n = (size_t) (p - digits);
        while (p < end && (*p == '.' || *p == 'e' || *p == 'E' || *p == '+' || *p == '-' || (*p >= '0' && *p <= '9'))) {
                integer = false;
                p++;
        }
        *pp = p;
        if (!integer)
                return 0;
        max = negative ? max_neg : max_pos;
        if (n > strlen(max) || (n == strlen(max) && memcmp(digits, max, n) > 0)) {
                *why = "an integer out of the 64-bit range";
                return -EBADMSG;
        }
        return 0;
}

/* What json-c lets through, checked on the text it accepted: strings
 * (see check_string()), integers (check_number()), and the number of
 * members of each object in document order, which members_match()
 * compares with what json-c made of them: it keeps the last of two equal
 * keys. */
static int check_text(const char *text, size_t len, uint32_t **ret_members, size_t *ret_n, const char **why) {
        const unsigned char *p = (const unsigned char *) text, *end = p + len;
        size_t stack[PERFSNAP_MAX_JSON_DEPTH + 1], depth = 0, n = 0, alloc = 0;
        _cleanup_free_ uint32_t *members = NULL;
        int r;

        while (p < end) {
                switch (*p) {
                case '"':
                        r = check_string(&p, end, why);
                        if (r < 0)
                                return r;
                        continue;
                case '-':
                case '0' ... '9':
                        r = check_number(&p, end, why);
                        if (r < 0)
                                return r;
                        continue;
                case '{':
                case '[':
                        if (depth >= ELEMENTSOF(stack))
                                return -EBADMSG;
                        if (*p == '[') {
                                stack[depth++] = SIZE_MAX;
                                break;
                        }
                        r = array_reserve_one((void **) &members, &alloc, n, sizeof *members);
                        if (r < 0)
                                return r;
                        members[n] = 0;
                        stack[depth++] = n++;
                        break;
                case '}':
                case ']':
                        if (depth == 0)
                                return -EBADMSG;
                        depth--;
                        break;
                case ':':
                        if (depth == 0 || stack[depth - 1] == SIZE_MAX)
                                return -EBADMSG;
                        members[stack[depth - 1]]++;
                        break;
                default:
                        if (*p >= 0x80) {
                                *why = UTF8_INVALID;
                                return -EBADMSG;
                        }
                }
                p++;
        }
        *ret_members = TAKE_PTR(members);
        *ret_n = n;
        return 0;
}

static bool members_match(struct json_object *o, const uint32_t *members, size_t n, size_t *i) {
        if (json_object_is_type(o, json_type_array)) {
                for (size_t k = 0; k < json_object_array_length(o); k++) {
                        struct json_object *v = json_object_array_get_idx(o, k);

                        if (v && !members_match(v, members, n, i))
                                return false;
                }
                return true;
        }
        if (!json_object_is_type(o, json_type_object))
                return true;
        if (*i >= n || (size_t) json_object_object_length(o) != members[*i])
                return false;
        (*i)++;
        json_object_object_foreach(o, key, v) {
                (void) key;
                if (v && !members_match(v, members, n, i))
                        return false;
        }
        return true;
}

int proto_json_parse_strict(const char *text, struct json_object **ret, const char **ret_why) {
        _cleanup_free_ uint32_t *members = NULL;
        const char *why = "not JSON";
        struct json_tokener *tok;
        struct json_object *o;
        size_t len = strlen(text), n = 0, i = 0;
        int r;

        if (ret_why)
                *ret_why = why;
        /* json_tokener takes an int length. */
        if (len >= INT32_MAX)
                return -EBADMSG;

        tok = json_tokener_new_ex(PERFSNAP_MAX_JSON_DEPTH);
        if (!tok)
                return -ENOMEM;
        /* STRICT also makes anything after the value an error. */
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);

        /* Passing the terminating NUL tells the tokener the input ends
         * here, so a bare number at the end is complete, not "continue". */
        o = json_tokener_parse_ex(tok, text, (int) len + 1);
        if (!o || json_tokener_get_error(tok) != json_tokener_success) {
                json_object_put(o);
                json_tokener_free(tok);
                if (ret_why && utf8_bad_bytes(text, len) > 0)
                        *ret_why = UTF8_INVALID;
                return -EBADMSG;
        }

        /* Belt and braces for trailing bytes: only whitespace may remain. */
        for (size_t k = json_tokener_get_parse_end(tok); k < len; k++)
                if (!strchr(" \t\r\n", text[k])) {
                        json_object_put(o);
                        json_tokener_free(tok);
                        return -EBADMSG;
                }

        json_tokener_free(tok);

        r = check_text(text, len, &members, &n, &why);
        if (r >= 0 && !members_match(o, members, n, &i)) {
                why = "a key given twice in one object";
                r = -EBADMSG;
        }
        if (r < 0) {
                json_object_put(o);
                if (ret_why)
                        *ret_why = why;
                return r;
        }
        *ret = o;
        return 0;
}

int proto_json_parse(const char *text, struct json_object **ret) {
        return proto_json_parse_strict(text, ret, NULL);
}

int proto_json_u64(struct json_object *v, uint64_t max, uint64_t *ret) {
        uint64_t u;

        /* Above INT64_MAX json-c keeps a uint64, which get_int64() clamps:
         * the sign from get_int64(), the value from get_uint64(). */
        if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0)
                return -EBADMSG;
        u = json_object_get_uint64(v);
        if (u > max)
                return -ERANGE;
        *ret = u;
        return 0;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct json_object *, json_object_put)

/* Varlink names: interface ("io.perfsnap") dot member ("Query"). Restrict to
 * a plain charset so a method name is safe to log and to echo back. */
static bool method_name_valid(const char *s, size_t len) {
        if (len == 0 || len > 255 || s[0] == '.' || s[len - 1] == '.')
                return false;
        for (size_t i = 0; i < len; i++) {
                char c = s[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                      (c >= '0' && c <= '9') || c == '.'))
                        return false;
        }
        return true;
}

/* Optional boolean member: absent/null -> false; anything else is an error. */
static int get_optional_bool(struct json_object *obj, const char *key, bool *ret) {
        struct json_object *v;

        if (!json_object_object_get_ex(obj, key, &v) || !v) {
                *ret = false;
                return 0;
        }
        if (!json_object_is_type(v, json_type_boolean))
                return -EBADMSG;
        *ret = json_object_get_boolean(v);
        return 0;
}

/* "parameters": absent or null -> new empty object; must otherwise be an
 * object. Returns a new reference. */
static int get_parameters(struct json_object *obj, struct json_object **ret) {
        struct json_object *v;

        if (!json_object_object_get_ex(obj, "parameters", &v) || !v) {
                v = json_object_new_object();
                if (!v)
                        return -ENOMEM;
                *ret = v;
                return 0;
        }
        if (!json_object_is_type(v, json_type_object))
                return -EBADMSG;
        *ret = json_object_get(v);
        return 0;
}

int proto_call_parse_why(const char *msg, proto_call *ret, const char **ret_why) {
        _cleanup_(json_object_putp) struct json_object *o = NULL, *params = NULL;
        const char *why = NULL;
        struct json_object *m;
        bool more, oneway;
        char *method;
        int r;

        r = proto_json_parse_strict(msg, &o, &why);
        if (r >= 0 && !json_object_is_type(o, json_type_object)) {
                why = "not a JSON object";
                r = -EBADMSG;
        }
        if (r >= 0 && (!json_object_object_get_ex(o, "method", &m) || !json_object_is_type(m, json_type_string) ||
                       /* get_string_len, not strlen: a "\u0000" inside must not hide a tail. */
                       !method_name_valid(json_object_get_string(m), (size_t) json_object_get_string_len(m)))) {
                why = "no string \"method\" that is a varlink name";
                r = -EBADMSG;
        }
        if (r >= 0) {
                r = get_parameters(o, &params);
                why = "\"parameters\" is not an object";
        }
        if (r >= 0) {
                r = get_optional_bool(o, "more", &more);
                why = "\"more\" is not a boolean";
        }
        if (r >= 0) {
                r = get_optional_bool(o, "oneway", &oneway);
                why = "\"oneway\" is not a boolean";
        }
        if (r >= 0 && more && oneway) {
                why = "\"more\" and \"oneway\" together: a call that wants no reply wants no continued ones";
                r = -EBADMSG;
        }
        if (r < 0) {
                if (ret_why)
                        *ret_why = r == -ENOMEM ? "out of memory" : why;
                return r;
        }

        method = strdup(json_object_get_string(m));
        if (!method)
                return -ENOMEM;

        *ret = (proto_call) {
                .method = method,
                .parameters = TAKE_PTR(params),
                .more = more,
                .oneway = oneway,
        };
        return 0;
}

int proto_call_parse(const char *msg, proto_call *ret) {
        return proto_call_parse_why(msg, ret, NULL);
}

void proto_call_done(proto_call *c) {
        if (!c)
                return;
        free(c->method);
        json_object_put(c->parameters);
        *c = (proto_call) {};
}

/* A copy of serialized JSON s with every byte that is not part of valid
 * UTF-8 written as "\ufffd". Such bytes can only be inside strings (json-c
 * writes them as they are): names the kernel and processes chose, which
 * need not be UTF-8 (a comm set with prctl(PR_SET_NAME), a file name). */
static char *utf8_repaired(const char *s) {
        const unsigned char *p = (const unsigned char *) s;
        size_t len = strlen(s), bad = utf8_bad_bytes(s, len), n;
        char *out, *o;

        if (bad == 0)
                return strdup(s);
        if (bad > (SIZE_MAX - len - 1) / 5)
                return NULL;
        out = o = malloc(len + bad * 5 + 1);
        if (!out)
                return NULL;
        for (size_t i = 0; i < len; i += n) {
                n = utf8_sequence(p + i, len - i);
                if (n == 0) {
                        memcpy(o, "\\ufffd", 6);
                        o += 6;
                        n = 1;
                } else {
                        memcpy(o, p + i, n);
                        o += n;
                }
        }
        *o = 0;
        return out;
}

void proto_buf_add(proto_buf *b, const char *s, size_t n) {
        size_t want;

        if (b->failed)
                return;
        if (size_add(b->len, n, &want) < 0 || size_add(want, 1, &want) < 0) {
                b->failed = true;
                return;
        }
        if (GREEDY_REALLOC(b->data, b->alloc, want) < 0) {
                b->failed = true;
                return;
        }
        memcpy(b->data + b->len, s, n);
        b->len += n;
        b->data[b->len] = 0;
}

void proto_buf_add_str(proto_buf *b, const char *s) {
        proto_buf_add(b, s, strlen(s));
}

/* Digits by hand: printf's machinery is most of the cost of an answer of
 * many small numbers (perf.data exports). */
void proto_buf_add_u64(proto_buf *b, uint64_t v) {
        char t[24], *p = t + sizeof t;

        do
                *--p = (char) ('0' + v % 10);
        while ((v /= 10) != 0);
        proto_buf_add(b, p, (size_t) (t + sizeof t - p));
}

void proto_buf_add_i64(proto_buf *b, int64_t v) {
        if (v < 0) {
                proto_buf_add(b, "-", 1);
                proto_buf_add_u64(b, -(uint64_t) v);
        } else
                proto_buf_add_u64(b, (uint64_t) v);
}

void proto_buf_add_hex(proto_buf *b, uint64_t v) {
        char t[16], *p = t + sizeof t;

        do
                *--p = "0123456789abcdef"[v & 15];
        while ((v >>= 4) != 0);
        proto_buf_add(b, p, (size_t) (t + sizeof t - p));
}

void proto_buf_add_json_string(proto_buf *b, const char *s) {
        const unsigned char *p = (const unsigned char *) s;
        size_t len = strlen(s), run = 0, n;

        proto_buf_add(b, "\"", 1);
        /* Runs of bytes that need no escape are copied at once. */
        for (size_t i = 0; i < len; i += n) {
                const char *esc = NULL;
                char u[8];

                n = utf8_sequence(p + i, len - i);
                if (n == 0) {
                        esc = "\\ufffd";
                        n = 1;
                } else if (n == 1) {
                        switch (p[i]) {
                        case '"': esc = "\\\""; break;
                        case '\\': esc = "\\\\"; break;
                        case '\b': esc = "\\b"; break;
                        case '\f': esc = "\\f"; break;
                        case '\n': esc = "\\n"; break;
                        case '\r': esc = "\\r"; break;
                        case '\t': esc = "\\t"; break;
                        default:
                                if (p[i] < 0x20) {
                                        snprintf(u, sizeof u, "\\u%04x", p[i]);
                                        esc = u;
                                }
                        }
                }
                if (!esc)
                        continue;
                proto_buf_add(b, s + run, i - run);
                proto_buf_add_str(b, esc);
                run = i + n;
        }
        proto_buf_add(b, s + run, len - run);
        proto_buf_add(b, "\"", 1);
}

/* Adds parameters (a new reference, or a new empty object for NULL) and
 * serializes, as valid UTF-8. */
static char *format_message(struct json_object *o, struct json_object *parameters) {
        struct json_object *p;
        const char *s;

        p = parameters ? json_object_get(parameters) : json_object_new_object();
        if (!p || json_object_object_add(o, "parameters", p) < 0) {
                json_object_put(p);
                return NULL;
        }

        s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        return s ? utf8_repaired(s) : NULL;
}

static int add_string(struct json_object *o, const char *key, const char *value) {
        struct json_object *v = json_object_new_string(value);

        if (!v || json_object_object_add(o, key, v) < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}

static int add_true(struct json_object *o, const char *key) {
        struct json_object *v = json_object_new_boolean(1);

        if (!v || json_object_object_add(o, key, v) < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}

char *proto_format_call(const char *method, struct json_object *parameters, bool more) {
        _cleanup_(json_object_putp) struct json_object *o = json_object_new_object();

        if (!o || !method || add_string(o, "method", method) < 0)
                return NULL;
        if (more && add_true(o, "more") < 0)
                return NULL;
        return format_message(o, parameters);
}

char *proto_format_reply(struct json_object *parameters, bool continues) {
        _cleanup_(json_object_putp) struct json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        if (continues && add_true(o, "continues") < 0)
                return NULL;
        return format_message(o, parameters);
}

char *proto_format_error(const char *error, struct json_object *parameters) {
        _cleanup_(json_object_putp) struct json_object *o = json_object_new_object();

        if (!o || !error || add_string(o, "error", error) < 0)
                return NULL;
        return format_message(o, parameters);
}

char *proto_format_error_message(const char *error, const char *message) {
        _cleanup_(json_object_putp) struct json_object *p = json_object_new_object();

        if (!p || add_string(p, "message", message) < 0)
                return NULL;
        return proto_format_error(error, p);
}

char *proto_format_permission_denied(const char *group) {
        _cleanup_(json_object_putp) struct json_object *p = json_object_new_object();
        char text[256];

        snprintf(text, sizeof text, "only root%s%s%s may query perfsnapd", group[0] ? " and members of group '" : "",
                 group, group[0] ? "'" : "");
        if (!p || add_string(p, "group", group) < 0 || add_string(p, "message", text) < 0)
                return NULL;
        return proto_format_error(PERFSNAP_ERROR_PERMISSION_DENIED, p);
}

char *proto_format_method_not_found(const char *method) {
        _cleanup_(json_object_putp) struct json_object *p = json_object_new_object();

        if (!p || add_string(p, "method", method) < 0)
                return NULL;
        return proto_format_error(PERFSNAP_ERROR_METHOD_NOT_FOUND, p);
}

int proto_reply_parse(const char *msg, char **ret_error, struct json_object **ret_parameters, bool *ret_continues) {
        _cleanup_(json_object_putp) struct json_object *o = NULL, *params = NULL;
        _cleanup_free_ char *error = NULL;
        struct json_object *e;
        bool continues;
        int r;

        r = proto_json_parse(msg, &o);
        if (r < 0)
                return r;
        if (!json_object_is_type(o, json_type_object))
                return -EBADMSG;

        if (json_object_object_get_ex(o, "error", &e)) {
                if (!json_object_is_type(e, json_type_string) ||
                    !method_name_valid(json_object_get_string(e), (size_t) json_object_get_string_len(e)))
                        return -EBADMSG;
                error = strdup(json_object_get_string(e));
                if (!error)
                        return -ENOMEM;
        }

        r = get_parameters(o, &params);
        if (r < 0)
                return r;
        r = get_optional_bool(o, "continues", &continues);
        if (r < 0)
                return r;
        /* An error ends the call: it cannot be continued. */
        if (error && continues)
                return -EBADMSG;

        r = error ? 1 : 0;
        if (ret_error)
                *ret_error = TAKE_PTR(error);
        if (ret_parameters)
                *ret_parameters = TAKE_PTR(params);
        if (ret_continues)
                *ret_continues = continues;
        return r;
}

struct json_object *proto_json_hex(uint64_t v) {
        char buf[24];

        snprintf(buf, sizeof buf, "0x%" PRIx64, v);
        return json_object_new_string(buf);
}
