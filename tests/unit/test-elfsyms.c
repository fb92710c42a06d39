/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The user-space function tables: elfsyms_read() over a small executable
 * built with symbols and its stripped copy (the fuzz corpus's tiny-exe.elf
 * and tiny-stripped.elf: gcc -O1 -fno-inline of four functions, main,
 * helper_two, the static helper_one and one whose symbol is the C++ name
 * _ZN5outer5innerEi, given by an asm label), the table file format, and the
 * store by build-id with its links refused and its least recently used
 * tables pruned first. DWARF: named-funcs built with it (DWARF_FUNCS), a
 * copy without .symtab (DWARF_ONLY) and a stripped one with a
 * .gnu_debuglink (DEBUGLINKED), made by the build. */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elf/elfsyms.h"
#include "elf/symstore.h"
#include "fileio.h"
#include "macro.h"
#include "test.h"

#define EXE USER_ELF_DIR "/tiny-exe.elf"
#define STRIPPED USER_ELF_DIR "/tiny-stripped.elf"

static int open_or_die(const char *path) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);

        ASSERT_TRUE(fd >= 0);
        return fd;
}

static const elfsym *find_name(const elfsyms *s, const char *name) {
        for (size_t i = 0; i < s->n; i++)
                if (streq(elfsyms_name(s, s->v + i), name))
                        return s->v + i;
        return NULL;
}

TEST(read_symtab) {
        _cleanup_close_ int fd = open_or_die(EXE);
        elfsyms *s = NULL;
        const elfsym *m, *h1, *h2;

        ASSERT_OK(elfsyms_read(fd, NULL, -1, &s));
        ASSERT_EQ(s->source, ELFSYMS_SYMTAB);
        ASSERT_EQ(strlen(s->build_id), 40);
        m = find_name(s, "main");
        h1 = find_name(s, "helper_one");
        h2 = find_name(s, "helper_two");
        ASSERT_TRUE(m && h1 && h2);
        /* C++ names demangled. */
        ASSERT_TRUE(find_name(s, "outer::inner(int)") != NULL);
        ASSERT_NULL(find_name(s, "_ZN5outer5innerEi"));
        ASSERT_GT(m->size, 0);
        /* Every offset inside a function names it; the byte after does not
         * name it (another function, or nothing). */
        for (uint64_t o = m->offset; o < m->offset + m->size; o++)
                ASSERT_TRUE(elfsyms_lookup(s, o) == m);
        ASSERT_TRUE(elfsyms_lookup(s, m->offset + m->size) != m);
        ASSERT_NULL(elfsyms_lookup(s, 0));
        /* The offset is a file offset: the function's first bytes are
         * there in the file (helper_one: x * 3 + 1, lea 0x1(%rdi,%rdi,2)). */
        {
                uint8_t code[4];

                ASSERT_EQ(pread(fd, code, sizeof code, (off_t) h1->offset), (ssize_t) sizeof code);
                ASSERT_EQ(code[0], 0x8d);       /* lea */
        }
        /* Sorted, one entry per offset. */
        for (size_t i = 1; i < s->n; i++)
                ASSERT_LT(s->v[i - 1].offset, s->v[i].offset);
        elfsyms_free(s);
}

TEST(build_id_checked) {
        _cleanup_close_ int fd = open_or_die(EXE);
        char id[BUILD_ID_HEX_MAX];
        elfsyms *s = NULL;

        ASSERT_OK(elfsyms_build_id(fd, id));
        ASSERT_OK(elfsyms_read(fd, id, -1, &s));
        elfsyms_free(s);
        s = NULL;
        ASSERT_ERROR(elfsyms_read(fd, "00112233445566778899aabbccddeeff01234567", -1, &s), ESTALE);
        ASSERT_NULL(s);
}

