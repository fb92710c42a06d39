/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "kernel/uevent.h"
#include "macro.h"
#include "test.h"

/* A datagram from a string literal with embedded NULs, the literal's own
 * final NUL left out (the kernel's datagram ends with the last pair's NUL,
 * written out in each literal). */
#define MSG(s) (s), (sizeof(s) - 1)

static const uevent untouched = {
        .action = UEVENT_ACTION_OTHER,
        .action_name = "untouched",
        .devpath = "/untouched",
        .subsystem = "untouched",
        .seqnum = 4242,
        .module = "untouched",
};

static void assert_untouched(const uevent *u) {
        ASSERT_TRUE(memcmp(u, &untouched, sizeof(*u)) == 0);
}

static void read_capture(const char *name, char **ret, size_t *ret_size) {
        ASSERT_OK(read_full_file_at(TEST_DATA("kernel-6.1-brd/uevents"), name, UEVENT_BUFFER_SIZE, ret, ret_size));
}

/* The four captures: "modprobe brd; rmmod brd; modprobe dummy; rmmod
 * dummy" on 6.1, read from the kernel's group (sender port id 0). */
TEST(real_captures) {
        static const struct {
                const char *file;
                uevent_action action;
                const char *action_name, *module;
                uint64_t seqnum;
        } cases[] = {
                { "00-pid0.bin", UEVENT_ACTION_ADD, "add", "brd", 1317 },
                { "01-pid0.bin", UEVENT_ACTION_REMOVE, "remove", "brd", 1320 },
                { "02-pid0.bin", UEVENT_ACTION_ADD, "add", "dummy", 1321 },
                { "03-pid0.bin", UEVENT_ACTION_REMOVE, "remove", "dummy", 1322 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *buf = NULL;
                char devpath[64];
                size_t size = 0;
                uevent u;

                read_capture(cases[i].file, &buf, &size);
                ASSERT_OK(uevent_parse(buf, size, &u));
                ASSERT_EQ(u.action, cases[i].action);
                ASSERT_STREQ(u.action_name, cases[i].action_name);
                snprintf(devpath, sizeof(devpath), "/module/%s", cases[i].module);
                ASSERT_STREQ(u.devpath, devpath);
                ASSERT_STREQ(u.subsystem, "module");
                ASSERT_U64_EQ(u.seqnum, cases[i].seqnum);
                ASSERT_STREQ(u.module, cases[i].module);

                /* The datagram ends with the NUL of SEQNUM=; without it
                 * the length still delimits the last pair. */
                ASSERT_EQ(buf[size - 1], 0);
                memset(&u, 0, sizeof(u));
                ASSERT_OK(uevent_parse(buf, size - 1, &u));
                ASSERT_U64_EQ(u.seqnum, cases[i].seqnum);
                ASSERT_STREQ(u.module, cases[i].module);
        }
}

/* Where a field starts in a datagram, found by its "KEY=". */
static size_t field_offset(const char *buf, size_t size, const char *key) {
        const char *p = memmem(buf, size, key, strlen(key));

        ASSERT_TRUE(p != NULL);
        return (size_t) (p - buf);
}

TEST(truncated_captures) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, sub, sub_val, seq, seq_val;
        uevent u = untouched;

        /* "add@/module/brd\0ACTION=add\0DEVPATH=/module/brd\0SUBSYSTEM=module\0SEQNUM=1317\0" */
        read_capture("00-pid0.bin", &buf, &size);
        ASSERT_EQ(size, 76);
        sub = field_offset(buf, size, "SUBSYSTEM=");
        sub_val = sub + strlen("SUBSYSTEM=");
        seq = field_offset(buf, size, "SEQNUM=");
        seq_val = seq + strlen("SEQNUM=");
        ASSERT_EQ(seq, sub_val + strlen("module") + 1);

        /* Every prefix either is a whole message by itself or fails;
         * which, follows from where the cut falls. */
        for (size_t cut = 0; cut <= size; cut++) {
                int r = uevent_parse(buf, cut, &u);

                if (cut + 1 < sub || (cut > sub && cut < sub_val) || (cut > seq && cut <= seq_val)) {
                        /* Before DEVPATH= is whole, or a cut key, or SEQNUM= with no digits. */
                        if (r != -EBADMSG)
                                TEST_FAIL_("cut at %zu: expected -EBADMSG, got %d", cut, r);
                        assert_untouched(&u);
                        continue;
                }
                if (r < 0)
                        TEST_FAIL_("cut at %zu: expected success, got %d", cut, r);
                if (cut <= sub) {
                        /* DEVPATH= and nothing after it. */
                        ASSERT_STREQ(u.subsystem, "");
                        ASSERT_STREQ(u.module, "");
                } else if (cut < seq - 1) {
                        /* SUBSYSTEM= a prefix of "module": not a module event. */
                        ASSERT_EQ(strlen(u.subsystem), cut - sub_val);
                        ASSERT_STREQ(u.module, "");
                } else {
                        ASSERT_STREQ(u.subsystem, "module");
                        ASSERT_STREQ(u.module, "brd");
                        /* A cut number is a smaller number: the length is
                         * all a datagram has. "1317" cut after 0..4 digits. */
                        static const uint64_t prefixes[] = { 0, 1, 13, 131, 1317 };
                        size_t digits = cut <= seq ? 0 : MIN(cut - seq_val, (size_t) 4);

                        ASSERT_U64_EQ(u.seqnum, prefixes[digits]);
                }
                u = untouched;
        }
}

