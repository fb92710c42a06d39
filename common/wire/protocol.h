/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* The perfsnapd client protocol: varlink wire format over a unix stream
 * socket. Each message is one JSON object followed by a NUL byte.
 *   call:   {"method":"io.perfsnap.Query","parameters":{...}[,"more":true]}
 *   reply:  {"parameters":{...}[,"continues":true]}
 *   error:  {"error":"io.perfsnap.InvalidParameter","parameters":{...}}
 * Methods, parameters and errors are documented in doc/protocol.md.
 *
 * Bump PERFSNAP_PROTOCOL_VERSION when a method, parameter or reply field
 * changes meaning or is removed (adding an optional field does not need a
 * bump); Status returns it so a client can refuse a daemon it does not
 * understand. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_object;

#define PERFSNAP_PROTOCOL_VERSION 1

#define PERFSNAP_INTERFACE "io.perfsnap"
#define PERFSNAP_METHOD_QUERY  "io.perfsnap.Query"
#define PERFSNAP_METHOD_STATUS "io.perfsnap.Status"
#define PERFSNAP_METHOD_MODULES "io.perfsnap.Modules"
#define PERFSNAP_METHOD_EVENTS "io.perfsnap.Events"
#define PERFSNAP_METHOD_KSYMS  "io.perfsnap.Ksyms"
#define PERFSNAP_METHOD_RESCAN "io.perfsnap.Rescan"      /* root only */
#define PERFSNAP_METHOD_SNAPSHOT "io.perfsnap.Snapshot"  /* root only */
#define PERFSNAP_METHOD_CACHE_LIST "io.perfsnap.CacheList"
#define PERFSNAP_METHOD_CACHE_PRUNE "io.perfsnap.CachePrune"    /* root only */

#define PERFSNAP_ERROR_PERMISSION_DENIED "io.perfsnap.PermissionDenied"
#define PERFSNAP_ERROR_INVALID_PARAMETER "io.perfsnap.InvalidParameter"
#define PERFSNAP_ERROR_METHOD_NOT_FOUND  "org.varlink.service.MethodNotFound"
#define PERFSNAP_ERROR_INVALID_MESSAGE   "io.perfsnap.InvalidMessage"
#define PERFSNAP_ERROR_INTERNAL          "io.perfsnap.InternalError"
#define PERFSNAP_ERROR_BUSY              "io.perfsnap.Busy"

/* Size bounds: a request larger than this is refused and the client dropped. */
#define PERFSNAP_MAX_REQUEST_BYTES  (64u * 1024u)
/* A single reply message; larger answers are split with "continues". */
#define PERFSNAP_MAX_REPLY_BYTES    (16u * 1024u * 1024u)

/* JSON nesting bound for every message: the deepest legitimate message (a
 * Query reply: reply -> parameters -> stacks -> stack -> frames) has 5 levels. */
#define PERFSNAP_MAX_JSON_DEPTH 16

/* Incremental NUL-framed message splitter, one per connection. Bytes
 * [head, len) are unread; [head, complete) hold only whole messages, so
 * popping a message never rescans a partial tail and never moves the
 * buffer (it is compacted only when it must grow). */
typedef struct msgbuf {
        char *buf;
        size_t len, alloc;
        size_t max_message;     /* a message (without its NUL) longer than this is an error */
        size_t head;            /* first unread byte */
        size_t complete;        /* end of the last NUL-terminated message fed */
} msgbuf;

void msgbuf_init(msgbuf *m, size_t max_message);
void msgbuf_done(msgbuf *m);

/* Appends received bytes. -EMSGSIZE if any message in them, or the
 * pending, unterminated message, would exceed max_message; nothing is
 * appended then (the connection is beyond repair). -ENOMEM. */
int msgbuf_feed(msgbuf *m, const void *data, size_t size);

/* Pops the next complete message (NUL-terminated copy in *ret, caller frees).
 * 1 if one was returned, 0 if none is complete yet, -ENOMEM. An empty
 * message (a lone NUL) is returned as "". */
int msgbuf_next(msgbuf *m, char **ret);

/* Bytes fed but not yet returned by msgbuf_next() (complete or not). */
size_t msgbuf_pending(const msgbuf *m);