TEST(stripped_and_debug_file) {
        _cleanup_close_ int exe = open_or_die(EXE), stripped = open_or_die(STRIPPED);
        elfsyms *s = NULL;

        /* A stripped PIE's .dynsym holds no function of its own. */
        ASSERT_OK(elfsyms_read(stripped, NULL, -1, &s));
        ASSERT_EQ(s->source, ELFSYMS_NONE);
        ASSERT_EQ(s->n, 0);
        elfsyms_free(s);
        s = NULL;
        /* The unstripped file stands in for its debug file (same build-id):
         * the names come from it, the offsets from the stripped file. */
        ASSERT_OK(elfsyms_read(stripped, NULL, exe, &s));
        ASSERT_EQ(s->source, ELFSYMS_DEBUG);
        ASSERT_TRUE(find_name(s, "helper_one") != NULL);
        elfsyms_free(s);
}

TEST(not_elf) {
        _cleanup_close_ int fd = open_or_die(USER_ELF_DIR "/garbage.bin");
        _cleanup_close_ int c32 = open_or_die(USER_ELF_DIR "/class32.elf");
        _cleanup_close_ int huge = open_or_die(USER_ELF_DIR "/symtab-size-huge.elf");
        elfsyms *s = NULL;

        ASSERT_ERROR(elfsyms_read(fd, NULL, -1, &s), EBADMSG);
        ASSERT_ERROR(elfsyms_read(c32, NULL, -1, &s), EBADMSG);
        ASSERT_ERROR(elfsyms_read(huge, NULL, -1, &s), EBADMSG);
        ASSERT_NULL(s);
}

TEST(encode_decode) {
        _cleanup_close_ int fd = open_or_die(EXE);
        _cleanup_free_ char *enc = NULL;
        elfsyms *s = NULL, *d = NULL;
        size_t n;

        ASSERT_OK(elfsyms_read(fd, NULL, -1, &s));
        ASSERT_OK(elfsyms_encode(s, &enc, &n));
        ASSERT_OK(elfsyms_decode(enc, n, &d));
        ASSERT_EQ(d->n, s->n);
        ASSERT_STREQ(d->build_id, s->build_id);
        ASSERT_TRUE(memcmp(d->v, s->v, s->n * sizeof(elfsym)) == 0);
        elfsyms_free(d);
        /* Every damage is refused: a byte cut, an entry out of order, a
         * name past the strings. */
        ASSERT_ERROR(elfsyms_decode(enc, n - 1, &d), EBADMSG);
        ASSERT_GE(s->n, 2);
        {
                /* The first two entries' offsets swapped (entries start at
                 * byte 72: 8 of magic, 16 of counts, 48 of build-id). */
                char tmp[8], name[4];

                memcpy(tmp, enc + 72, 8);
                memcpy(enc + 72, enc + 72 + 16, 8);
                memcpy(enc + 72 + 16, tmp, 8);
                ASSERT_ERROR(elfsyms_decode(enc, n, &d), EBADMSG);
                memcpy(enc + 72 + 16, enc + 72, 8);
                memcpy(enc + 72, tmp, 8);
                ASSERT_OK(elfsyms_decode(enc, n, &d));
                elfsyms_free(d);
                /* The first entry's name offset past the strings. */
                memcpy(name, enc + 72 + 12, 4);
                memcpy(enc + 72 + 12, "\xff\xff\xff\x00", 4);
                ASSERT_ERROR(elfsyms_decode(enc, n, &d), EBADMSG);
                memcpy(enc + 72 + 12, name, 4);
        }
        elfsyms_free(s);
}

/* Every offset of named_leaf_gamma: the inlined code is named by its chain
 * (delta, and epsilon inside it); the only other inlined code is
 * named_inlined_eta's in named_caller_theta. */
