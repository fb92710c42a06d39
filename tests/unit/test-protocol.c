/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Framing (msgbuf) and varlink message parsing/formatting (protocol.c). */
#include <errno.h>

#include <json-c/json.h>

#include "macro.h"
#include "test.h"
#include "wire/protocol.h"

static void feed_ok(msgbuf *m, const char *data, size_t size) {
        ASSERT_OK(msgbuf_feed(m, data, size));
}

static void expect_message(msgbuf *m, const char *expected) {
        char *s = NULL;

        ASSERT_EQ(msgbuf_next(m, &s), 1);
        ASSERT_STREQ(s, expected);
        free(s);
}

static void expect_none(msgbuf *m) {
        char *s = NULL;

        ASSERT_EQ(msgbuf_next(m, &s), 0);
        ASSERT_NULL(s);
}

/* A message split over several reads is returned once it is whole. */
TEST(msgbuf_split_across_feeds) {
        msgbuf m;

        msgbuf_init(&m, 1024);
        feed_ok(&m, "{\"meth", 6);
        expect_none(&m);
        feed_ok(&m, "od\":", 4);
        expect_none(&m);
        feed_ok(&m, "1}\0{\"x", 6);
        expect_message(&m, "{\"method\":1}");
        expect_none(&m);
        ASSERT_EQ(msgbuf_pending(&m), 3);
        feed_ok(&m, "\":2}", 4);
        feed_ok(&m, "", 1);     /* the NUL alone */
        expect_message(&m, "{\"x\":2}");
        expect_none(&m);
        ASSERT_EQ(msgbuf_pending(&m), 0);
        msgbuf_done(&m);
}

TEST(msgbuf_several_messages_in_one_feed) {
        static const char data[] = "{\"a\":1}\0{\"b\":2}\0\0{\"c\":3}\0{\"d\"";
        msgbuf m;

        msgbuf_init(&m, 1024);
        feed_ok(&m, data, sizeof(data) - 1);
        expect_message(&m, "{\"a\":1}");
        expect_message(&m, "{\"b\":2}");
        expect_message(&m, "");         /* an empty message is a message */
        expect_message(&m, "{\"c\":3}");
        expect_none(&m);
        ASSERT_EQ(msgbuf_pending(&m), 4);
        msgbuf_done(&m);
}

TEST(msgbuf_oversize) {
        msgbuf m;

        msgbuf_init(&m, 8);
        /* exactly max_message is fine */
        feed_ok(&m, "12345678\0", 9);
        expect_message(&m, "12345678");

        /* one byte more in a single feed */
        ASSERT_ERROR(msgbuf_feed(&m, "123456789", 9), EMSGSIZE);
        ASSERT_EQ(msgbuf_pending(&m), 0);

        /* the pending tail grows past the bound over two feeds */
        feed_ok(&m, "1234", 4);
        ASSERT_ERROR(msgbuf_feed(&m, "56789", 5), EMSGSIZE);
        ASSERT_EQ(msgbuf_pending(&m), 4);       /* refused bytes were not stored */
        msgbuf_done(&m);

        /* an oversized message that is terminated in the same feed, after a good one */
        msgbuf_init(&m, 8);
        ASSERT_ERROR(msgbuf_feed(&m, "ok\0123456789\0", 13), EMSGSIZE);
        expect_none(&m);
        msgbuf_done(&m);
}

/* Many small messages, fed in big reads as a busy client would send them,
 * byte-by-byte, and in odd chunks: every message comes out once, in order,
 * and the buffer does not grow beyond a read plus a message. */
