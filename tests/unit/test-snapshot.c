/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The kcore snapshot cache (common/kernel/snapshot.c) over synthetic roots: proc/
 * and sys/ files in the kernel's formats, the kernel's notes from the
 * captured fixture, and a kcore-like ET_CORE file written here. */

#include <elf.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>

#include "fileio.h"
#include "kernel/kcore.h"
#include "kernel/snapshot.h"
#include "macro.h"
#include "test.h"

#define TEXT_ADDR UINT64_C(0xffffffff81000000)
#define MOD_AREA UINT64_C(0xffffffffc0000000)
#define FIXTURE_BUILD_ID_FILE TEST_DATA("kernel-6.1-brd/sys/kernel/notes")

typedef struct fake_root {
        char dir[64];
        char root[96], cache[96];
} fake_root;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void) st;
        (void) flag;
        (void) ftw;
        chmod(path, 0700);
        return remove(path);
}

static void fake_root_remove(fake_root *f) {
        if (f->dir[0])
                (void) nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void write_file(const char *dir, const char *rel, const void *data, size_t len) {
        _cleanup_free_ char *p = path_join(dir, rel);
        FILE *f;

        ASSERT_TRUE(p);
        f = fopen(p, "we");
        ASSERT_TRUE(f);
        ASSERT_EQ(fwrite(data, 1, len, f), len);
        ASSERT_EQ(fclose(f), 0);
}

static void write_text(const char *dir, const char *rel, const char *text) {
        write_file(dir, rel, text, strlen(text));
}

static char *kallsyms_text(uint64_t text, const char *extra) {
        char *s;

        ASSERT_TRUE(asprintf(&s,
                             "0000000000000000 A fixed_percpu_data\n"
                             "%016" PRIx64 " T _text\n"
                             "%016" PRIx64 " T startup_64\n"
                             "%016" PRIx64 " T _stext\n"
                             "%016" PRIx64 " T _etext\n"
                             "%016" PRIx64 " t brd_probe\t[brd]\n"
                             "%s",
                             text, text, text + 0x1000, text + 0x3000, MOD_AREA + 0x1000, extra) >= 0);
        return s;
}

static void set_kallsyms(const fake_root *f, uint64_t text, const char *extra) {
        _cleanup_free_ char *k = kallsyms_text(text, extra);

        write_text(f->root, "proc/kallsyms", k);
}

static void set_modules(const fake_root *f, uint64_t brd_base) {
        char buf[128];

        snprintf(buf, sizeof buf, "brd 16384 0 - Live 0x%016" PRIx64 "\n", brd_base);
        write_text(f->root, "proc/modules", buf);
}

/* A kcore-like file: ELF header, two executable PT_LOADs (kernel text and
 * module area, 16 KiB each) and a non-executable one; every byte of a
 * segment is derived from its address. */
static void write_kcore(const fake_root *f, uint64_t text) {
        static const struct { uint64_t vaddr; uint32_t flags; } segs[] = {
                { 0, PF_R | PF_X }, { MOD_AREA, PF_R | PF_W | PF_X }, { 0xffff888000000000ull, PF_R | PF_W },
        };
        const size_t seg_size = 0x4000;
        _cleanup_free_ uint8_t *buf = NULL;
        size_t size = 0x1000 + ELEMENTSOF(segs) * seg_size;
        Elf64_Ehdr *eh;
        Elf64_Phdr *ph;

        buf = calloc(1, size);
        ASSERT_TRUE(buf);
        eh = (Elf64_Ehdr *) buf;
        memcpy(eh->e_ident, ELFMAG, SELFMAG);
        eh->e_ident[EI_CLASS] = ELFCLASS64;
        eh->e_ident[EI_DATA] = ELFDATA2LSB;
        eh->e_ident[EI_VERSION] = EV_CURRENT;
        eh->e_type = ET_CORE;
        eh->e_machine = EM_X86_64;
        eh->e_version = EV_CURRENT;
        eh->e_phoff = sizeof *eh;
        eh->e_ehsize = sizeof *eh;
        eh->e_phentsize = sizeof *ph;
        eh->e_phnum = ELEMENTSOF(segs);
        ph = (Elf64_Phdr *) (buf + sizeof *eh);
        for (size_t i = 0; i < ELEMENTSOF(segs); i++) {
                uint64_t vaddr = i == 0 ? text : segs[i].vaddr;

                ph[i] = (Elf64_Phdr) {
                        .p_type = PT_LOAD, .p_flags = segs[i].flags, .p_offset = 0x1000 + i * seg_size,
                        .p_vaddr = vaddr, .p_paddr = UINT64_MAX, .p_filesz = seg_size, .p_memsz = seg_size,
                        .p_align = 0x1000,
                };
                for (size_t b = 0; b < seg_size; b++)
                        buf[0x1000 + i * seg_size + b] = (uint8_t) ((vaddr + b) * 7 >> 3);
        }
        write_file(f->root, "proc/kcore", buf, size);
}

static void fake_root_make(fake_root *f, bool with_kcore) {
        _cleanup_free_ char *notes = NULL;
        char p[128];
        size_t len = 0;

        snprintf(f->dir, sizeof f->dir, "/tmp/test-snapshot.XXXXXX");
        ASSERT_TRUE(mkdtemp(f->dir));
        snprintf(f->root, sizeof f->root, "%s/root", f->dir);
        snprintf(f->cache, sizeof f->cache, "%s/cache", f->dir);
        for (const char *const *d = (const char *const[]) { "root", "root/proc", "root/sys", "root/sys/kernel", NULL }; *d; d++) {
                snprintf(p, sizeof p, "%s/%s", f->dir, *d);
                ASSERT_OK(mkdir(p, 0755));
        }
        ASSERT_OK(read_full_file(FIXTURE_BUILD_ID_FILE, 1 << 16, &notes, &len));
        write_file(f->root, "sys/kernel/notes", notes, len);
        set_kallsyms(f, TEXT_ADDR, "");
        set_modules(f, MOD_AREA);
        if (with_kcore)
                write_kcore(f, TEXT_ADDR);
}

static char *file_in(const char *dir, const char *name) {
        char *p = path_join(dir, name);

        ASSERT_TRUE(p);
        return p;
}

static bool same_file_text(const char *a, const char *b) {
        _cleanup_free_ char *x = NULL, *y = NULL;
        size_t nx = 0, ny = 0;

        ASSERT_OK(read_full_file(a, 1 << 24, &x, &nx));
        ASSERT_OK(read_full_file(b, 1 << 24, &y, &ny));
        return nx == ny && memcmp(x, y, nx) == 0;
}

static size_t count_entries(const char *dir) {
        _cleanup_(closedirp) DIR *d = opendir(dir);
        struct dirent *de;
        size_t n = 0;

        ASSERT_TRUE(d);
        while ((de = readdir(d)))
                n += de->d_name[0] != '.';
        return n;
}

static size_t count_snapshots(const char *cache) {
        snapshot_info *v = NULL;
        size_t n = 0;

        ASSERT_OK(snapshot_list(cache, &v, &n));
        snapshot_infos_free(v, n);
        return n;
}

TEST(names_are_local_time_to_the_hundredth) {
        char name[SNAPSHOT_NAME_LEN + 1], expect[32];
        uint64_t t = 1795312967483999999ull, back = 0;
        time_t sec = (time_t) (t / NSEC_PER_SEC);
        struct tm tm;

        ASSERT_OK(snapshot_name_from_time(t, name));
        ASSERT_TRUE(localtime_r(&sec, &tm));
        strftime(expect, sizeof expect, "%Y%m%d%H%M%S48", &tm);
        ASSERT_STREQ(name, expect);
        ASSERT_OK(snapshot_time_from_name(name, &back));
        ASSERT_U64_EQ(back, t - t % (NSEC_PER_SEC / 100));

        ASSERT_ERROR(snapshot_time_from_name("202611220202474", &back), EINVAL);       /* 15 digits */
        ASSERT_ERROR(snapshot_time_from_name("20261122020247480", &back), EINVAL);     /* 17 */
        ASSERT_ERROR(snapshot_time_from_name("2026112202024a48", &back), EINVAL);
        ASSERT_ERROR(snapshot_time_from_name("2026133102024748", &back), EINVAL);      /* month 13 */
        ASSERT_ERROR(snapshot_time_from_name("2026023102024748", &back), EINVAL);      /* 31 February */
        ASSERT_ERROR(snapshot_time_from_name(".tmp", &back), EINVAL);
}

TEST(kallsyms_comparison_ignores_dynamic_code_only) {
        _cleanup_free_ char *a = kallsyms_text(TEXT_ADDR, "ffffffffc0002000 t bpf_prog_1_x\t[bpf]\n");
        _cleanup_free_ char *b = kallsyms_text(TEXT_ADDR, "ffffffffc0003000 t bpf_prog_2_y\t[bpf]\n"
                                                          "ffffffffc0004000 t ftrace_trampoline\t[__builtin__ftrace]\n");
        _cleanup_free_ char *c = kallsyms_text(TEXT_ADDR, "ffffffffc0005000 t dummy_probe\t[dummy]\n");
        _cleanup_free_ char *d = kallsyms_text(TEXT_ADDR + 0x200000, "");

        ASSERT_TRUE(snapshot_kallsyms_same_code(a, strlen(a), b, strlen(b)));
        ASSERT_TRUE(!snapshot_kallsyms_same_code(a, strlen(a), c, strlen(c)));
        ASSERT_TRUE(!snapshot_kallsyms_same_code(a, strlen(a), d, strlen(d)));
        ASSERT_U64_EQ(snapshot_text_addr_from_kallsyms(d, strlen(d)), TEXT_ADDR + 0x200000);
        ASSERT_U64_EQ(snapshot_text_addr_from_kallsyms("ffffffff81001000 T _stext\n", 26), 0xffffffff81001000ull);
        ASSERT_U64_EQ(snapshot_text_addr_from_kallsyms("0000000000000000 T _text\n", 25), 0);
}

TEST(take_creates_a_perf_layout_snapshot_with_a_kcore_extract) {
        _cleanup_(fake_root_remove) fake_root f = {};
        _cleanup_free_ char *kall = NULL, *mods = NULL, *kcore = NULL, *src = NULL, *want_dir = NULL;
        _cleanup_free_ Elf64_Phdr *ph = NULL;
        _cleanup_close_ int fd = -1;
        snapshot_take_result r = {};
        struct stat st;
        size_t n = 0;

        fake_root_make(&f, true);
        ASSERT_OK(snapshot_take(f.root, f.cache, 3, 1795312967480000000ull, &r, NULL));
        ASSERT_TRUE(!r.reused);
        ASSERT_EQ(r.attempts, 1);
        ASSERT_EQ(r.kcore_error, 0);
        ASSERT_TRUE(r.info.has_kcore);
        ASSERT_EQ(r.info.n_modules, 1);
        ASSERT_U64_EQ(r.info.text_addr, TEXT_ADDR);
        /* The build-id of the captured kernel's notes. */
        ASSERT_STREQ(r.info.build_id, "eb4fbcd037e7253717950bf2b93bd5566f47c56f");
        ASSERT_EQ(strlen(r.info.name), SNAPSHOT_NAME_LEN);
        ASSERT_TRUE(asprintf(&want_dir, "%s/[kernel.kcore]/%s/%s", f.cache, r.info.build_id, r.info.name) >= 0);
        ASSERT_STREQ(r.info.path, want_dir);

        kall = file_in(r.info.path, "kallsyms");
        mods = file_in(r.info.path, "modules");
        kcore = file_in(r.info.path, "kcore");
        for (const char *const *p = (const char *const[]) { kall, mods, kcore, NULL }; *p; p++) {
                ASSERT_OK(stat(*p, &st));
                ASSERT_EQ(st.st_mode & 07777, 0400);
        }
        src = path_join(f.root, "proc/kallsyms");
        ASSERT_TRUE(same_file_text(kall, src));
        free(src);
        src = path_join(f.root, "proc/modules");
        ASSERT_TRUE(same_file_text(mods, src));

        /* The extract: the text range _stext.._etext and the module area up
         * to the last module symbol + a page; not the non-executable segment. */
        fd = open(kcore, O_RDONLY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(kcore_read_phdrs(fd, NULL, &ph, &n));
        ASSERT_EQ(n, 2);
        ASSERT_U64_EQ(ph[0].p_vaddr, TEXT_ADDR + 0x1000);
        ASSERT_U64_EQ(ph[0].p_filesz, 0x2000);
        ASSERT_U64_EQ(ph[1].p_vaddr, MOD_AREA);
        ASSERT_U64_EQ(ph[1].p_filesz, 0x2000);
        for (size_t i = 0; i < n; i++) {
                uint8_t b[64];
                ASSERT_EQ(pread(fd, b, sizeof b, (off_t) ph[i].p_offset + 100), (ssize_t) sizeof b);
                for (size_t k = 0; k < sizeof b; k++)
                        ASSERT_EQ(b[k], (uint8_t) ((ph[i].p_vaddr + 100 + k) * 7 >> 3));
        }
        ASSERT_EQ(r.kcore_segments, 2);
        ASSERT_U64_EQ(r.kcore_bytes, 0x4000);

        /* The result says what a listing reads back from the files. */
        {
                snapshot_info *v = NULL;
                size_t nv = 0;
                ASSERT_OK(snapshot_list(f.cache, &v, &nv));
                ASSERT_EQ(nv, 1);
                ASSERT_STREQ(v[0].path, r.info.path);
                ASSERT_U64_EQ(v[0].time_ns, r.info.time_ns);
                ASSERT_U64_EQ(v[0].text_addr, r.info.text_addr);
                ASSERT_EQ(v[0].n_modules, r.info.n_modules);
                ASSERT_U64_EQ(v[0].size_bytes, r.info.size_bytes);
                ASSERT_EQ(v[0].has_kcore, r.info.has_kcore);
                snapshot_infos_free(v, nv);
        }
        snapshot_info_done(&r.info);
}

TEST(same_modules_at_same_addresses_and_same_text_is_reused) {
        _cleanup_(fake_root_remove) fake_root f = {};
        snapshot_take_result a = {}, b = {}, c = {}, d = {}, e = {};

        fake_root_make(&f, true);
        ASSERT_OK(snapshot_take(f.root, f.cache, 3, 1795312967480000000ull, &a, NULL));
        ASSERT_OK(snapshot_take(f.root, f.cache, 3, 1795312968480000000ull, &b, NULL));
        ASSERT_TRUE(b.reused);
        ASSERT_EQ(b.attempts, 0);
        ASSERT_STREQ(b.info.path, a.info.path);

        /* A BPF program more does not make another snapshot. */
        set_kallsyms(&f, TEXT_ADDR, "ffffffffc0009000 t bpf_prog_1_x\t[bpf]\n");
        ASSERT_OK(snapshot_take(f.root, f.cache, 3, 1795312969480000000ull, &c, NULL));
        ASSERT_TRUE(c.reused);

        /* Reuse is decided from proc/modules and the head of
         * proc/kallsyms: one too big to be read whole (sparse, past the
         * 64 MiB a snapshot takes) is still reused, and a new snapshot
         * of it fails, naming the file. */
        {
                char path[160];
                const char *failed = NULL;
                snapshot_take_result big = {};

                snprintf(path, sizeof path, "%s/proc/kallsyms", f.root);
                ASSERT_OK(truncate(path, 64 * 1024 * 1024 + 1));
                ASSERT_OK(snapshot_take(f.root, f.cache, 3, 1795312969580000000ull, &big, &failed));
                ASSERT_TRUE(big.reused);
                ASSERT_STREQ(big.info.path, a.info.path);
                snapshot_info_done(&big.info);
                set_modules(&f, MOD_AREA + 0x8000);
                ASSERT_ERROR(snapshot_take(f.root, f.cache, 3, 1795312969680000000ull, &big, &failed), EFBIG);
                ASSERT_STREQ(failed, "proc/kallsyms");
                ASSERT_EQ(count_snapshots(f.cache), 1);
                set_kallsyms(&f, TEXT_ADDR, "ffffffffc0009000 t bpf_prog_1_x\t[bpf]\n");
                set_modules(&f, MOD_AREA);
        }

        /* brd loaded at another address: a new snapshot. */
        set_modules(&f, MOD_AREA + 0x8000);
        ASSERT_OK(snapshot_take(f.root, f.cache, 3, 1795312970480000000ull, &d, NULL));
        ASSERT_TRUE(!d.reused);
        ASSERT_TRUE(!streq(d.info.path, a.info.path));
        ASSERT_EQ(count_snapshots(f.cache), 2);

        /* Back at the first address: the first one again. */
        set_modules(&f, MOD_AREA);
        ASSERT_OK(snapshot_take(f.root, f.cache, 3, 1795312971480000000ull, &e, NULL));
        ASSERT_TRUE(e.reused);
        ASSERT_STREQ(e.info.path, a.info.path);
        snapshot_info_done(&e.info);

        /* Another boot (KASLR moved _text), same modules: a new one. */
        set_kallsyms(&f, TEXT_ADDR + 0x2000000, "");
        write_kcore(&f, TEXT_ADDR + 0x2000000);
        ASSERT_OK(snapshot_take(f.root, f.cache, 3, 1795312972480000000ull, &e, NULL));
        ASSERT_TRUE(!e.reused);
        ASSERT_U64_EQ(e.info.text_addr, TEXT_ADDR + 0x2000000);
        ASSERT_EQ(count_snapshots(f.cache), 3);

        snapshot_info_done(&a.info);
        snapshot_info_done(&b.info);
        snapshot_info_done(&c.info);
        snapshot_info_done(&d.info);
        snapshot_info_done(&e.info);
}

TEST(without_kcore_kallsyms_and_modules_are_still_snapshotted) {
        _cleanup_(fake_root_remove) fake_root f = {};
        _cleanup_free_ char *kcore = NULL;
        snapshot_take_result a = {}, b = {}, c = {};

        fake_root_make(&f, false);
        ASSERT_OK(snapshot_take(f.root, f.cache, 3, 1795312967480000000ull, &a, NULL));
        ASSERT_TRUE(!a.reused);
        ASSERT_EQ(a.kcore_error, ENOENT);
        ASSERT_TRUE(!a.info.has_kcore);
        kcore = file_in(a.info.path, "kcore");
        ASSERT_TRUE(access(kcore, F_OK) < 0);

        /* Once kcore can be read, a snapshot without it is not reused. */
        write_kcore(&f, TEXT_ADDR);
        ASSERT_OK(snapshot_take(f.root, f.cache, 3, 1795312968480000000ull, &b, NULL));
        ASSERT_TRUE(!b.reused);
        ASSERT_TRUE(b.info.has_kcore);

        /* A snapshot with kcore serves a kernel whose kcore is unreadable. */
        free(kcore);
        kcore = path_join(f.root, "proc/kcore");
        ASSERT_OK(unlink(kcore));
        ASSERT_OK(snapshot_take(f.root, f.cache, 3, 1795312969480000000ull, &c, NULL));
        ASSERT_TRUE(c.reused);
        ASSERT_STREQ(c.info.path, b.info.path);
        snapshot_info_done(&a.info);
        snapshot_info_done(&b.info);
        snapshot_info_done(&c.info);
}

TEST(two_snapshots_in_one_hundredth_get_distinct_names) {
        _cleanup_(fake_root_remove) fake_root f = {};
        snapshot_take_result a = {}, b = {};
        uint64_t ta = 0, tb = 0;

        fake_root_make(&f, false);
        ASSERT_OK(snapshot_take(f.root, f.cache, 3, 1795312967480000000ull, &a, NULL));
        set_modules(&f, MOD_AREA + 0x8000);
        ASSERT_OK(snapshot_take(f.root, f.cache, 3, 1795312967481000000ull, &b, NULL));
        ASSERT_TRUE(!b.reused);
        ASSERT_OK(snapshot_time_from_name(a.info.name, &ta));
        ASSERT_OK(snapshot_time_from_name(b.info.name, &tb));
        ASSERT_U64_EQ(tb, ta + NSEC_PER_SEC / 100);
        snapshot_info_done(&a.info);
        snapshot_info_done(&b.info);
}

/* proc/modules as a FIFO: each open reads the next of a series of texts,
 * as a kernel whose modules change between reads would show. */
typedef struct fifo_feeder {
        char path[128];
        const uint64_t *bases;
        size_t n;
} fifo_feeder;

static bool fifo_open_here(const char *path) {
        _cleanup_(closedirp) DIR *d = opendir("/proc/self/fd");
        struct dirent *de;

        ASSERT_TRUE(d);
        while ((de = readdir(d))) {
                char link[300], target[256];
                ssize_t n;

                snprintf(link, sizeof link, "/proc/self/fd/%s", de->d_name);
                n = readlink(link, target, sizeof target - 1);
                if (n > 0) {
                        target[n] = '\0';
                        if (streq(target, path))
                                return true;
                }
        }
        return false;
}

static void *feed_fifo(void *userdata) {
        fifo_feeder *ff = userdata;

        for (size_t i = 0; i < ff->n; i++) {
                char buf[128];
                int fd = open(ff->path, O_WRONLY | O_CLOEXEC);      /* waits for a reader */
                if (fd < 0)
                        return NULL;
                snprintf(buf, sizeof buf, "brd 16384 0 - Live 0x%016" PRIx64 "\n", ff->bases[i]);
                (void) !write(fd, buf, strlen(buf));
                /* The next open must meet the next reader, not this one
                 * (which would read both texts): wait until the reader has
                 * taken the text (so its fd exists), then until it closed. */
                for (int left = 1; ioctl(fd, FIONREAD, &left) >= 0 && left > 0;)
                        usleep(100);
                close(fd);
                while (fifo_open_here(ff->path))
                        usleep(100);
        }
        return NULL;
}

static int take_while_modules_change(const fake_root *f, const uint64_t *bases, size_t n, snapshot_take_result *r) {
        fifo_feeder ff = { .bases = bases, .n = n };
        pthread_t t;
        int ret;

        snprintf(ff.path, sizeof ff.path, "%s/proc/modules", f->root);
        ASSERT_OK(unlink(ff.path));
        ASSERT_OK(mkfifo(ff.path, 0600));
        ASSERT_EQ(pthread_create(&t, NULL, feed_fifo, &ff), 0);
        ret = snapshot_take(f->root, f->cache, 3, 1795312967480000000ull, r, NULL);
        ASSERT_EQ(pthread_join(t, NULL), 0);
        ASSERT_OK(unlink(ff.path));
        set_modules(f, MOD_AREA);
        return ret;
}

TEST(a_module_change_during_the_copy_means_a_retry) {
        _cleanup_(fake_root_remove) fake_root f = {};
        /* Each attempt reads modules before and after the copy. */
        static const uint64_t settles[] = { MOD_AREA, MOD_AREA + 0x8000, MOD_AREA + 0x8000, MOD_AREA + 0x8000 };
        static const uint64_t never[] = { 1ull << 40, 2ull << 40, 3ull << 40, 4ull << 40, 5ull << 40, 6ull << 40 };
        _cleanup_free_ char *tmp = NULL;
        snapshot_take_result r = {};
        snapshot_info *v = NULL;
        size_t n = 0;

        fake_root_make(&f, true);
        ASSERT_OK(take_while_modules_change(&f, settles, ELEMENTSOF(settles), &r));
        ASSERT_EQ(r.attempts, 2);
        ASSERT_TRUE(!r.reused);
        ASSERT_OK(snapshot_list(f.cache, &v, &n));
        ASSERT_EQ(n, 1);
        snapshot_infos_free(v, n);
        snapshot_info_done(&r.info);

        /* Still changing after the last attempt: no snapshot, nothing left. */
        r = (snapshot_take_result) {};
        ASSERT_ERROR(take_while_modules_change(&f, never, ELEMENTSOF(never), &r), EAGAIN);
        ASSERT_EQ(count_snapshots(f.cache), 1);
        tmp = path_join(f.cache, SNAPSHOT_TMP_DIR);
        ASSERT_EQ(snapshot_clean_tmp(f.cache), 0);      /* the failed copies were removed already */
}

/* A snapshot directory as perf or an earlier run left it: name, files of
 * the given size. */
static void plant_snapshot(const fake_root *f, const char *build_id, uint64_t time_ns, size_t kcore_bytes) {
        char name[SNAPSHOT_NAME_LEN + 1], path[512];
        _cleanup_free_ char *blob = calloc(1, kcore_bytes + 1);

        ASSERT_TRUE(blob);
        ASSERT_OK(snapshot_name_from_time(time_ns, name));
        snprintf(path, sizeof path, "%s", f->cache);
        (void) mkdir(path, 0755);
        snprintf(path, sizeof path, "%s/[kernel.kcore]", f->cache);
        (void) mkdir(path, 0755);
        snprintf(path, sizeof path, "%s/[kernel.kcore]/%s", f->cache, build_id);
        (void) mkdir(path, 0755);
        snprintf(path, sizeof path, "%s/[kernel.kcore]/%s/%s", f->cache, build_id, name);
        ASSERT_OK(mkdir(path, 0755));
        write_text(path, "kallsyms", "ffffffff81000000 T _text\n");
        write_text(path, "modules", "");
        write_file(path, "kcore", blob, kcore_bytes);
}

TEST(prune_removes_oldest_first_but_never_the_newest_or_the_one_in_use) {
        _cleanup_(fake_root_remove) fake_root f = {};
        const uint64_t day = 24 * 3600 * NSEC_PER_SEC, t0 = 1795312967480000000ull;
        const char *bid = "0123456789abcdef0123456789abcdef01234567";
        snapshot_prune_limits lim = { .now_ns = t0 + 10 * day };
        snapshot_info *v = NULL, *removed = NULL;
        _cleanup_free_ char *junk = NULL;
        size_t n = 0, n_removed = 0, n_left = 0;
        uint64_t left = 0;

        fake_root_make(&f, false);
        for (unsigned i = 0; i < 5; i++)        /* days 0..4, 100 KB kcore each */
                plant_snapshot(&f, bid, t0 + i * day, 100000);
        /* Not snapshots: listed never, removed never. */
        junk = path_join(f.cache, "[kernel.kcore]/notahex/2026112202024748");
        ASSERT_OK(mkdir_parent(junk, 0755));
        ASSERT_OK(mkdir(junk, 0755));           /* no kallsyms in it */
        ASSERT_EQ(count_snapshots(f.cache), 5);

        /* Age: older than 7.5 days at day 10 = days 0, 1, 2. */
        lim.max_age_ns = 7 * day + day / 2;
        ASSERT_OK(snapshot_prune(f.cache, &lim, &removed, &n_removed, &n_left, &left));
        ASSERT_EQ(n_removed, 3);
        ASSERT_EQ(n_left, 2);
        ASSERT_TRUE(removed[0].time_ns < removed[1].time_ns);
        ASSERT_U64_EQ(removed[0].time_ns, t0);
        snapshot_infos_free(removed, n_removed);

        /* Age limit so small everything is too old: the newest stays, and
         * keep protects the other. */
        ASSERT_OK(snapshot_list(f.cache, &v, &n));
        ASSERT_EQ(n, 2);
        lim = (snapshot_prune_limits) { .now_ns = t0 + 10 * day, .max_age_ns = 1, .keep = v[0].path };
        ASSERT_OK(snapshot_prune(f.cache, &lim, &removed, &n_removed, &n_left, &left));
        ASSERT_EQ(n_removed, 0);
        ASSERT_EQ(n_left, 2);
        snapshot_infos_free(removed, n_removed);
        snapshot_infos_free(v, n);

        /* Size: two of ~100 KB against a 150 KB limit: the older goes. */
        lim = (snapshot_prune_limits) { .now_ns = t0 + 10 * day, .max_size_bytes = 150000 };
        ASSERT_OK(snapshot_prune(f.cache, &lim, &removed, &n_removed, &n_left, &left));
        ASSERT_EQ(n_removed, 1);
        ASSERT_U64_EQ(removed[0].time_ns, t0 + 3 * day);
        ASSERT_EQ(n_left, 1);
        ASSERT_LE(left, 150000);
        snapshot_infos_free(removed, n_removed);

        /* Below any size limit the newest still stays. */
        lim.max_size_bytes = 1;
        ASSERT_OK(snapshot_prune(f.cache, &lim, NULL, &n_removed, &n_left, &left));
        ASSERT_EQ(n_removed, 0);
        ASSERT_EQ(n_left, 1);
        ASSERT_GT(left, 100000);
        ASSERT_OK(access(junk, F_OK));
}

TEST(clean_tmp_removes_what_an_interrupted_snapshot_left) {
        _cleanup_(fake_root_remove) fake_root f = {};
        char p[256];

        fake_root_make(&f, false);
        ASSERT_EQ(snapshot_clean_tmp(f.cache), 0);      /* no cache yet */
        snprintf(p, sizeof p, "%s", f.cache);
        ASSERT_OK(mkdir(p, 0755));
        snprintf(p, sizeof p, "%s/.tmp", f.cache);
        ASSERT_OK(mkdir(p, 0700));
        snprintf(p, sizeof p, "%s/.tmp/snapshot-abc", f.cache);
        ASSERT_OK(mkdir(p, 0700));
        write_text(p, "kallsyms", "x");
        snprintf(p, sizeof p, "%s/.tmp/prune-x", f.cache);
        ASSERT_OK(mkdir(p, 0700));
        ASSERT_EQ(snapshot_clean_tmp(f.cache), 2);
        ASSERT_EQ(count_snapshots(f.cache), 0);
        snprintf(p, sizeof p, "%s/.tmp/snapshot-abc", f.cache);
        ASSERT_TRUE(access(p, F_OK) < 0);
}

TEST(a_failure_names_what_failed_and_leaves_nothing) {
        _cleanup_(fake_root_remove) fake_root f = {};
        snapshot_take_result r = {};
        const char *failed = NULL;

        fake_root_make(&f, false);
        write_text(f.root, "proc/kcore", "this is not an ELF file");
        ASSERT_ERROR(snapshot_take(f.root, f.cache, 3, 1795312967480000000ull, &r, &failed), EBADMSG);
        ASSERT_STREQ(failed, "proc/kcore");
        ASSERT_EQ(count_snapshots(f.cache), 0);
        ASSERT_EQ(snapshot_clean_tmp(f.cache), 0);

        failed = NULL;
        write_text(f.root, "sys/kernel/notes", "");
        ASSERT_TRUE(snapshot_take(f.root, f.cache, 3, 1795312967480000000ull, &r, &failed) < 0);
        ASSERT_STREQ(failed, "sys/kernel/notes");
}

/* The decision to reuse reads kallsyms only up to _text: it must give
 * what the whole file gives. */
TEST(the_head_of_kallsyms_decides_as_the_whole_file) {
        _cleanup_(fake_root_remove) fake_root f = {};
        snapshot_take_result a = {}, b = {}, r = {};
        const char *failed = NULL;
        char *k = NULL, path[160], target[160];

        fake_root_make(&f, false);
        /* Only _stext (some architectures have no _text): reused by it. */
        ASSERT_TRUE(asprintf(&k, "0000000000000000 A fixed_percpu_data\n%016" PRIx64 " T _stext\n%016" PRIx64
                                 " T _etext\n%016" PRIx64 " t brd_probe\t[brd]\n",
                             TEXT_ADDR, TEXT_ADDR + 0x3000, MOD_AREA + 0x1000) >= 0);
        write_text(f.root, "proc/kallsyms", k);
        free(k);
        ASSERT_OK(snapshot_take(f.root, f.cache, 3, 1795312967480000000ull, &a, NULL));
        ASSERT_TRUE(!a.reused);
        ASSERT_U64_EQ(a.info.text_addr, TEXT_ADDR);
        /* A fixture's kallsyms may be a link (the kernel's is not): it is
         * read through it, as the daemon's own reader does. */
        snprintf(path, sizeof path, "%s/proc/kallsyms", f.root);
        snprintf(target, sizeof target, "%s/kallsyms.real", f.dir);
        ASSERT_OK(rename(path, target));
        ASSERT_OK(symlink(target, path));
        ASSERT_OK(snapshot_take(f.root, f.cache, 3, 1795312968480000000ull, &b, NULL));
        ASSERT_TRUE(b.reused);
        ASSERT_STREQ(b.info.path, a.info.path);
        ASSERT_OK(unlink(path));

        /* Addresses hidden (kptr_restrict), and no _text or _stext at
         * all: no snapshot, as before. */
        write_text(f.root, "proc/kallsyms", "0000000000000000 T _text\n0000000000000000 T _stext\n");
        ASSERT_ERROR(snapshot_take(f.root, f.cache, 3, 1795312969480000000ull, &r, &failed), EPERM);
        ASSERT_STREQ(failed, "proc/kallsyms or proc/modules");
        write_text(f.root, "proc/kallsyms", "ffffffff81001000 T do_one_initcall\n");
        failed = NULL;
        ASSERT_ERROR(snapshot_take(f.root, f.cache, 3, 1795312969480000000ull, &r, &failed), EPERM);
        ASSERT_STREQ(failed, "proc/kallsyms or proc/modules");
        /* Missing: its own error. */
        ASSERT_OK(unlink(path));
        failed = NULL;
        ASSERT_ERROR(snapshot_take(f.root, f.cache, 3, 1795312969480000000ull, &r, &failed), ENOENT);
        ASSERT_STREQ(failed, "proc/kallsyms or proc/modules");
        ASSERT_EQ(count_snapshots(f.cache), 1);
        snapshot_info_done(&a.info);
        snapshot_info_done(&b.info);
}

/* A link inside the cache is never followed: a .tmp that points at
 * another directory leaves its files alone, a build-id directory that
 * does gets no snapshot, a snapshot directory that does is not listed
 * or pruned; and the cache root must be a private directory, not a link. */
TEST(links_in_the_cache_are_not_followed) {
        _cleanup_(fake_root_remove) fake_root f = {};
        _cleanup_free_ char *build_id = NULL;
        char victim[128], p[256], link_cache[128], name[SNAPSHOT_NAME_LEN + 1];
        snapshot_take_result r = {};
        snapshot_prune_limits lim = { .max_size_bytes = 1, .now_ns = 1795312999000000000ull };
        snapshot_info *v = NULL;
        size_t n = 0;

        fake_root_make(&f, false);
        snprintf(victim, sizeof victim, "%s/victim", f.dir);
        ASSERT_OK(mkdir(victim, 0777));
        write_text(victim, "precious", "keep me");

        /* .tmp -> victim: cleaning refuses, nothing of victim goes. */
        ASSERT_OK(mkdir(f.cache, 0700));
        snprintf(p, sizeof p, "%s/.tmp", f.cache);
        ASSERT_OK(symlink(victim, p));
        ASSERT_ERROR(snapshot_clean_tmp(f.cache), ENOTDIR);
        ASSERT_TRUE(access(victim, F_OK) == 0);
        snprintf(p, sizeof p, "%s/precious", victim);
        ASSERT_TRUE(access(p, F_OK) == 0);
        /* and taking a snapshot, which works in .tmp, fails before writing */
        ASSERT_ERROR(snapshot_take(f.root, f.cache, 3, 1795312967480000000ull, &r, NULL), ENOTDIR);
        snprintf(p, sizeof p, "%s/.tmp", f.cache);
        ASSERT_OK(unlink(p));

        /* [kernel.kcore]/<build-id> -> victim: no snapshot is written there.
         * (The build-id from a snapshot in another cache.) */
        snprintf(p, sizeof p, "%s/other", f.dir);
        ASSERT_OK(snapshot_take(f.root, p, 3, 1795312967480000000ull, &r, NULL));
        build_id = strdup(r.info.build_id);
        ASSERT_TRUE(build_id);
        snapshot_info_done(&r.info);
        snprintf(p, sizeof p, "%s/[kernel.kcore]", f.cache);
        ASSERT_OK(mkdir(p, 0755));
        snprintf(p, sizeof p, "%s/[kernel.kcore]/%s", f.cache, build_id);
        ASSERT_OK(symlink(victim, p));
        ASSERT_ERROR(snapshot_take(f.root, f.cache, 3, 1795312968480000000ull, &r, NULL), ENOTDIR);
        ASSERT_EQ(count_entries(victim), 1);

        /* A snapshot directory that is a link: not listed, not pruned. */
        ASSERT_OK(unlink(p));
        ASSERT_OK(mkdir(p, 0755));
        ASSERT_OK(snapshot_name_from_time(1795312969480000000ull, name));
        snprintf(p, sizeof p, "%s/[kernel.kcore]/%s/%s", f.cache, build_id, name);
        write_text(victim, "kallsyms", "ffffffff81000000 T _text\n");
        write_text(victim, "modules", "");
        ASSERT_OK(symlink(victim, p));
        plant_snapshot(&f, build_id, 1795312970480000000ull, 10);
        ASSERT_EQ(count_snapshots(f.cache), 1);
        ASSERT_OK(snapshot_prune(f.cache, &lim, NULL, NULL, NULL, NULL));
        ASSERT_EQ(count_entries(victim), 3);

        /* The root: a link to a private directory, or a directory others may write to. */
        snprintf(link_cache, sizeof link_cache, "%s/cache-link", f.dir);
        ASSERT_OK(symlink(f.cache, link_cache));
        ASSERT_ERROR(snapshot_list(link_cache, &v, &n), ENOTDIR);
        ASSERT_ERROR(snapshot_take(f.root, link_cache, 3, 1795312971480000000ull, &r, NULL), ENOTDIR);
        ASSERT_OK(chmod(f.cache, 0777));
        ASSERT_ERROR(snapshot_list(f.cache, &v, &n), EPERM);
        ASSERT_ERROR(snapshot_take(f.root, f.cache, 3, 1795312971480000000ull, &r, NULL), EPERM);
        ASSERT_OK(chmod(f.cache, 0700));
}