TEST(dwarf_inlined) {
        _cleanup_close_ int fd = open_or_die(DWARF_FUNCS);
        _cleanup_free_ char *enc = NULL;
        elfsyms *s = NULL, *d = NULL;
        const elfsym *g, *theta;
        size_t n, in_delta = 0, in_eps = 0, in_eta = 0, size;

        ASSERT_OK(elfsyms_read(fd, NULL, -1, &s));
        ASSERT_EQ(s->source, ELFSYMS_SYMTAB);
        g = find_name(s, "named_leaf_gamma");
        ASSERT_TRUE(g != NULL);
        ASSERT_GT(g->size, 0);
        ASSERT_GT(s->n_inl, 0);
        for (uint64_t o = g->offset; o < g->offset + g->size; o++) {
                const char *c = elfsyms_inlined(s, o);

                if (!c)
                        continue;
                if (streq(c, "named_inlined_delta"))
                        in_delta++;
                else if (streq(c, "named_inlined_delta;named_inlined_epsilon"))
                        in_eps++;
                else
                        ASSERT_STREQ(c, "(another chain)");
        }
        ASSERT_GT(in_delta, 0);
        ASSERT_GT(in_eps, 8);
        theta = find_name(s, "named_caller_theta");
        ASSERT_TRUE(theta != NULL);
        for (size_t i = 0; i < s->n_inl; i++) {
                const elfsym *in = elfsyms_lookup(s, s->inl[i].offset);

                ASSERT_TRUE(in == g || in == theta);
                if (in == theta) {
                        ASSERT_STREQ(elfsyms_name(s, s->inl + i), "named_inlined_eta");
                        in_eta += s->inl[i].size;
                }
                ASSERT_TRUE(i == 0 || s->inl[i - 1].offset + s->inl[i - 1].size <= s->inl[i].offset);
        }
        ASSERT_GT(in_eta, 0);
        ASSERT_NULL(elfsyms_inlined(s, g->offset + g->size));
        ASSERT_NULL(elfsyms_inlined(s, 0));

        /* Kept in the file, read back the same; a piece overlapping the
         * one before is refused. */
        ASSERT_OK(elfsyms_encode(s, &enc, &size));
        ASSERT_OK(elfsyms_decode(enc, size, &d));
        ASSERT_EQ(d->n_inl, s->n_inl);
        ASSERT_TRUE(memcmp(d->inl, s->inl, s->n_inl * sizeof(elfsym)) == 0);
        ASSERT_STREQ(elfsyms_inlined(d, s->inl[0].offset), elfsyms_inlined(s, s->inl[0].offset));
        elfsyms_free(d);
        d = NULL;
        if (s->n_inl >= 2) {
                char *p = enc + 72 + s->n * 16 + 16 + 8;        /* the second piece's size */
                char saved[4];

                memcpy(saved, p, 4);
                memcpy(p, "\0\0\0\0", 4);
                ASSERT_ERROR(elfsyms_decode(enc, size, &d), EBADMSG);
                memcpy(p, saved, 4);
                p -= 8;                 /* the second piece's offset: inside the first */
                memcpy(p, enc + 72 + s->n * 16, 8);
                ASSERT_ERROR(elfsyms_decode(enc, size, &d), EBADMSG);
        }
        n = s->n;
        ASSERT_GT(n, 0);
        elfsyms_free(s);
}

/* Without .symtab (and without functions of its own in .dynsym), DWARF
 * names the functions, at the offsets the symbol table gave. */
TEST(dwarf_only) {
        _cleanup_close_ int fd = open_or_die(DWARF_ONLY), full = open_or_die(DWARF_FUNCS);
        elfsyms *s = NULL, *f = NULL;
        static const char *const names[] = { "main", "named_outer_alpha", "named_middle_beta", "named_leaf_gamma" };

        ASSERT_OK(elfsyms_read(fd, NULL, -1, &s));
        ASSERT_OK(elfsyms_read(full, NULL, -1, &f));
        ASSERT_EQ(s->source, ELFSYMS_DWARF);
        ASSERT_EQ(s->n_dwarf, s->n);
        ASSERT_EQ(f->n_dwarf, 0);       /* every DWARF function has its ELF symbol there */
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                const elfsym *a = find_name(s, names[i]), *b = find_name(f, names[i]);

                ASSERT_TRUE(a && b);
                ASSERT_EQ(a->offset, b->offset);
                ASSERT_EQ(a->size, b->size);
        }
        ASSERT_EQ(s->n_inl, f->n_inl);
        elfsyms_free(s);
        elfsyms_free(f);
}