TEST(non_module_subsystems) {
        uevent u = untouched;

        /* A net device: parses, not a module. */
        ASSERT_OK(uevent_parse(MSG("add@/devices/virtual/net/dummy0\0ACTION=add\0"
                                   "DEVPATH=/devices/virtual/net/dummy0\0SUBSYSTEM=net\0"
                                   "INTERFACE=dummy0\0IFINDEX=3\0SEQNUM=1323\0"), &u));
        ASSERT_EQ(u.action, UEVENT_ACTION_ADD);
        ASSERT_STREQ(u.devpath, "/devices/virtual/net/dummy0");
        ASSERT_STREQ(u.subsystem, "net");
        ASSERT_U64_EQ(u.seqnum, 1323);
        ASSERT_STREQ(u.module, "");

        /* A block device's change event, with a value holding '=' and '@'. */
        ASSERT_OK(uevent_parse(MSG("change@/devices/virtual/block/ram0\0ACTION=change\0"
                                   "DEVPATH=/devices/virtual/block/ram0\0SUBSYSTEM=block\0"
                                   "DISK_MEDIA_CHANGE=1\0NOTE=a=b@c\0SEQNUM=7\0"), &u));
        ASSERT_EQ(u.action, UEVENT_ACTION_OTHER);
        ASSERT_STREQ(u.action_name, "change");
        ASSERT_STREQ(u.subsystem, "block");
        ASSERT_STREQ(u.module, "");

        /* No SUBSYSTEM= at all, no SEQNUM=. */
        ASSERT_OK(uevent_parse(MSG("bind@/devices/x\0ACTION=bind\0DEVPATH=/devices/x\0"), &u));
        ASSERT_STREQ(u.subsystem, "");
        ASSERT_U64_EQ(u.seqnum, 0);
        ASSERT_STREQ(u.module, "");

        /* A devpath under /module/ is only a module with SUBSYSTEM=module. */
        ASSERT_OK(uevent_parse(MSG("add@/module/../x\0ACTION=add\0DEVPATH=/module/../x\0SUBSYSTEM=other\0"), &u));
        ASSERT_STREQ(u.devpath, "/module/../x");
        ASSERT_STREQ(u.module, "");

        /* Module names with '-' (as sysfs shows few, but the kernel
         * allows) and the longest name that fits. */
        ASSERT_OK(uevent_parse(MSG("add@/module/snd-hda_x\0ACTION=add\0DEVPATH=/module/snd-hda_x\0SUBSYSTEM=module\0"), &u));
        ASSERT_STREQ(u.module, "snd-hda_x");
        ASSERT_OK(uevent_parse(MSG("add@/module/m234567890123456789012345678901234567890123456789012345\0"
                                   "ACTION=add\0DEVPATH=/module/m234567890123456789012345678901234567890123456789012345\0"
                                   "SUBSYSTEM=module\0"), &u));
        ASSERT_EQ(strlen(u.module), MODULE_NAME_MAX - 1);

        /* The largest SEQNUM. */
        ASSERT_OK(uevent_parse(MSG("add@/a\0ACTION=add\0DEVPATH=/a\0SEQNUM=18446744073709551615\0"), &u));
        ASSERT_U64_EQ(u.seqnum, UINT64_MAX);
}