TEST(msgbuf_many_small_messages) {
        const size_t n = 20000, chunks[] = { 65536, 1, 7, 4093 };
        char *stream;
        size_t len = 0;

        stream = malloc(n * 32);
        ASSERT_TRUE(stream);
        for (size_t i = 0; i < n; i++)
                len += (size_t) sprintf(stream + len, "{\"i\":%zu}", i) + 1;

        for (size_t c = 0; c < ELEMENTSOF(chunks); c++) {
                size_t got = 0, max_alloc = 0;
                msgbuf m;

                msgbuf_init(&m, 64);
                for (size_t off = 0; off < len; off += chunks[c]) {
                        size_t k = MIN(chunks[c], len - off);
                        char *s;

                        feed_ok(&m, stream + off, k);
                        max_alloc = MAX(max_alloc, m.alloc);
                        while (msgbuf_next(&m, &s) > 0) {
                                char expected[32];
                                sprintf(expected, "{\"i\":%zu}", got++);
                                ASSERT_STREQ(s, expected);
                                free(s);
                        }
                }
                ASSERT_EQ(got, n);
                ASSERT_EQ(msgbuf_pending(&m), 0);
                ASSERT_LE(max_alloc, 2 * MAX(chunks[c] + 64, (size_t) 4096));
                msgbuf_done(&m);
        }
        free(stream);
}

TEST(call_parse_valid) {
        proto_call c;

        ASSERT_OK(proto_call_parse("{\"method\":\"io.perfsnap.Query\",\"parameters\":{\"top\":5},\"more\":true}", &c));
        ASSERT_STREQ(c.method, "io.perfsnap.Query");
        ASSERT_TRUE(json_object_is_type(c.parameters, json_type_object));
        ASSERT_EQ(json_object_get_int(json_object_object_get(c.parameters, "top")), 5);
        ASSERT_TRUE(c.more);
        ASSERT_TRUE(!c.oneway);
        proto_call_done(&c);
        ASSERT_NULL(c.method);

        /* parameters absent or null: an empty object; whitespace around is fine;
         * unknown top-level keys are ignored (varlink) */
        ASSERT_OK(proto_call_parse(" \n{\"method\":\"io.perfsnap.Status\",\"oneway\":true,\"upgrade\":false} \n", &c));
        ASSERT_STREQ(c.method, "io.perfsnap.Status");
        ASSERT_TRUE(json_object_is_type(c.parameters, json_type_object));
        ASSERT_EQ(json_object_object_length(c.parameters), 0);
        ASSERT_TRUE(c.oneway);
        proto_call_done(&c);

        ASSERT_OK(proto_call_parse("{\"method\":\"io.perfsnap.Status\",\"parameters\":null}", &c));
        ASSERT_EQ(json_object_object_length(c.parameters), 0);
        proto_call_done(&c);
}

TEST(call_parse_rejects_malformed) {
        static const char *bad[] = {
                "",
                "{",
                "{\"method\":\"io.perfsnap.Query\"",
                "{'method':'io.perfsnap.Query'}",
                "{\"method\":\"io.perfsnap.Query\",}",
                "[]",
                "1",
                "\"io.perfsnap.Query\"",
                "null",
                "{}",
                "{\"method\":1}",
                "{\"method\":null}",
                "{\"method\":\"\"}",
                "{\"method\":\"io.perfsnap.Query\\u0000x\"}",
                "{\"method\":\"io.perfsnap.Query\\n\"}",
                "{\"method\":\".Query\"}",
                "{\"method\":\"io.perfsnap.Query\",\"parameters\":[]}",
                "{\"method\":\"io.perfsnap.Query\",\"parameters\":\"x\"}",
                "{\"method\":\"io.perfsnap.Query\",\"parameters\":1}",
                "{\"method\":\"io.perfsnap.Query\",\"more\":1}",
                "{\"method\":\"io.perfsnap.Query\",\"oneway\":\"yes\"}",
                /* trailing garbage and a second message without its NUL */
                "{\"method\":\"io.perfsnap.Query\"} x",
                "{\"method\":\"io.perfsnap.Query\"}{\"method\":\"io.perfsnap.Query\"}",
                /* invalid UTF-8 */
                "{\"method\":\"io.perfsnap.Query\",\"parameters\":{\"comm\":\"\xff\xfe\"}}",
        };
        proto_call c = { .method = (char *) "untouched" };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                int r = proto_call_parse(bad[i], &c);
                if (r != -EBADMSG)
                        TEST_FAIL_("input %zu (%s): expected -EBADMSG, got %d", i, bad[i], r);
                ASSERT_STREQ(c.method, "untouched");
        }

        /* a method name of 256 bytes is refused, 255 accepted */
        char msg[400], name[257];
        memset(name, 'a', 256);
        name[256] = 0;
        snprintf(msg, sizeof(msg), "{\"method\":\"%s\"}", name);
        ASSERT_ERROR(proto_call_parse(msg, &c), EBADMSG);
        name[255] = 0;
        snprintf(msg, sizeof(msg), "{\"method\":\"%s\"}", name);
        ASSERT_OK(proto_call_parse(msg, &c));
        ASSERT_EQ(strlen(c.method), 255);
        proto_call_done(&c);
}

