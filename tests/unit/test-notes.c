/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "kernel/notes.h"
#include "test.h"

#define FIXTURE_ROOT TEST_DATA("kernel-6.1-brd")

/* `xxd sys/kernel/notes` shows eleven "Xen" notes, then at offset 0x180:
 *     0400 0000  1400 0000  0300 0000  474e 5500
 *     n_namesz=4 n_descsz=20 n_type=3 (NT_GNU_BUILD_ID) "GNU\0"
 *     eb4f bcd0 37e7 2537 1795 0bf2 b93b d556 6f47 c56f   (desc)
 * followed by two "Linux" notes. */
#define KERNEL_BUILD_ID "eb4fbcd037e7253717950bf2b93bd5566f47c56f"
#define KERNEL_BUILD_ID_NOTE_OFFSET 0x180

/* `xxd sys/module/brd/notes/.note.gnu.build-id` (36 bytes, one note):
 *     0400 0000 1400 0000 0300 0000 474e 5500
 *     d3b8 7cfb f900 43c3 16e7 4738 7649 1aed c8d4 3857 */
#define BRD_BUILD_ID "d3b87cfbf90043c316e7473876491aedc8d43857"

static uint8_t *read_fixture(const char *rel, size_t *ret_size) {
        char *buf = NULL;

        ASSERT_OK(read_full_file_at(FIXTURE_ROOT, rel, 1 << 20, &buf, ret_size));
        return (uint8_t *) buf;
}

TEST(kernel_notes_fixture) {
        char hex[BUILD_ID_HEX_MAX];
        size_t size = 0;
        uint8_t *d = read_fixture("sys/kernel/notes", &size);

        ASSERT_EQ(size, 0x1f8);
        ASSERT_OK(notes_find_build_id(d, size, hex));
        ASSERT_STREQ(hex, KERNEL_BUILD_ID);

        /* The same through the root-relative reader. */
        memset(hex, 'x', sizeof(hex));
        ASSERT_OK(notes_kernel_build_id(FIXTURE_ROOT, hex));
        ASSERT_STREQ(hex, KERNEL_BUILD_ID);

        /* Only the Xen notes before it: well-formed, but no build-id. */
        ASSERT_ERROR(notes_find_build_id(d, KERNEL_BUILD_ID_NOTE_OFFSET, hex), ENOENT);
        /* Cut inside the build-id's desc. */
        ASSERT_ERROR(notes_find_build_id(d, KERNEL_BUILD_ID_NOTE_OFFSET + 16 + 19, hex), EBADMSG);
        /* Cut inside its header. */
        ASSERT_ERROR(notes_find_build_id(d, KERNEL_BUILD_ID_NOTE_OFFSET + 11, hex), EBADMSG);
        free(d);
}

TEST(module_note_fixture) {
        char hex[BUILD_ID_HEX_MAX];
        size_t size = 0;
        uint8_t *d = read_fixture("sys/module/brd/notes/.note.gnu.build-id", &size);
        uint8_t *unaligned;

        ASSERT_EQ(size, 36);
        ASSERT_OK(notes_find_build_id(d, size, hex));
        ASSERT_STREQ(hex, BRD_BUILD_ID);

        /* The parser must not assume a 4-byte aligned buffer. */
        unaligned = malloc(size + 1);
        ASSERT_TRUE(unaligned != NULL);
        memcpy(unaligned + 1, d, size);
        memset(hex, 0, sizeof(hex));
        ASSERT_OK(notes_find_build_id(unaligned + 1, size, hex));
        ASSERT_STREQ(hex, BRD_BUILD_ID);
        free(unaligned);

        ASSERT_OK(notes_module_build_id(FIXTURE_ROOT, "brd", hex));
        ASSERT_STREQ(hex, BRD_BUILD_ID);
        ASSERT_ERROR(notes_module_build_id(FIXTURE_ROOT, "dummy", hex), ENOENT);
        ASSERT_ERROR(notes_module_build_id(FIXTURE_ROOT, "../module/brd", hex), EINVAL);
        ASSERT_ERROR(notes_module_build_id(FIXTURE_ROOT, "..", hex), EINVAL);
        ASSERT_ERROR(notes_module_build_id(FIXTURE_ROOT, "", hex), EINVAL);
        free(d);
}

static size_t put_note(uint8_t *p, uint32_t namesz, uint32_t descsz, uint32_t type,
                       const char *name, size_t name_bytes, const uint8_t *desc, size_t desc_bytes) {
        size_t n = 0;

        memcpy(p + n, &namesz, 4), n += 4;
        memcpy(p + n, &descsz, 4), n += 4;
        memcpy(p + n, &type, 4), n += 4;
        memcpy(p + n, name, name_bytes), n += name_bytes;
        while (n % 4)
                p[n++] = 0;
        memcpy(p + n, desc, desc_bytes), n += desc_bytes;
        while (n % 4)
                p[n++] = 0;
        return n;
}