/* Parses one JSON text the way every message is parsed: strict syntax,
 * valid UTF-8 (no overlong forms, surrogates or code points beyond
 * U+10FFFF, no \u escape of a lone surrogate), nesting bounded by
 * PERFSNAP_MAX_JSON_DEPTH, no key twice in one object, integers within
 * [-2^63, 2^64), nothing but whitespace after the value. -EBADMSG (with
 * *ret_why, a static string, if ret_why is not NULL) or -ENOMEM. Any JSON
 * type. */
int proto_json_parse_strict(const char *text, struct json_object **ret, const char **ret_why);
int proto_json_parse(const char *text, struct json_object **ret);

/* A string of JSON written without a json-c tree, which costs ~80 bytes a
 * value: for answers of hundreds of thousands of strings (stacks of a
 * query). Appends after an allocation failure do nothing and leave
 * failed set; start from (proto_buf) {} and free data when done. */
typedef struct proto_buf {
        char *data;             /* NUL-terminated once anything was added */
        size_t len, alloc;
        bool failed;
} proto_buf;

void proto_buf_add(proto_buf *b, const char *s, size_t n);
void proto_buf_add_str(proto_buf *b, const char *s);
void proto_buf_add_u64(proto_buf *b, uint64_t v);
void proto_buf_add_i64(proto_buf *b, int64_t v);
/* Lower-case hex digits, no prefix. */
void proto_buf_add_hex(proto_buf *b, uint64_t v);
/* s as a JSON string, escaped as json-c's plain output escapes it, with
 * each byte that is not part of valid UTF-8 written as \ufffd (so the
 * result is what proto_format_reply() would have made of s). */
void proto_buf_add_json_string(proto_buf *b, const char *s);

/* A JSON integer in [0, max]: -EBADMSG if v is not a non-negative
 * integer, -ERANGE if it is above max. */
int proto_json_u64(struct json_object *v, uint64_t max, uint64_t *ret);

/* An address or other 64-bit value as a "0x..." string: JSON numbers lose
 * precision above 2^53. NULL when out of memory. */
struct json_object *proto_json_hex(uint64_t v);

/* A parsed call. */
typedef struct proto_call {
        char *method;
        struct json_object *parameters;  /* an object; empty object if absent */
        bool more;
        bool oneway;
} proto_call;

/* Parses a call message. -EBADMSG (with *ret_why, a static string, if
 * ret_why is not NULL) if it is not a message proto_json_parse_strict()
 * takes, not an object, has no string "method" (a varlink name:
 * [A-Za-z0-9.] only, at most 255 bytes), "parameters" is not an object,
 * "more"/"oneway" is not a boolean, or both are true. Unknown top-level
 * keys are ignored, as varlink allows. -ENOMEM. */
int proto_call_parse_why(const char *msg, proto_call *ret, const char **ret_why);
int proto_call_parse(const char *msg, proto_call *ret);
void proto_call_done(proto_call *c);

/* Serialize messages (newly allocated, NUL-terminated C string; the wire
 * NUL is the terminator, so send strlen()+1 bytes). Takes a reference-
 * neutral view of parameters (does not consume it). */
char *proto_format_call(const char *method, struct json_object *parameters, bool more);
char *proto_format_reply(struct json_object *parameters, bool continues);
char *proto_format_error(const char *error, struct json_object *parameters);
/* An error with {"message": message}. */
char *proto_format_error_message(const char *error, const char *message);
/* PermissionDenied for a caller outside root and group ("" if none). */
char *proto_format_permission_denied(const char *group);
/* MethodNotFound naming the method. */
char *proto_format_method_not_found(const char *method);

/* Parses a reply or error message from the daemon. For errors, *ret_error
 * is set (caller frees) and *ret_parameters may hold the error parameters.
 * Returns 0 for a reply (*ret_error = NULL), 1 for an error reply,
 * -EBADMSG or -ENOMEM. *ret_parameters is always an object (empty if
 * absent; caller puts it). Any ret_* may be NULL. */
int proto_reply_parse(const char *msg, char **ret_error, struct json_object **ret_parameters, bool *ret_continues);