/* What json-c takes and a strict reader must not: each refused with its
 * reason; the forms next to them that are valid pass. */
TEST(call_parse_is_strict) {
        static const struct {
                const char *msg, *why;
        } bad[] = {
                { "{\"method\":\"io.perfsnap.Query\",\"method\":\"io.perfsnap.Status\"}", "twice" },
                { "{\"method\":\"io.perfsnap.Query\",\"parameters\":{\"pid\":1,\"cpu\":2,\"pid\":3}}", "twice" },
                { "{\"method\":\"a.B\",\"parameters\":{\"x\":[{\"a\":1},{\"b\":1,\"b\":2}]}}", "twice" },
                { "{\"method\":\"a.B\",\"parameters\":{\"x\":{\"y\":{}},\"x\":{\"z\":1}}}", "twice" },
                /* overlong '/', overlong 3- and 4-byte forms, a surrogate, beyond U+10FFFF, a stray continuation */
                { "{\"method\":\"a.B\",\"parameters\":{\"comm\":\"\xc0\xaf\"}}", "UTF-8" },
                { "{\"method\":\"a.B\",\"parameters\":{\"comm\":\"\xe0\x80\xaf\"}}", "UTF-8" },
                { "{\"method\":\"a.B\",\"parameters\":{\"comm\":\"\xf0\x80\x80\xaf\"}}", "UTF-8" },
                { "{\"method\":\"a.B\",\"parameters\":{\"comm\":\"\xed\xa0\x80\"}}", "UTF-8" },
                { "{\"method\":\"a.B\",\"parameters\":{\"comm\":\"\xf4\x90\x80\x80\"}}", "UTF-8" },
                { "{\"method\":\"a.B\",\"parameters\":{\"comm\":\"\xf5\x80\x80\x80\"}}", "UTF-8" },
                { "{\"method\":\"a.B\",\"parameters\":{\"comm\":\"a\x80\"}}", "UTF-8" },
                { "{\"method\":\"a.B\",\"parameters\":{\"\xc3\":1}}", "UTF-8" },
                { "{\"method\":\"a.B\",\"parameters\":{\"comm\":\"\\ud800\"}}", "surrogate" },
                { "{\"method\":\"a.B\",\"parameters\":{\"comm\":\"\\udc00\"}}", "surrogate" },
                { "{\"method\":\"a.B\",\"parameters\":{\"comm\":\"\\ud800\\u0041\"}}", "surrogate" },
                { "{\"method\":\"a.B\",\"parameters\":{\"since_ns\":18446744073709551616}}", "64-bit" },
                { "{\"method\":\"a.B\",\"parameters\":{\"since_ns\":99999999999999999999999}}", "64-bit" },
                { "{\"method\":\"a.B\",\"parameters\":{\"pid\":-9223372036854775809}}", "64-bit" },
                { "{\"method\":\"a.B\",\"more\":true,\"oneway\":true}", "together" },
        };
        static const char *const good[] = {
                "{\"method\":\"a.B\",\"parameters\":{\"comm\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf\xef\xbf\xbd\"}}",
                "{\"method\":\"a.B\",\"parameters\":{\"comm\":\"\\ud83d\\ude00\\u00e9\\\\ud800\"}}",
                "{\"method\":\"a.B\",\"parameters\":{\"since_ns\":18446744073709551615,\"pid\":-9223372036854775808,\"x\":1e30}}",
                "{\"method\":\"a.B\",\"parameters\":{\"x\":[{\"a\":1},{\"a\":1}],\"y\":{\"a\":{\"a\":[]}},\"a\":null}}",
                "{\"method\":\"a.B\",\"parameters\":{\"\\\"a:\\\"\":{\"b\":\"{:[\"}}}",
                "{\"method\":\"a.B\",\"oneway\":true}",
        };
        proto_call c = {};

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                const char *why = NULL;
                int r = proto_call_parse_why(bad[i].msg, &c, &why);

                if (r != -EBADMSG || !why || !strstr(why, bad[i].why))
                        TEST_FAIL_("input %zu (%s): expected -EBADMSG saying \"%s\", got %d (%s)", i, bad[i].msg, bad[i].why,
                                   r, why ?: "no reason");
        }
        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                const char *why = NULL;
                int r = proto_call_parse_why(good[i], &c, &why);

                if (r < 0)
                        TEST_FAIL_("input %zu (%s): refused: %d (%s)", i, good[i], r, why ?: "no reason");
                proto_call_done(&c);
        }

        /* Integers between 2^63 and 2^64 are kept as they are, and refused
         * where the parameter stops below. */
        struct json_object *o = NULL, *v;
        uint64_t u = 0;
        ASSERT_OK(proto_json_parse("{\"a\":9223372036854775808,\"b\":9223372036854775807,\"c\":-1,\"d\":1.0}", &o));
        ASSERT_TRUE(json_object_object_get_ex(o, "a", &v));
        ASSERT_ERROR(proto_json_u64(v, INT64_MAX, &u), ERANGE);
        ASSERT_OK(proto_json_u64(v, UINT64_MAX, &u));
        ASSERT_U64_EQ(u, 9223372036854775808ULL);
        ASSERT_TRUE(json_object_object_get_ex(o, "b", &v));
        ASSERT_OK(proto_json_u64(v, INT64_MAX, &u));
        ASSERT_U64_EQ(u, (uint64_t) INT64_MAX);
        ASSERT_TRUE(json_object_object_get_ex(o, "c", &v));
        ASSERT_ERROR(proto_json_u64(v, INT64_MAX, &u), EBADMSG);
        ASSERT_TRUE(json_object_object_get_ex(o, "d", &v));
        ASSERT_ERROR(proto_json_u64(v, INT64_MAX, &u), EBADMSG);
        json_object_put(o);
}