TEST(synthetic_notes) {
        static const uint8_t id[20] = { 0x00, 0x01, 0x02, 0xab, 0xcd, 0xef, 0xff, 0x10,
                                        0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90,
                                        0xa0, 0xb0, 0xc0, 0xd0 };
        uint8_t buf[256];
        char hex[BUILD_ID_HEX_MAX] = "untouched";
        size_t n;

        /* An "GNU" ABI tag (type 1) and a "Linux" note of type 3 are skipped;
         * an odd name length is padded; a 16-byte (md5/uuid) build-id works. */
        n = put_note(buf, 4, 16, 1, "GNU", 4, id, 16);
        n += put_note(buf + n, 6, 3, 3, "Linux", 6, id, 3);
        n += put_note(buf + n, 4, 16, 3, "GNU", 4, id, 16);
        ASSERT_OK(notes_find_build_id(buf, n, hex));
        ASSERT_STREQ(hex, "000102abcdefff102030405060708090");

        /* The last note's desc may end the file without padding. */
        n = put_note(buf, 4, 18, 3, "GNU", 4, id, 18);
        ASSERT_OK(notes_find_build_id(buf, n - 2, hex));
        ASSERT_STREQ(hex, "000102abcdefff102030405060708090a0b0");

        /* Empty input has no notes. */
        ASSERT_ERROR(notes_find_build_id(buf, 0, hex), ENOENT);

        /* A header shorter than 12 bytes. */
        ASSERT_ERROR(notes_find_build_id(buf, 11, hex), EBADMSG);

        /* n_descsz and n_namesz near UINT32_MAX must not wrap the offsets. */
        n = put_note(buf, 4, UINT32_MAX, 3, "GNU", 4, id, 20);
        ASSERT_ERROR(notes_find_build_id(buf, n, hex), EBADMSG);
        n = put_note(buf, UINT32_MAX - 2, 20, 3, "GNU", 4, id, 20);
        ASSERT_ERROR(notes_find_build_id(buf, n, hex), EBADMSG);
        n = put_note(buf, UINT32_MAX, UINT32_MAX, 7, "GNU", 4, id, 20);
        ASSERT_ERROR(notes_find_build_id(buf, n, hex), EBADMSG);

        /* A build-id we cannot represent, or an empty one. */
        n = put_note(buf, 4, 0, 3, "GNU", 4, id, 0);
        ASSERT_ERROR(notes_find_build_id(buf, n, hex), EBADMSG);
        n = put_note(buf, 4, 24, 3, "GNU", 4, (const uint8_t *) "0123456789abcdefghijklmn", 24);
        ASSERT_ERROR(notes_find_build_id(buf, n, hex), EBADMSG);

        /* Trailing garbage after a note without a build-id. */
        n = put_note(buf, 4, 4, 1, "GNU", 4, id, 4);
        buf[n++] = 1;
        ASSERT_ERROR(notes_find_build_id(buf, n, hex), EBADMSG);

        /* Failures leave the output as it was. */
        ASSERT_STREQ(hex, "000102abcdefff102030405060708090a0b0");
}

TEST(build_id_to_hex_clamps) {
        uint8_t id[32];
        char hex[BUILD_ID_HEX_MAX];

        for (size_t i = 0; i < sizeof(id); i++)
                id[i] = (uint8_t) (0xf0 + (i & 0xf));
        build_id_to_hex(id, sizeof(id), hex);
        ASSERT_EQ(strlen(hex), 40);
        ASSERT_STREQ(hex, "f0f1f2f3f4f5f6f7f8f9fafbfcfdfefff0f1f2f3");
        build_id_to_hex(id, 0, hex);
        ASSERT_STREQ(hex, "");
}

/* Every byte value, against printf's digits. */
TEST(build_id_to_hex_of_every_byte) {
        char hex[BUILD_ID_HEX_MAX], want[3];
        uint8_t id[1];

        for (unsigned b = 0; b < 256; b++) {
                id[0] = (uint8_t) b;
                build_id_to_hex(id, 1, hex);
                snprintf(want, sizeof want, "%02x", b);
                ASSERT_STREQ(hex, want);
        }
}

TEST(kernel_build_id_missing_root) {
        char hex[BUILD_ID_HEX_MAX];

        ASSERT_ERROR(notes_kernel_build_id("/nonexistent-root-for-test", hex), ENOENT);
}