TEST(malformed) {
        static const struct {
                const char *what;
                const char *msg;
                size_t len;
        } cases[] = {
#define C(what, s) { what, s, sizeof(s) - 1 }
                C("empty", ""),
                C("only a NUL", "\0"),
                C("no '@'", "add/module/brd\0ACTION=add\0DEVPATH=/module/brd\0SUBSYSTEM=module\0"),
                C("no action", "@/module/brd\0ACTION=\0DEVPATH=/module/brd\0"),
                C("empty devpath", "add@\0ACTION=add\0DEVPATH=\0"),
                C("devpath not absolute", "add@module/brd\0ACTION=add\0DEVPATH=module/brd\0"),
                C("action not a word", "ADD@/module/brd\0ACTION=ADD\0DEVPATH=/module/brd\0"),
                C("action too long", "abcdefghijklmnop@/a\0ACTION=abcdefghijklmnop\0DEVPATH=/a\0"),
                C("ACTION= differs", "add@/module/brd\0ACTION=remove\0DEVPATH=/module/brd\0SUBSYSTEM=module\0"),
                C("ACTION= a prefix", "add@/module/brd\0ACTION=ad\0DEVPATH=/module/brd\0"),
                C("ACTION= missing", "add@/module/brd\0DEVPATH=/module/brd\0SUBSYSTEM=module\0SEQNUM=1\0"),
                C("ACTION= twice", "add@/a\0ACTION=add\0ACTION=add\0DEVPATH=/a\0"),
                C("DEVPATH= differs", "add@/module/brd\0ACTION=add\0DEVPATH=/module/loop\0SUBSYSTEM=module\0"),
                C("DEVPATH= missing", "add@/module/brd\0ACTION=add\0SUBSYSTEM=module\0SEQNUM=1\0"),
                C("pair without '='", "add@/a\0ACTION=add\0DEVPATH=/a\0JUNK\0"),
                C("empty key", "add@/a\0ACTION=add\0DEVPATH=/a\0=x\0"),
                C("empty pair", "add@/a\0ACTION=add\0\0DEVPATH=/a\0"),
                C("two NULs at the end", "add@/a\0ACTION=add\0DEVPATH=/a\0\0"),
                C("SEQNUM= not a number", "add@/a\0ACTION=add\0DEVPATH=/a\0SEQNUM=12x\0"),
                C("SEQNUM= negative", "add@/a\0ACTION=add\0DEVPATH=/a\0SEQNUM=-1\0"),
                C("SEQNUM= empty", "add@/a\0ACTION=add\0DEVPATH=/a\0SEQNUM=\0"),
                C("SEQNUM= overflows", "add@/a\0ACTION=add\0DEVPATH=/a\0SEQNUM=18446744073709551616\0"),
                C("SEQNUM= twice", "add@/a\0ACTION=add\0DEVPATH=/a\0SEQNUM=1\0SEQNUM=2\0"),
                C("SUBSYSTEM= twice", "add@/module/brd\0ACTION=add\0DEVPATH=/module/brd\0SUBSYSTEM=net\0SUBSYSTEM=module\0"),
                C("module devpath escapes", "add@/module/../x\0ACTION=add\0DEVPATH=/module/../x\0SUBSYSTEM=module\0"),
                C("module devpath deeper", "add@/module/brd/holders\0ACTION=add\0DEVPATH=/module/brd/holders\0SUBSYSTEM=module\0"),
                C("module devpath elsewhere", "add@/devices/brd\0ACTION=add\0DEVPATH=/devices/brd\0SUBSYSTEM=module\0"),
                C("module name empty", "add@/module/\0ACTION=add\0DEVPATH=/module/\0SUBSYSTEM=module\0"),
                C("module name too long", "add@/module/m2345678901234567890123456789012345678901234567890123456\0"
                                          "ACTION=add\0DEVPATH=/module/m2345678901234567890123456789012345678901234567890123456\0"
                                          "SUBSYSTEM=module\0"),
                C("control byte in devpath", "add@/a\x01\0ACTION=add\0DEVPATH=/a\x01\0"),
                C("garbage", "\xff\xfe\x00\x01@@@\0==\0\x80"),
#undef C
        };
        uevent u = untouched;

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                int r = uevent_parse(cases[i].msg, cases[i].len, &u);

                if (r != -EBADMSG)
                        TEST_FAIL_("%s: expected -EBADMSG, got %d", cases[i].what, r);
                assert_untouched(&u);
        }
}