/* Names the daemon answers with need not be UTF-8 (a comm set with
 * prctl(), a file name): a reply is valid UTF-8 all the same, and its
 * size is what proto_json_plain_len() said. */
TEST(replies_are_utf8) {
        struct json_object *p = json_object_new_object(), *back = NULL, *v;
        char *msg;

        json_object_object_add(p, "comm", json_object_new_string("a\xff\xc0\xaf" "b\xc3\xa9\xed\xa0\x80z"));
        msg = proto_format_reply(p, false);
        ASSERT_TRUE(msg);
        ASSERT_OK(proto_reply_parse(msg, NULL, &back, NULL));
        ASSERT_TRUE(json_object_object_get_ex(back, "comm", &v));
        ASSERT_STREQ(json_object_get_string(v),
                     "a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" "b\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdz");
        free(msg);
        json_object_put(back);
        json_object_put(p);
}

/* Answers written by hand (proto_buf) are byte for byte what json-c and
 * the UTF-8 repair make of the same strings: every single byte, valid and
 * invalid sequences of each length. */
TEST(hand_written_json_is_json_c_s) {
        static const char *const samples[] = {
                "plain", "", "q\"b\\s/", "\x7f\x1f\b\f\n\r\t", "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
                "\xc0\xaf\xe0\x80\xaf\xed\xa0\x80\xf4\x90\x80\x80\xf8", "\xc3", "\xe2\x82", "x\xf0\x9f\x98",
        };

        for (unsigned i = 0; i < 256 + ELEMENTSOF(samples); i++) {
                char one[2] = { (char) i, 0 };
                const char *str = i < 256 ? one : samples[i - 256];
                struct json_object *p;
                proto_buf b = {};
                char *msg;

                if (i == 0)
                        continue;
                p = json_object_new_object();
                json_object_object_add(p, "s", json_object_new_string(str));
                msg = proto_format_reply(p, false);
                proto_buf_add_str(&b, "{\"parameters\":{\"s\":");
                proto_buf_add_json_string(&b, str);
                proto_buf_add_str(&b, "}}");
                ASSERT_TRUE(!b.failed);
                if (strcmp(msg, b.data) != 0) {
                        fprintf(stderr, "string %u: json-c %s, proto_buf %s\n", i, msg, b.data);
                        ASSERT_STREQ(msg, b.data);
                }
                free(msg);
                free(b.data);
                json_object_put(p);
        }
}

