/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Parsing kernel uevent datagrams (uevent.h). */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "kernel/uevent.h"
#include "macro.h"

/* udevd's messages on group 2 start with this 8-byte magic (the prefix
 * string of its monitor header, NUL included). */
static const char libudev_magic[8] = "libudev";

bool module_name_is_valid(const char *name) {
        size_t l;

        if (!name)
                return false;
        l = strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-");
        return l > 0 && l < MODULE_NAME_MAX && name[l] == 0;
}

static bool bytes_are_printable(const char *s, size_t len) {
        for (size_t i = 0; i < len; i++)
                if ((unsigned char) s[i] < 0x20 || (unsigned char) s[i] == 0x7f)
                        return false;
        return true;
}

/* Copies s[0..len) into a buffer of size bytes, NUL-terminated. */
static int copy_field(char *dst, size_t size, const char *s, size_t len) {
        if (len >= size)
                return -EBADMSG;
        memcpy(dst, s, len);
        dst[len] = 0;
        return 0;
}

static int parse_seqnum(const char *s, size_t len, uint64_t *ret) {
        uint64_t v = 0;

        if (len == 0)
                return -EBADMSG;
        for (size_t i = 0; i < len; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -EBADMSG;
                if (__builtin_mul_overflow(v, 10, &v) ||
                    __builtin_add_overflow(v, (uint64_t) (s[i] - '0'), &v))
                        return -EBADMSG;
        }
        *ret = v;
        return 0;
}

static bool key_is(const char *field, size_t key_len, const char *key) {
        return strlen(key) == key_len && memcmp(field, key, key_len) == 0;
}

int uevent_parse(const void *buf, size_t len, uevent *ret) {
        const char *p = buf, *end, *at, *nul;
        bool have_action = false, have_devpath = false, have_subsystem = false, have_seqnum = false;
        size_t action_len, devpath_len;
        uevent u = {};
        int r;

        if (!buf && len > 0)
                return -EINVAL;
        if (len == 0 || len > UEVENT_BUFFER_SIZE)
                return -EBADMSG;
        if (len >= sizeof(libudev_magic) && memcmp(buf, libudev_magic, sizeof(libudev_magic)) == 0)
                return -EPROTONOSUPPORT;
        end = p + len;

        /* The header, "ACTION@DEVPATH" (lib/kobject_uevent.c:
         * "%s@%s", action_string, devpath). Actions are the lowercase
         * words of kobject_actions[]; a devpath is what kobject_get_path()
         * makes, "/" followed by the kobject names. */
        nul = memchr(p, 0, (size_t) (end - p));
        if (!nul)
                nul = end;
        at = memchr(p, '@', (size_t) (nul - p));
        if (!at)
                return -EBADMSG;
        action_len = (size_t) (at - p);
        devpath_len = (size_t) (nul - at - 1);
        if (action_len == 0 || devpath_len == 0 || at[1] != '/')
                return -EBADMSG;
        for (size_t i = 0; i < action_len; i++)
                if (p[i] < 'a' || p[i] > 'z')
                        return -EBADMSG;
        if (!bytes_are_printable(at + 1, devpath_len))
                return -EBADMSG;
        r = copy_field(u.action_name, sizeof(u.action_name), p, action_len);
        if (r < 0)
                return r;
        r = copy_field(u.devpath, sizeof(u.devpath), at + 1, devpath_len);
        if (r < 0)
                return r;

        /* Then "KEY=VALUE" pairs, each NUL-terminated; the last one's NUL
         * may be cut off. An empty field (two NULs in a row) is a pair
         * without '=' and so malformed: the kernel never sends one. */
        for (p = nul < end ? nul + 1 : end; p < end; p = nul < end ? nul + 1 : end) {
                const char *eq, *value;
                size_t field_len, key_len, value_len;

                nul = memchr(p, 0, (size_t) (end - p));
                if (!nul)
                        nul = end;
                field_len = (size_t) (nul - p);
                eq = memchr(p, '=', field_len);
                if (!eq || eq == p)
                        return -EBADMSG;
                key_len = (size_t) (eq - p);
                value = eq + 1;
                value_len = field_len - key_len - 1;

                /* The kernel adds each of these keys once (kobject_uevent_env()
                 * and add_uevent_var()); a repeated one would make the
                 * message ambiguous. */
                if (key_is(p, key_len, "ACTION")) {
                        if (have_action || value_len != action_len || memcmp(value, u.action_name, action_len) != 0)
                                return -EBADMSG;
                        have_action = true;
                } else if (key_is(p, key_len, "DEVPATH")) {
                        if (have_devpath || value_len != devpath_len || memcmp(value, u.devpath, devpath_len) != 0)
                                return -EBADMSG;
                        have_devpath = true;
                } else if (key_is(p, key_len, "SUBSYSTEM")) {
                        if (have_subsystem || !bytes_are_printable(value, value_len))
                                return -EBADMSG;
                        r = copy_field(u.subsystem, sizeof(u.subsystem), value, value_len);
                        if (r < 0)
                                return r;
                        have_subsystem = true;
                } else if (key_is(p, key_len, "SEQNUM")) {
                        if (have_seqnum)
                                return -EBADMSG;
                        r = parse_seqnum(value, value_len, &u.seqnum);
                        if (r < 0)
                                return r;
                        have_seqnum = true;
                }
        }

        if (!have_action || !have_devpath)
                return -EBADMSG;

        if (strcmp(u.action_name, "add") == 0)
                u.action = UEVENT_ACTION_ADD;
        else if (strcmp(u.action_name, "remove") == 0)
                u.action = UEVENT_ACTION_REMOVE;
        else
                u.action = UEVENT_ACTION_OTHER;

        /* A module's kobject sits directly under the "module" kset
         * (kernel/params.c), so its devpath is "/module/NAME". */
        if (strcmp(u.subsystem, "module") == 0) {
                const char *name;

                if (strncmp(u.devpath, "/module/", 8) != 0)
                        return -EBADMSG;
                name = u.devpath + 8;
                if (!module_name_is_valid(name))
                        return -EBADMSG;
                strcpy(u.module, name);
        }

        *ret = u;
        return 0;
}