TEST(debuglink) {
        _cleanup_close_ int linked = open_or_die(DEBUGLINKED), plain = open_or_die(DWARF_FUNCS);
        _cleanup_close_ int garbage = open_or_die(USER_ELF_DIR "/garbage.bin");
        char name[256];
        elfsyms *s = NULL;

        ASSERT_OK(elfsyms_debuglink(linked, name));
        ASSERT_STREQ(name, "dwarf-funcs");
        ASSERT_ERROR(elfsyms_debuglink(plain, name), ENOENT);
        ASSERT_ERROR(elfsyms_debuglink(garbage, name), EBADMSG);
        /* The stripped file with the file it links to as its debug file. */
        ASSERT_OK(elfsyms_read(linked, NULL, plain, &s));
        ASSERT_EQ(s->source, ELFSYMS_DEBUG);
        ASSERT_TRUE(find_name(s, "named_leaf_gamma") != NULL);
        ASSERT_GT(s->n_inl, 0);
        elfsyms_free(s);
}

/* A table of the first version (no inlined pieces) is read; one that
 * claims pieces is not. */
TEST(decode_version_1) {
        _cleanup_close_ int fd = open_or_die(EXE);
        _cleanup_free_ char *enc = NULL;
        elfsyms *s = NULL, *d = NULL;
        size_t n;

        ASSERT_OK(elfsyms_read(fd, NULL, -1, &s));
        ASSERT_EQ(s->n_inl, 0);
        ASSERT_OK(elfsyms_encode(s, &enc, &n));
        memcpy(enc, "PSNSYMS1", 8);
        ASSERT_OK(elfsyms_decode(enc, n, &d));
        ASSERT_EQ(d->n, s->n);
        elfsyms_free(d);
        d = NULL;
        enc[20] = 1;
        ASSERT_ERROR(elfsyms_decode(enc, n, &d), EBADMSG);
        elfsyms_free(s);
}

/* A large table (made as a file, so decoded as a query loads it) looked
 * up through its index gives what a linear scan gives, at every kind of
 * offset: before, inside and between entries, past the end. */
TEST(index_lookup) {
        enum { N = 5000 };
        elfsyms *t = calloc(1, sizeof *t), *d = NULL;
        _cleanup_free_ char *enc = NULL;
        uint64_t x = 88172645463325252u, off = 0x1000;
        size_t size;

        ASSERT_TRUE(t);
        t->v = calloc(N, sizeof(elfsym));
        t->strings = strdup("f");
        ASSERT_TRUE(t->v && t->strings);
        t->strings_size = 2;
        t->source = ELFSYMS_SYMTAB;
        for (size_t i = 0; i < N; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                /* Gaps from 1 byte to 64 KiB, sizes 0 (to the next) or shorter than the gap. */
                off += 1 + x % (i % 50 == 0 ? 65536 : 300);
                t->v[i] = (elfsym) { .offset = off, .size = (uint32_t) ((x >> 20) % 3 == 0 ? 0 : 1 + (x >> 24) % 200) };
        }
        t->n = N;
        ASSERT_OK(elfsyms_encode(t, &enc, &size));
        ASSERT_OK(elfsyms_decode(enc, size, &d));
        ASSERT_TRUE(d->index != NULL);
        ASSERT_LE(d->n_index, (size_t) N);
        size_t i = 0;
        for (uint64_t o = 0; o < off + 10000; o += 1 + o % 7) {
                const elfsym *want = NULL;

                /* The last entry starting at or before o (o only grows),
                 * and whether it covers o. */
                while (i < t->n && t->v[i].offset <= o)
                        i++;
                if (i > 0) {
                        const elfsym *e = t->v + i - 1;

                        if (e->size != 0 ? o - e->offset < e->size : (i < t->n || o - e->offset < 4096))
                                want = d->v + (e - t->v);
                }
                ASSERT_TRUE(elfsyms_lookup(d, o) == want);
        }
        elfsyms_free(d);
        elfsyms_free(t);
}

static char *make_dir(void) {
        char *d = strdup("/tmp/test-elfsyms.XXXXXX");

        ASSERT_TRUE(d && mkdtemp(d));
        return d;
}

static void remove_dir(const char *d) {
        char cmd[512];

        snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
        ASSERT_EQ(system(cmd), 0);
}