static char *nested(size_t depth) {
        /* {"method":"a.B","parameters":{"x":[[[...]]]}} with depth levels in total */
        const char *head = "{\"method\":\"a.B\",\"parameters\":{\"x\":";
        size_t inner = depth - 2, len = strlen(head) + 2 * inner + 3;
        char *s = malloc(len);
        char *p = s;

        p = stpcpy(p, head);
        memset(p, '[', inner);
        p += inner;
        memset(p, ']', inner);
        p += inner;
        strcpy(p, "}}");
        return s;
}

TEST(call_parse_depth_limit) {
        proto_call c;
        char *s;

        s = nested(PERFSNAP_MAX_JSON_DEPTH);
        ASSERT_OK(proto_call_parse(s, &c));
        proto_call_done(&c);
        free(s);

        s = nested(PERFSNAP_MAX_JSON_DEPTH + 1);
        ASSERT_ERROR(proto_call_parse(s, &c), EBADMSG);
        free(s);

        /* far deeper than any stack would like to recurse */
        s = nested(100000);
        ASSERT_ERROR(proto_call_parse(s, &c), EBADMSG);
        free(s);
}

TEST(format_messages) {
        struct json_object *p = json_object_new_object();
        char *s;

        json_object_object_add(p, "top", json_object_new_int(5));
        json_object_object_add(p, "comm", json_object_new_string("a/b\"c"));

        s = proto_format_call("io.perfsnap.Query", p, true);
        ASSERT_STREQ(s, "{\"method\":\"io.perfsnap.Query\",\"more\":true,\"parameters\":{\"top\":5,\"comm\":\"a/b\\\"c\"}}");
        free(s);
        s = proto_format_call("io.perfsnap.Status", NULL, false);
        ASSERT_STREQ(s, "{\"method\":\"io.perfsnap.Status\",\"parameters\":{}}");
        free(s);
        s = proto_format_reply(p, true);
        ASSERT_STREQ(s, "{\"continues\":true,\"parameters\":{\"top\":5,\"comm\":\"a/b\\\"c\"}}");
        free(s);
        s = proto_format_reply(NULL, false);
        ASSERT_STREQ(s, "{\"parameters\":{}}");
        free(s);
        s = proto_format_error(PERFSNAP_ERROR_PERMISSION_DENIED, NULL);
        ASSERT_STREQ(s, "{\"error\":\"io.perfsnap.PermissionDenied\",\"parameters\":{}}");
        free(s);

        /* parameters were not consumed: still ours, with one reference */
        ASSERT_EQ(json_object_put(p), 1);
}

TEST(call_round_trip) {
        struct json_object *p = json_object_new_object();
        proto_call c;
        char *s;

        json_object_object_add(p, "since_ns", json_object_new_int64(INT64_MAX));
        s = proto_format_call(PERFSNAP_METHOD_QUERY, p, true);
        ASSERT_OK(proto_call_parse(s, &c));
        ASSERT_STREQ(c.method, PERFSNAP_METHOD_QUERY);
        ASSERT_TRUE(c.more);
        ASSERT_TRUE(json_object_equal(c.parameters, p));
        proto_call_done(&c);
        free(s);
        json_object_put(p);
}