TEST(field_limits) {
        char buf[UEVENT_BUFFER_SIZE + 64], devpath[300];
        uevent u = untouched;
        int n;

        /* A devpath of 255 bytes fits devpath[256]; 256 does not. */
        memset(devpath, 'd', sizeof(devpath));
        devpath[0] = '/';
        devpath[255] = 0;
        n = snprintf(buf, sizeof(buf), "add@%s%cACTION=add%cDEVPATH=%s%c", devpath, 0, 0, devpath, 0);
        ASSERT_OK(uevent_parse(buf, (size_t) n, &u));
        ASSERT_EQ(strlen(u.devpath), 255);
        u = untouched;
        devpath[255] = 'd';
        devpath[256] = 0;
        n = snprintf(buf, sizeof(buf), "add@%s%cACTION=add%cDEVPATH=%s%c", devpath, 0, 0, devpath, 0);
        ASSERT_ERROR(uevent_parse(buf, (size_t) n, &u), EBADMSG);
        assert_untouched(&u);

        /* SUBSYSTEM of 63 bytes fits subsystem[64]; 64 does not. */
        n = snprintf(buf, sizeof(buf), "add@/a%cACTION=add%cDEVPATH=/a%cSUBSYSTEM=%063d%c", 0, 0, 0, 0, 0);
        ASSERT_OK(uevent_parse(buf, (size_t) n, &u));
        ASSERT_EQ(strlen(u.subsystem), 63);
        u = untouched;
        n = snprintf(buf, sizeof(buf), "add@/a%cACTION=add%cDEVPATH=/a%cSUBSYSTEM=%064d%c", 0, 0, 0, 0, 0);
        ASSERT_ERROR(uevent_parse(buf, (size_t) n, &u), EBADMSG);
        assert_untouched(&u);

        /* The whole datagram: UEVENT_BUFFER_SIZE bytes are fine, one more
         * is not from the kernel. */
        n = snprintf(buf, sizeof(buf), "add@/a%cACTION=add%cDEVPATH=/a%cPAD=", 0, 0, 0);
        memset(buf + n, 'p', sizeof(buf) - (size_t) n);
        buf[UEVENT_BUFFER_SIZE - 1] = 0;
        ASSERT_OK(uevent_parse(buf, UEVENT_BUFFER_SIZE, &u));
        u = untouched;
        buf[UEVENT_BUFFER_SIZE - 1] = 'p';
        buf[UEVENT_BUFFER_SIZE] = 0;
        ASSERT_ERROR(uevent_parse(buf, UEVENT_BUFFER_SIZE + 1, &u), EBADMSG);
        assert_untouched(&u);
}

TEST(libudev_messages) {
        /* udevd's monitor header: "libudev\0", then a big-endian magic
         * 0xfeedcafe and offsets; whatever follows, it is not the
         * kernel's. */
        static const char msg[] = "libudev\0\xfe\xed\xca\xfe\0\0\0\x28\0\0\0\x28\0\0\0\x10";
        uevent u = untouched;

        ASSERT_ERROR(uevent_parse(msg, sizeof(msg) - 1, &u), EPROTONOSUPPORT);
        assert_untouched(&u);
        /* Exactly the magic, nothing after it. */
        ASSERT_ERROR(uevent_parse(msg, 8, &u), EPROTONOSUPPORT);
        /* Shorter than the magic: merely malformed. */
        ASSERT_ERROR(uevent_parse(msg, 7, &u), EBADMSG);
        assert_untouched(&u);
        /* "libudev" followed by '@' rather than NUL is a kernel-format
         * header like any other. */
        ASSERT_OK(uevent_parse(MSG("libudev@/a\0ACTION=libudev\0DEVPATH=/a\0"), &u));
        ASSERT_EQ(u.action, UEVENT_ACTION_OTHER);
        ASSERT_STREQ(u.action_name, "libudev");
}

TEST(module_names) {
        ASSERT_TRUE(module_name_is_valid("brd"));
        ASSERT_TRUE(module_name_is_valid("9pnet_virtio"));
        ASSERT_TRUE(module_name_is_valid("snd-hda-intel"));
        ASSERT_TRUE(module_name_is_valid("m234567890123456789012345678901234567890123456789012345"));
        ASSERT_TRUE(!module_name_is_valid("m2345678901234567890123456789012345678901234567890123456"));
        ASSERT_TRUE(!module_name_is_valid(NULL));
        ASSERT_TRUE(!module_name_is_valid(""));
        ASSERT_TRUE(!module_name_is_valid("."));
        ASSERT_TRUE(!module_name_is_valid(".."));
        ASSERT_TRUE(!module_name_is_valid("../brd"));
        ASSERT_TRUE(!module_name_is_valid("a/b"));
        ASSERT_TRUE(!module_name_is_valid("brd.ko"));
        ASSERT_TRUE(!module_name_is_valid("brd "));
        ASSERT_TRUE(!module_name_is_valid("br\xc3\xa9"));
}
