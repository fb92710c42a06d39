/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Feeds arbitrary bytes through the framing and both message parsers, as a
 * hostile client (or daemon) could send them. The first byte chooses how the
 * input is split into reads. A call that parses must survive a
 * format/parse round trip unchanged. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "wire/protocol.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_message(const char *msg) {
        struct json_object *p = NULL;
        char *error = NULL, *again;
        proto_call c, c2;
        bool continues;

        if (proto_call_parse(msg, &c) >= 0) {
                again = proto_format_call(c.method, c.parameters, c.more);
                if (!again)
                        abort();
                if (proto_call_parse(again, &c2) < 0 || strcmp(c.method, c2.method) != 0 ||
                    c.more != c2.more || !json_object_equal(c.parameters, c2.parameters))
                        abort();
                proto_call_done(&c2);
                free(again);
                proto_call_done(&c);
        }

        if (proto_reply_parse(msg, &error, &p, &continues) >= 0) {
                again = error ? proto_format_error(error, p) : proto_format_reply(p, continues);
                if (!again)
                        abort();
                free(again);
                free(error);
                json_object_put(p);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        size_t chunk;
        msgbuf m;
        char *msg;

        if (size == 0)
                return 0;
        chunk = (size_t) data[0] % 17 + 1;
        data++;
        size--;

        /* A small bound so oversize paths are reached with small inputs. */
        msgbuf_init(&m, 256);
        for (size_t off = 0; off < size; off += chunk) {
                size_t n = size - off < chunk ? size - off : chunk;

                if (msgbuf_feed(&m, data + off, n) < 0)
                        break;
                while (msgbuf_next(&m, &msg) > 0) {
                        check_message(msg);
                        free(msg);
                }
        }
        msgbuf_done(&m);

        /* The whole input as one message, with no size bound but the parser's. */
        msg = malloc(size + 1);
        if (!msg)
                return 0;
        memcpy(msg, data, size);
        msg[size] = 0;
        check_message(msg);
        free(msg);
        return 0;
}
