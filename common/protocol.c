/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Varlink-style framing and message (de)serialization; see doc/protocol.md. */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "macro.h"
#include "protocol.h"

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
        size_t need, alloc;
        char *p;

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
        alloc = MAX(m->alloc, (size_t) 4096);
        while (alloc < need) {
                if (alloc > SIZE_MAX / 2)
                        return -ENOMEM;
                alloc *= 2;
        }
        p = realloc(m->buf, alloc);
        if (!p)
                return -ENOMEM;
        m->buf = p;
        m->alloc = alloc;
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

int proto_json_parse(const char *text, struct json_object **ret) {
        struct json_tokener *tok;
        struct json_object *o;
        size_t len = strlen(text);

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
                return -EBADMSG;
        }

        /* Belt and braces for trailing bytes: only whitespace may remain. */
        for (size_t i = json_tokener_get_parse_end(tok); i < len; i++)
                if (!strchr(" \t\r\n", text[i])) {
                        json_object_put(o);
                        json_tokener_free(tok);
                        return -EBADMSG;
                }

        json_tokener_free(tok);
        *ret = o;
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

int proto_call_parse(const char *msg, proto_call *ret) {
        _cleanup_(json_object_putp) struct json_object *o = NULL, *params = NULL;
        struct json_object *m;
        bool more, oneway;
        char *method;
        int r;

        r = proto_json_parse(msg, &o);
        if (r < 0)
                return r;
        if (!json_object_is_type(o, json_type_object))
                return -EBADMSG;

        if (!json_object_object_get_ex(o, "method", &m) || !json_object_is_type(m, json_type_string))
                return -EBADMSG;
        /* get_string_len, not strlen: a "\u0000" inside must not hide a tail. */
        if (!method_name_valid(json_object_get_string(m), (size_t) json_object_get_string_len(m)))
                return -EBADMSG;

        r = get_parameters(o, &params);
        if (r < 0)
                return r;
        r = get_optional_bool(o, "more", &more);
        if (r < 0)
                return r;
        r = get_optional_bool(o, "oneway", &oneway);
        if (r < 0)
                return r;

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

void proto_call_done(proto_call *c) {
        if (!c)
                return;
        free(c->method);
        json_object_put(c->parameters);
        *c = (proto_call) {};
}

/* Adds parameters (a new reference, or a new empty object for NULL) and
 * serializes. */
static char *format_message(struct json_object *o, struct json_object *parameters) {
        struct json_object *p;
        const char *s;

        p = parameters ? json_object_get(parameters) : json_object_new_object();
        if (!p || json_object_object_add(o, "parameters", p) < 0) {
                json_object_put(p);
                return NULL;
        }

        s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        return s ? strdup(s) : NULL;
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
