/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Parsing ELF note sections as the kernel exports them (notes.h). */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "fileio.h"
#include "kernel/notes.h"
#include "macro.h"

/* NT_GNU_BUILD_ID from <elf.h>; spelled out so the parser does not depend
 * on the header's presence. */
#define NOTE_TYPE_GNU_BUILD_ID 3

/* /sys/kernel/notes is the kernel's .notes section (about 500 bytes on
 * x86-64); a module's build-id note is 36 bytes. */
#define NOTES_FILE_MAX_BYTES (64u * 1024u)

/* Module names are at most MODULE_NAME_LEN - 1 = 55 bytes. */
#define MODULE_NAME_MAX 56

static uint32_t read_u32(const uint8_t *p) {
        uint32_t v;

        /* Notes are in the kernel's byte order, which is ours: the files are
         * read on the machine that produced them. memcpy: no alignment
         * assumptions about the caller's buffer. */
        memcpy(&v, p, sizeof(v));
        return v;
}

static uint64_t align4(uint64_t v) {
        return (v + 3) & ~UINT64_C(3);
}

/* The two digits of each byte: a load and a store a byte, where the
 * digits one at a time were two of each and the shifts (every MMAP2
 * record of a fork/exec-heavy machine is converted). */
#define HEX_DIGIT(n) ((char) ((n) < 10 ? '0' + (n) : 'a' + (n) - 10))
#define HEX_PAIR(b) { HEX_DIGIT((b) >> 4), HEX_DIGIT((b) & 15) }
#define HEX_PAIRS4(b) HEX_PAIR(b), HEX_PAIR((b) + 1), HEX_PAIR((b) + 2), HEX_PAIR((b) + 3)
#define HEX_PAIRS16(b) HEX_PAIRS4(b), HEX_PAIRS4((b) + 4), HEX_PAIRS4((b) + 8), HEX_PAIRS4((b) + 12)
#define HEX_PAIRS64(b) HEX_PAIRS16(b), HEX_PAIRS16((b) + 16), HEX_PAIRS16((b) + 32), HEX_PAIRS16((b) + 48)
static const char hex_pairs[256][2] = { HEX_PAIRS64(0), HEX_PAIRS64(64), HEX_PAIRS64(128), HEX_PAIRS64(192) };

void build_id_to_hex(const uint8_t *id, size_t size, char ret_hex[static BUILD_ID_HEX_MAX]) {
        size_t i;

        if (size > BUILD_ID_MAX_BYTES)
                size = BUILD_ID_MAX_BYTES;
        for (i = 0; i < size; i++)
                memcpy(ret_hex + 2 * i, hex_pairs[id[i]], 2);
        ret_hex[2 * i] = 0;
}

int notes_find_build_id(const uint8_t *data, size_t size, char ret_hex[static BUILD_ID_HEX_MAX]) {
        uint64_t off = 0;

        if (!data && size > 0)
                return -EINVAL;

        /* Each note is an Elf64_Nhdr { u32 n_namesz, n_descsz, n_type }
         * (the same layout as Elf32_Nhdr), then the name (n_namesz bytes
         * including its NUL) and the desc, each padded to 4 bytes: the
         * kernel's ELFNOTE macros (include/linux/elfnote.h) align both to
         * 4, as does the linker's .note.gnu.build-id that sysfs shows for
         * vmlinux and for each module. */
        while (off < size) {
                uint32_t namesz, descsz, type;
                uint64_t name_off, desc_off, next;

                if (size - off < 12)
                        return -EBADMSG;
                namesz = read_u32(data + off);
                descsz = read_u32(data + off + 4);
                type = read_u32(data + off + 8);

                /* 64-bit arithmetic: 32-bit sizes cannot overflow it. */
                name_off = off + 12;
                desc_off = name_off + align4(namesz);
                next = desc_off + align4(descsz);
                if (desc_off > size || desc_off + descsz > size)
                        return -EBADMSG;

                if (type == NOTE_TYPE_GNU_BUILD_ID && namesz == 4 &&
                    memcmp(data + name_off, "GNU", 4) == 0) {
                        /* A GNU build-id is 16 (md5, uuid) or 20 (sha1) bytes
                         * with current linkers; what we cannot represent is
                         * treated as malformed rather than cut short. */
                        if (descsz == 0 || descsz > BUILD_ID_MAX_BYTES)
                                return -EBADMSG;
                        build_id_to_hex(data + desc_off, descsz, ret_hex);
                        return 0;
                }

                /* The last note's desc padding may be missing from a file
                 * that ends right after the desc. */
                off = MIN(next, (uint64_t) size);
        }
        return -ENOENT;
}

int notes_kernel_build_id(const char *root, char ret_hex[static BUILD_ID_HEX_MAX]) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;
        int r;

        r = read_full_file_at(root, "sys/kernel/notes", NOTES_FILE_MAX_BYTES, &buf, &size);
        if (r < 0)
                return r;
        return notes_find_build_id((const uint8_t *) buf, size, ret_hex);
}

int notes_module_build_id(const char *root, const char *module, char ret_hex[static BUILD_ID_HEX_MAX]) {
        _cleanup_free_ char *buf = NULL, *rel = NULL;
        size_t size = 0, l;
        int r;

        /* The name becomes a path component: refuse anything that could
         * leave sys/module/. */
        if (!module)
                return -EINVAL;
        l = strlen(module);
        if (l == 0 || l >= MODULE_NAME_MAX || strchr(module, '/') ||
            strcmp(module, ".") == 0 || strcmp(module, "..") == 0)
                return -EINVAL;

        if (asprintf(&rel, "sys/module/%s/notes/.note.gnu.build-id", module) < 0)
                return -ENOMEM;
        r = read_full_file_at(root, rel, NOTES_FILE_MAX_BYTES, &buf, &size);
        if (r < 0)
                return r;
        return notes_find_build_id((const uint8_t *) buf, size, ret_hex);
}