TEST(reply_parse) {
        struct json_object *p = NULL;
        char *error = NULL;
        bool continues = false;

        ASSERT_EQ(proto_reply_parse("{\"parameters\":{\"total\":3},\"continues\":true}", &error, &p, &continues), 0);
        ASSERT_NULL(error);
        ASSERT_TRUE(continues);
        ASSERT_EQ(json_object_get_int(json_object_object_get(p, "total")), 3);
        json_object_put(p);

        ASSERT_EQ(proto_reply_parse("{}", &error, &p, &continues), 0);
        ASSERT_NULL(error);
        ASSERT_TRUE(!continues);
        ASSERT_EQ(json_object_object_length(p), 0);
        json_object_put(p);

        ASSERT_EQ(proto_reply_parse("{\"error\":\"io.perfsnap.PermissionDenied\",\"parameters\":{\"group\":\"perfsnap\"}}",
                                    &error, &p, &continues), 1);
        ASSERT_STREQ(error, PERFSNAP_ERROR_PERMISSION_DENIED);
        ASSERT_STREQ(json_object_get_string(json_object_object_get(p, "group")), "perfsnap");
        free(error);
        json_object_put(p);

        /* NULL out-parameters are allowed */
        ASSERT_EQ(proto_reply_parse("{\"error\":\"org.varlink.service.MethodNotFound\"}", NULL, NULL, NULL), 1);

        static const char *bad[] = {
                "",
                "[]",
                "{\"parameters\":[]}",
                "{\"parameters\":{},\"continues\":\"yes\"}",
                "{\"error\":1}",
                "{\"error\":\"\"}",
                "{\"error\":\"io.perfsnap.Busy\",\"continues\":true}",
                "{\"parameters\":{}} {}",
        };
        error = (char *) "untouched";
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                int r = proto_reply_parse(bad[i], &error, &p, &continues);
                if (r != -EBADMSG)
                        TEST_FAIL_("input %zu (%s): expected -EBADMSG, got %d", i, bad[i], r);
                ASSERT_STREQ(error, "untouched");
        }
}

/* Framing and parsing together, as the daemon reads a connection. */
TEST(framed_calls) {
        const char *calls[] = {
                "{\"method\":\"io.perfsnap.Status\"}",
                "{\"method\":\"io.perfsnap.Query\",\"parameters\":{\"top\":1}}",
        };
        char stream[256];
        size_t len = 0;
        msgbuf m;
        char *s;

        for (size_t i = 0; i < ELEMENTSOF(calls); i++) {
                strcpy(stream + len, calls[i]);
                len += strlen(calls[i]) + 1;
        }
        msgbuf_init(&m, PERFSNAP_MAX_REQUEST_BYTES);
        /* fed in two pieces, split inside the second call */
        feed_ok(&m, stream, len - 10);
        feed_ok(&m, stream + len - 10, 10);
        for (size_t i = 0; i < ELEMENTSOF(calls); i++) {
                proto_call c;

                ASSERT_EQ(msgbuf_next(&m, &s), 1);
                ASSERT_OK(proto_call_parse(s, &c));
                ASSERT_STREQ(c.method, i == 0 ? PERFSNAP_METHOD_STATUS : PERFSNAP_METHOD_QUERY);
                proto_call_done(&c);
                free(s);
        }
        expect_none(&m);
        msgbuf_done(&m);
}

TEST(error_messages) {
        _cleanup_free_ char *a = proto_format_error_message(PERFSNAP_ERROR_INVALID_PARAMETER, "bad \"top\"");
        _cleanup_free_ char *b = proto_format_permission_denied("perfsnap");
        _cleanup_free_ char *c = proto_format_permission_denied("");
        _cleanup_free_ char *d = proto_format_method_not_found("io.perfsnap.Nope");

        ASSERT_STREQ(a, "{\"error\":\"" PERFSNAP_ERROR_INVALID_PARAMETER
                        "\",\"parameters\":{\"message\":\"bad \\\"top\\\"\"}}");
        ASSERT_STREQ(b, "{\"error\":\"" PERFSNAP_ERROR_PERMISSION_DENIED "\",\"parameters\":{\"group\":\"perfsnap\","
                        "\"message\":\"only root and members of group 'perfsnap' may query perfsnapd\"}}");
        ASSERT_STREQ(c, "{\"error\":\"" PERFSNAP_ERROR_PERMISSION_DENIED "\",\"parameters\":{\"group\":\"\","
                        "\"message\":\"only root may query perfsnapd\"}}");
        ASSERT_STREQ(d, "{\"error\":\"" PERFSNAP_ERROR_METHOD_NOT_FOUND
                        "\",\"parameters\":{\"method\":\"io.perfsnap.Nope\"}}");
}