TEST(store_save_load_prune) {
        _cleanup_close_ int fd = open_or_die(EXE);
        _cleanup_free_ char *dir = make_dir();
        char path[512];
        elfsyms *s = NULL, *l = NULL, *t;
        symstore_usage u;
        uint64_t removed;
        struct stat st;

        ASSERT_OK(elfsyms_read(fd, NULL, -1, &s));
        ASSERT_ERROR(symstore_load(dir, s->build_id, false, &l), ENOENT);
        ASSERT_TRUE(!symstore_has(dir, s->build_id));
        ASSERT_OK(symstore_save(dir, s));
        ASSERT_ERROR(symstore_save(dir, s), EEXIST);
        ASSERT_TRUE(symstore_has(dir, s->build_id));
        snprintf(path, sizeof path, "%s/" SYMSTORE_DIR "/%s", dir, s->build_id);
        ASSERT_OK(stat(path, &st) < 0 ? -errno : 0);
        ASSERT_EQ(st.st_mode & 07777, 0400);
        ASSERT_OK(symstore_load(dir, s->build_id, true, &l));
        ASSERT_EQ(l->n, s->n);
        elfsyms_free(l);

        /* Three more tables (other build-ids), used in an order: the prune
         * removes the least recently used first. */
        t = s;
        for (int i = 0; i < 3; i++) {
                memset(t->build_id, '1' + i, 40);
                ASSERT_OK(symstore_save(dir, t));
                snprintf(path, sizeof path, "%s/" SYMSTORE_DIR "/%s", dir, t->build_id);
                struct timespec ts[2] = { { .tv_sec = 1000 + i }, { .tv_sec = 1000 + i } };
                ASSERT_OK(utimensat(AT_FDCWD, path, ts, 0) < 0 ? -errno : 0);
        }
        ASSERT_OK(symstore_prune(dir, 0, &u, &removed));
        ASSERT_EQ(u.tables, 4);
        ASSERT_EQ(removed, 0);
        ASSERT_OK(symstore_prune(dir, u.bytes - 1, &u, &removed));
        ASSERT_EQ(removed, 1);
        ASSERT_EQ(u.tables, 3);
        memset(t->build_id, '1', 40);   /* the oldest */
        ASSERT_TRUE(!symstore_has(dir, t->build_id));
        memset(t->build_id, '2', 40);
        ASSERT_TRUE(symstore_has(dir, t->build_id));
        elfsyms_free(s);
        remove_dir(dir);
}

TEST(store_refuses_links) {
        _cleanup_close_ int fd = open_or_die(EXE);
        _cleanup_free_ char *dir = make_dir(), *other = make_dir();
        char path[512], target[512];
        elfsyms *s = NULL, *l = NULL;

        ASSERT_OK(elfsyms_read(fd, NULL, -1, &s));
        /* A table planted as a link to a table elsewhere is not read. */
        snprintf(path, sizeof path, "%s/" SYMSTORE_DIR, dir);
        ASSERT_EQ(mkdir(path, 0700), 0);
        ASSERT_OK(symstore_save(other, s));
        snprintf(target, sizeof target, "%s/" SYMSTORE_DIR "/%s", other, s->build_id);
        snprintf(path, sizeof path, "%s/" SYMSTORE_DIR "/%s", dir, s->build_id);
        ASSERT_EQ(symlink(target, path), 0);
        ASSERT_ERROR(symstore_load(dir, s->build_id, false, &l), ELOOP);
        remove_dir(dir);
        free(dir);

        /* .symbols itself a link: nothing is written through it. */
        dir = make_dir();
        snprintf(path, sizeof path, "%s/" SYMSTORE_DIR, dir);
        snprintf(target, sizeof target, "%s/" SYMSTORE_DIR, other);
        ASSERT_EQ(symlink(target, path), 0);
        memset(s->build_id, '5', 40);
        ASSERT_TRUE(symstore_save(dir, s) < 0);
        snprintf(target, sizeof target, "%s/" SYMSTORE_DIR "/%s", other, s->build_id);
        ASSERT_TRUE(access(target, F_OK) < 0);
        elfsyms_free(s);
        remove_dir(dir);
        remove_dir(other);
}
