/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Reading /proc/modules, a module's sysfs section map and its ELF file (modules.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "elf/elfutil.h"
#include "fileio.h"
#include "kernel/modules.h"
#include "kernel/notes.h"
#include "macro.h"

/* A few hundred modules of ~100 bytes per line; the deps lists of a
 * heavily shared module make a line longer, not the file much larger. */
#define PROC_MODULES_MAX_BYTES (16u * 1024u * 1024u)
/* modules.dep of a distribution kernel is ~500 KiB. */
#define MODULES_DEP_MAX_BYTES (64u * 1024u * 1024u)
/* Each sections/ entry is "0x%016lx\n", 19 bytes. */
#define SECTION_FILE_MAX_BYTES 64u
/* A module built with -ffunction-sections has one section per function;
 * the ELF section index is 32-bit but no real module comes near this. */
#define MODULE_SECTIONS_MAX 65536u

static const char *const section_len_sources[] = {
        [SECTION_LEN_ELF] = "elf",
        [SECTION_LEN_NEXT] = "next",
        [SECTION_LEN_UNKNOWN] = "unknown",
};

const char *section_len_source_to_string(section_len_source s) {
        if ((size_t) s >= ELEMENTSOF(section_len_sources))
                return NULL;
        return section_len_sources[s];
}

/* Makes room for one more element in *v (of *alloc, n used), doubling. */
static int array_grow(void **v, size_t *alloc, size_t n, size_t elem_size) {
        size_t na;
        void *a;

        if (n < *alloc)
                return 0;
        na = *alloc ? *alloc * 2 : 32;
        a = reallocarray(*v, na, elem_size);
        if (!a)
                return -ENOMEM;
        *v = a;
        *alloc = na;
        return 0;
}

/* Address order, then name order for equal addresses (qsort is not
 * stable, and a result should not depend on directory order). */
static int addr_name_cmp(uint64_t a, const char *a_name, uint64_t b, const char *b_name) {
        if (a != b)
                return a < b ? -1 : 1;
        return strcmp(a_name, b_name);
}

/* ---- /proc/modules ---- */

typedef struct token {
        const char *s;
        size_t len;
} token;

/* Splits line[0..len) at spaces into at most max tokens. Returns the
 * number of tokens, or max + 1 if there are more. */
static size_t split_tokens(const char *line, size_t len, token *tokens, size_t max) {
        size_t n = 0, i = 0;

        for (;;) {
                size_t start;

                while (i < len && line[i] == ' ')
                        i++;
                if (i >= len)
                        return n;
                if (n >= max)
                        return max + 1;
                start = i;
                while (i < len && line[i] != ' ')
                        i++;
                tokens[n++] = (token) { line + start, i - start };
        }
}

static bool token_is(const token *t, const char *s) {
        return strlen(s) == t->len && memcmp(t->s, s, t->len) == 0;
}

static int parse_u64_base(const char *s, size_t len, unsigned base, uint64_t *ret) {
        uint64_t v = 0;

        if (len == 0)
                return -EINVAL;
        for (size_t i = 0; i < len; i++) {
                unsigned d;

                if (s[i] >= '0' && s[i] <= '9')
                        d = (unsigned) (s[i] - '0');
                else if (s[i] >= 'a' && s[i] <= 'f')
                        d = (unsigned) (s[i] - 'a') + 10;
                else if (s[i] >= 'A' && s[i] <= 'F')
                        d = (unsigned) (s[i] - 'A') + 10;
                else
                        return -EINVAL;
                if (d >= base)
                        return -EINVAL;
                if (__builtin_mul_overflow(v, base, &v) || __builtin_add_overflow(v, d, &v))
                        return -EINVAL;
        }
        *ret = v;
        return 0;
}

/* "0x" followed by 1..16 hex digits, as the kernel's "0x%px" and
 * "0x%016lx" print. */
static int parse_hex_addr(const char *s, size_t len, uint64_t *ret) {
        if (len < 3 || len > 18 || s[0] != '0' || s[1] != 'x')
                return -EINVAL;
        return parse_u64_base(s + 2, len - 2, 16, ret);
}

static bool token_is_refcount(const token *t) {
        size_t i = 0;

        /* "%i" of module_refcount(), or "-" without CONFIG_MODULE_UNLOAD. */
        if (token_is(t, "-"))
                return true;
        if (t->len > 0 && t->s[0] == '-')
                i = 1;
        if (i >= t->len)
                return false;
        for (; i < t->len; i++)
                if (t->s[i] < '0' || t->s[i] > '9')
                        return false;
        return true;
}

static bool token_is_taints(const token *t) {
        /* module_flags(): "(" taint letters, then '+' (loading) or '-'
         * (unloading), ")"; printed only when the module has taints. */
        if (t->len < 2 || t->s[0] != '(' || t->s[t->len - 1] != ')')
                return false;
        for (size_t i = 1; i + 1 < t->len; i++)
                if (!((t->s[i] >= 'A' && t->s[i] <= 'Z') || t->s[i] == '+' || t->s[i] == '-'))
                        return false;
        return true;
}

static int parse_proc_modules_line(const char *line, size_t len, proc_module *ret) {
        token t[7];
        size_t n;
        proc_module m = {};

        if (memchr(line, 0, len))
                return -EINVAL;

        /* kernel/module/procfs.c m_show(): "%s %u" name and core size,
         * print_unload_info() " %i " refcount and the users as "a,b," (or
         * "-"), " %s" state, " 0x%px" core base (NULL for readers without
         * CAP_SYSLOG), then " (taints)" if the module has any. */
        n = split_tokens(line, len, t, ELEMENTSOF(t));
        if (n < 6 || n > 7)
                return -EINVAL;

        if (t[0].len >= sizeof(m.name))
                return -EINVAL;
        memcpy(m.name, t[0].s, t[0].len);
        if (!module_name_is_valid(m.name))
                return -EINVAL;
        if (parse_u64_base(t[1].s, t[1].len, 10, &m.size) < 0)
                return -EINVAL;
        if (!token_is_refcount(&t[2]))
                return -EINVAL;
        /* t[3], the users, is free-form enough to take as it is. */

        if (token_is(&t[4], "Live"))
                m.state = MODULE_STATE_LIVE;
        else if (token_is(&t[4], "Loading"))
                m.state = MODULE_STATE_LOADING;
        else if (token_is(&t[4], "Unloading"))
                m.state = MODULE_STATE_UNLOADING;
        else
                m.state = MODULE_STATE_OTHER;

        if (parse_hex_addr(t[5].s, t[5].len, &m.base) < 0)
                return -EINVAL;
        if (n == 7 && !token_is_taints(&t[6]))
                return -EINVAL;

        *ret = m;
        return 0;
}

int proc_modules_parse(const char *text, size_t len, proc_module **ret, size_t *ret_n, size_t *ret_n_skipped) {
        _cleanup_free_ proc_module *mods = NULL;
        size_t n = 0, alloc = 0, skipped = 0;
        const char *p = text, *end = text + len;

        if (!text && len > 0)
                return -EINVAL;

        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                size_t line_len = nl ? (size_t) (nl - p) : (size_t) (end - p);
                proc_module m;

                if (line_len > 0) {
                        if (parse_proc_modules_line(p, line_len, &m) < 0)
                                skipped++;
                        else {
                                if (array_grow((void **) &mods, &alloc, n, sizeof(*mods)) < 0)
                                        return -ENOMEM;
                                mods[n++] = m;
                        }
                }
                p += line_len + (nl ? 1 : 0);
        }

        *ret = TAKE_PTR(mods);
        *ret_n = n;
        if (ret_n_skipped)
                *ret_n_skipped = skipped;
        return 0;
}

int proc_modules_load(const char *root, proc_module **ret, size_t *ret_n, size_t *ret_n_skipped) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;
        int r;

        r = read_full_file_at(root, "proc/modules", PROC_MODULES_MAX_BYTES, &buf, &size);
        if (r < 0)
                return r;
        return proc_modules_parse(buf, size, ret, ret_n, ret_n_skipped);
}

/* ---- /sys/module/NAME/sections ---- */

void module_sections_free(module_section *s, size_t n) {
        if (!s)
                return;
        for (size_t i = 0; i < n; i++)
                free(s[i].name);
        free(s);
}

static bool name_has_suffix(const char *s, const char *suffix) {
        size_t l = strlen(s), sl = strlen(suffix);

        return l >= sl && strcmp(s + l - sl, suffix) == 0;
}

/* Code sections by their names in the kernel's linker scripts and section
 * macros: ".text" and ".text.*" (.text.unlikely, .text.hot, per-function
 * sections), and the "*.text" family (.init.text, .exit.text, .noinstr.text,
 * .sched.text, .cpuidle.text, .kprobes.text, .ref.text, ...).
 * .altinstr_replacement and .altinstr_aux hold the alternative instructions
 * patched in, .fixup exception fix-up code (x86 before 5.17, and other
 * architectures), .plt and .init.plt arm64's branch veneers. */
static bool section_name_is_exec(const char *name) {
        return strcmp(name, ".text") == 0 ||
                strncmp(name, ".text.", 6) == 0 ||
                name_has_suffix(name, ".text") ||
                strcmp(name, ".altinstr_replacement") == 0 ||
                strcmp(name, ".altinstr_aux") == 0 ||
                strcmp(name, ".fixup") == 0 ||
                strcmp(name, ".plt") == 0 ||
                strcmp(name, ".init.plt") == 0;
}

static int section_addr_cmp(const void *a, const void *b) {
        const module_section *x = a, *y = b;

        return addr_name_cmp(x->addr, x->name, y->addr, y->name);
}

typedef struct sections_buf {
        module_section *v;
        size_t n, alloc;
} sections_buf;

static void sections_buf_done(sections_buf *b) {
        module_sections_free(b->v, b->n);
}

int module_sections_read(const char *root, const char *name, module_section **ret, size_t *ret_n) {
        _cleanup_(sections_buf_done) sections_buf b = {};
        _cleanup_(closedirp) DIR *d = NULL;
        _cleanup_free_ char *rel = NULL, *dir = NULL;
        struct dirent *de;

        if (!module_name_is_valid(name))
                return -EINVAL;
        if (asprintf(&rel, "sys/module/%s/sections", name) < 0)
                return -ENOMEM;
        dir = path_join(root, rel);
        if (!dir)
                return -ENOMEM;

        d = opendir(dir);
        if (!d)
                return negative_errno();

        for (;;) {
                _cleanup_free_ char *content = NULL;
                size_t size = 0, l;
                uint64_t addr;
                int r;

                errno = 0;
                de = readdir(d);
                if (!de) {
                        if (errno != 0)
                                return negative_errno();
                        break;
                }
                /* Section names start with '.' too (".text"): only the two
                 * directory entries are skipped. */
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (de->d_type == DT_DIR)
                        continue;

                r = read_full_file_at(dir, de->d_name, SECTION_FILE_MAX_BYTES, &content, &size);
                if (r == -EFBIG)
                        return -EBADMSG;
                if (r < 0)
                        return r;
                /* kernel/module/sysfs.c module_sect_read(): "0x%px\n". */
                l = size;
                if (l > 0 && content[l - 1] == '\n')
                        l--;
                if (parse_hex_addr(content, l, &addr) < 0)
                        return -EBADMSG;

                if (b.n >= MODULE_SECTIONS_MAX)
                        return -E2BIG;
                if (array_grow((void **) &b.v, &b.alloc, b.n, sizeof(*b.v)) < 0)
                        return -ENOMEM;
                b.v[b.n] = (module_section) {
                        .addr = addr,
                        .len_source = SECTION_LEN_UNKNOWN,
                        .exec = section_name_is_exec(de->d_name),
                };
                b.v[b.n].name = strdup(de->d_name);
                if (!b.v[b.n].name)
                        return -ENOMEM;
                b.n++;
        }

        if (b.n > 0)
                qsort(b.v, b.n, sizeof(*b.v), section_addr_cmp);
        *ret = TAKE_PTR(b.v);
        *ret_n = b.n;
        b.n = 0;
        return 0;
}

void module_sections_bound(module_section *secs, size_t n, uint64_t core_base, uint64_t core_size) {
        uint64_t core_end, next = 0;
        bool have_next = false;

        if (__builtin_add_overflow(core_base, core_size, &core_end))
                core_end = UINT64_MAX;

        /* Backwards, so that next is always the start of the nearest
         * section above: sections at the same address (an empty one and
         * its neighbour) are both bounded by the first one beyond. */
        for (size_t i = n; i-- > 0; ) {
                uint64_t addr = secs[i].addr, end;
                bool in_core = addr >= core_base && addr < core_end;

                if (i + 1 < n && secs[i + 1].addr > addr) {
                        next = secs[i + 1].addr;
                        have_next = true;
                }
                if (secs[i].len_source != SECTION_LEN_UNKNOWN)
                        continue;

                if (have_next && next > addr)
                        end = in_core ? MIN(next, core_end) : next;
                else if (in_core)
                        end = core_end;
                else
                        continue;

                secs[i].len = end - addr;
                secs[i].len_source = SECTION_LEN_NEXT;
        }
}

/* ---- modules.dep ---- */

static bool chars_equal_module(char a, char b) {
        return a == b || ((a == '-' || a == '_') && (b == '-' || b == '_'));
}

/* Whether the path's basename, less ".ko" and a compression suffix, is
 * name, reading '-' as '_' on both sides (kmod's modname_normalize()). */
static bool dep_path_matches(const char *path, size_t len, const char *name) {
        static const char *const compressions[] = { ".xz", ".zst", ".gz" };
        const char *base = path;
        size_t name_len = strlen(name), l;

        for (size_t i = 0; i < len; i++)
                if (path[i] == '/')
                        base = path + i + 1;
        l = len - (size_t) (base - path);

        for (size_t i = 0; i < ELEMENTSOF(compressions); i++) {
                size_t cl = strlen(compressions[i]);

                if (l > cl && memcmp(base + l - cl, compressions[i], cl) == 0) {
                        l -= cl;
                        break;
                }
        }
        if (l < 3 || memcmp(base + l - 3, ".ko", 3) != 0)
                return false;
        l -= 3;

        if (l != name_len)
                return false;
        for (size_t i = 0; i < l; i++)
                if (!chars_equal_module(base[i], name[i]))
                        return false;
        return true;
}

static bool path_component_is_valid(const char *s) {
        return s && *s && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

int module_find_file(const char *root, const char *release, const char *name, char **ret_path) {
        _cleanup_free_ char *rel = NULL, *moddir = NULL, *buf = NULL;
        size_t size = 0;
        int r;

        if (!module_name_is_valid(name) || !path_component_is_valid(release))
                return -EINVAL;
        if (asprintf(&rel, "lib/modules/%s", release) < 0)
                return -ENOMEM;
        moddir = path_join(root, rel);
        if (!moddir)
                return -ENOMEM;
        r = read_full_file_at(moddir, "modules.dep", MODULES_DEP_MAX_BYTES, &buf, &size);
        if (r < 0)
                return r;

        /* kmod's depmod writes "PATH: DEP DEP ..." per module, PATH relative
         * to lib/modules/RELEASE; module-init-tools wrote absolute paths
         * ("/lib/modules/RELEASE/kernel/..."), which are taken relative to
         * root. */
        for (const char *p = buf, *end = buf + size; p < end; ) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                size_t line_len = nl ? (size_t) (nl - p) : (size_t) (end - p);
                const char *colon = memchr(p, ':', line_len);

                if (colon && colon > p && !memchr(p, 0, line_len) &&
                    dep_path_matches(p, (size_t) (colon - p), name)) {
                        _cleanup_free_ char *path = strndup(p, (size_t) (colon - p));
                        char *full;

                        if (!path)
                                return -ENOMEM;
                        full = path_join(path[0] == '/' ? root : moddir, path);
                        if (!full)
                                return -ENOMEM;
                        *ret_path = full;
                        return 0;
                }
                p += line_len + (nl ? 1 : 0);
        }
        return -ENOENT;
}

/* ---- the module's ELF file ---- */

void module_symbols_free(module_symbol *s, size_t n) {
        if (!s)
                return;
        for (size_t i = 0; i < n; i++)
                free(s[i].name);
        free(s);
}


DEFINE_TRIVIAL_CLEANUP_FUNC(Elf *, elf_end)

/* What the ELF file says about one entry of secs, gathered before any of
 * secs is changed. */
typedef struct section_match {
        size_t elf_index;               /* 0: the ELF has no section of that name */
        bool alloc, exec;
        uint64_t size, offset;
} section_match;

/* Per ELF section: the entry of secs it was matched to, for symbols. */
typedef struct elf_section_info {
        size_t sec;                     /* SIZE_MAX: none */
        uint64_t size;
} elf_section_info;

typedef struct name_ref {
        const char *name;
        size_t index;
} name_ref;

static int name_ref_cmp(const void *a, const void *b) {
        const name_ref *x = a, *y = b;
        int c = strcmp(x->name, y->name);

        if (c != 0)
                return c;
        return x->index < y->index ? -1 : x->index > y->index;
}

/* The first entry of refs[0..n) (sorted) whose name is >= name. */
static size_t name_ref_lower_bound(const name_ref *refs, size_t n, const char *name) {
        size_t lo = 0, hi = n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (strcmp(refs[mid].name, name) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

static int symbol_addr_cmp(const void *a, const void *b) {
        const module_symbol *x = a, *y = b;

        return addr_name_cmp(x->addr, x->name, y->addr, y->name);
}

typedef struct symbols_buf {
        module_symbol *v;
        size_t n, alloc;
} symbols_buf;

static void symbols_buf_done(symbols_buf *b) {
        module_symbols_free(b->v, b->n);
}

/* Refuses what libelf would misread or we do not handle: compressed
 * modules (kmod decompresses them; we do not), anything but a 64-bit
 * relocatable ELF file. */
static int check_file_kind(int fd, uint64_t file_size) {
        static const uint8_t xz[] = { 0xfd, '7', 'z', 'X', 'Z', 0 };
        static const uint8_t zstd[] = { 0x28, 0xb5, 0x2f, 0xfd };
        static const uint8_t gzip[] = { 0x1f, 0x8b };
        uint8_t magic[EI_NIDENT] = {};
        ssize_t l;

        l = pread(fd, magic, sizeof(magic), 0);
        if (l < 0)
                return negative_errno();
        if ((size_t) l >= sizeof(xz) && memcmp(magic, xz, sizeof(xz)) == 0)
                return -EPROTONOSUPPORT;
        if ((size_t) l >= sizeof(zstd) && memcmp(magic, zstd, sizeof(zstd)) == 0)
                return -EPROTONOSUPPORT;
        if ((size_t) l >= sizeof(gzip) && memcmp(magic, gzip, sizeof(gzip)) == 0)
                return -EPROTONOSUPPORT;
        if ((size_t) l < sizeof(magic) || file_size < sizeof(Elf64_Ehdr) || memcmp(magic, ELFMAG, SELFMAG) != 0)
                return -EBADMSG;
        if (magic[EI_CLASS] != ELFCLASS64)
                return -EPROTONOSUPPORT;
        return 0;
}

/* The NT_GNU_BUILD_ID of the file's note sections as lowercase hex:
 * 0, -ENOENT, or -EBADMSG for a note section libelf or the note parser
 * cannot read. */
static int elf_find_build_id(Elf *elf, char ret_hex[static BUILD_ID_HEX_MAX]) {
        for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
                GElf_Shdr shdr;
                Elf_Data *data;
                int r;

                if (!gelf_getshdr(scn, &shdr))
                        return -EBADMSG;
                if (shdr.sh_type != SHT_NOTE)
                        continue;
                data = elf_getdata(scn, NULL);
                if (!data)
                        return -EBADMSG;
                r = notes_find_build_id(data->d_buf, data->d_size, ret_hex);
                if (r != -ENOENT)
                        return r;
        }
        return -ENOENT;
}

/* Collects the STT_FUNC symbols defined in matched sections. The symbol
 * table is found by type (SHT_SYMTAB, at most one per file); extended
 * section indexes come from the SHT_SYMTAB_SHNDX section linked to it. */
static int elf_collect_symbols(Elf *elf, const elf_section_info *info, size_t shnum,
                               const module_section *secs, symbols_buf *b) {
        Elf_Scn *symtab = NULL;
        Elf_Data *data, *xndx_data = NULL;
        GElf_Shdr symtab_shdr = {};
        size_t symtab_index, nsyms;

        for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
                GElf_Shdr shdr;

                if (!gelf_getshdr(scn, &shdr))
                        return -EBADMSG;
                if (shdr.sh_type == SHT_SYMTAB && !symtab) {
                        symtab = scn;
                        symtab_shdr = shdr;
                }
        }
        if (!symtab)
                return 0;
        symtab_index = elf_ndxscn(symtab);

        for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
                GElf_Shdr shdr;

                if (!gelf_getshdr(scn, &shdr))
                        return -EBADMSG;
                if (shdr.sh_type == SHT_SYMTAB_SHNDX && shdr.sh_link == symtab_index) {
                        xndx_data = elf_getdata(scn, NULL);
                        if (!xndx_data)
                                return -EBADMSG;
                        break;
                }
        }

        data = elf_getdata(symtab, NULL);
        if (!data)
                return -EBADMSG;
        nsyms = data->d_size / sizeof(Elf64_Sym);

        /* Symbol 0 is the reserved null symbol. */
        for (size_t i = 1; i < nsyms; i++) {
                GElf_Sym sym;
                Elf32_Word xndx = 0;
                size_t shndx, k;
                const char *name;
                uint64_t addr;

                if (!gelf_getsymshndx(data, xndx_data, (int) i, &sym, &xndx))
                        return -EBADMSG;
                if (GELF_ST_TYPE(sym.st_info) != STT_FUNC)
                        continue;
                if (sym.st_shndx == SHN_XINDEX)
                        shndx = xndx;
                else if (sym.st_shndx == SHN_UNDEF || sym.st_shndx >= SHN_LORESERVE)
                        continue;
                else
                        shndx = sym.st_shndx;
                if (shndx >= shnum || info[shndx].sec == SIZE_MAX)
                        continue;
                /* A symbol that does not lie within its section is not one
                 * we can place. */
                if (!elf_range_fits(sym.st_value, sym.st_size, info[shndx].size))
                        continue;
                k = info[shndx].sec;
                if (__builtin_add_overflow(secs[k].addr, sym.st_value, &addr))
                        continue;
                name = elf_strptr(elf, symtab_shdr.sh_link, sym.st_name);
                if (!name || !*name)
                        continue;

                if (array_grow((void **) &b->v, &b->alloc, b->n, sizeof(*b->v)) < 0)
                        return -ENOMEM;
                b->v[b->n] = (module_symbol) {
                        .name = strdup(name),
                        .addr = addr,
                        .size = sym.st_size,
                };
                if (!b->v[b->n].name)
                        return -ENOMEM;
                b->n++;
        }

        if (b->n > 0)
                qsort(b->v, b->n, sizeof(*b->v), symbol_addr_cmp);
        return 0;
}

int module_elf_apply(const char *path, const char *expected_build_id,
                     module_section *secs, size_t n,
                     module_symbol **ret_syms, size_t *ret_nsyms) {
        _cleanup_(symbols_buf_done) symbols_buf syms = {};
        _cleanup_free_ section_match *match = NULL;
        _cleanup_free_ elf_section_info *info = NULL;
        _cleanup_free_ name_ref *refs = NULL;
        _cleanup_(elf_endp) Elf *elf = NULL;
        _cleanup_close_ int fd = -1;
        size_t shnum, shstrndx;
        GElf_Ehdr ehdr;
        struct stat st;
        uint64_t file_size;
        int r;

        if (!path || (n > 0 && !secs) || (ret_syms && !ret_nsyms))
                return -EINVAL;

        if (!elf_library_ready())
                return -ENOTSUP;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode))
                return -EBADMSG;
        file_size = (uint64_t) st.st_size;

        r = check_file_kind(fd, file_size);
        if (r < 0)
                return r;

        /* ELF_C_READ, not _MMAP: libelf reads what it needs with pread(),
         * so a file truncated under us gives errors, not SIGBUS. */
        elf = elf_begin(fd, ELF_C_READ, NULL);
        if (!elf || elf_kind(elf) != ELF_K_ELF)
                return -EBADMSG;
        if (!gelf_getehdr(elf, &ehdr))
                return -EBADMSG;
        if (ehdr.e_type != ET_REL)
                return -EPROTONOSUPPORT;
        if (elf_getshdrnum(elf, &shnum) < 0 || elf_getshdrstrndx(elf, &shstrndx) < 0)
                return -EBADMSG;
        /* libelf reports no sections at all when the section header table
         * does not fit the file; a module without sections is no module. */
        if (shnum == 0 || (ehdr.e_shnum != 0 && shnum != ehdr.e_shnum) ||
            ehdr.e_shentsize != sizeof(Elf64_Shdr) ||
            shnum > file_size / sizeof(Elf64_Shdr) ||
            !elf_range_fits(ehdr.e_shoff, shnum * sizeof(Elf64_Shdr), file_size))
                return -EBADMSG;

        if (expected_build_id && *expected_build_id) {
                char hex[BUILD_ID_HEX_MAX];

                r = elf_find_build_id(elf, hex);
                if (r == -ENOENT)
                        return -ESTALE;
                if (r < 0)
                        return r;
                if (strcasecmp(hex, expected_build_id) != 0)
                        return -ESTALE;
        }

        /* Match by name through a sorted index of secs: a module built with
         * -ffunction-sections has thousands of sections on both sides. */
        match = calloc(MAX(n, (size_t) 1), sizeof(*match));
        refs = calloc(MAX(n, (size_t) 1), sizeof(*refs));
        info = calloc(MAX(shnum, (size_t) 1), sizeof(*info));
        if (!match || !refs || !info)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                if (!secs[i].name)
                        return -EINVAL;
                refs[i] = (name_ref) { secs[i].name, i };
        }
        if (n > 0)
                qsort(refs, n, sizeof(*refs), name_ref_cmp);
        for (size_t i = 0; i < shnum; i++)
                info[i].sec = SIZE_MAX;

        for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
                size_t idx = elf_ndxscn(scn);
                GElf_Shdr shdr;
                const char *name;

                if (idx >= shnum || !gelf_getshdr(scn, &shdr))
                        return -EBADMSG;
                if (shdr.sh_type != SHT_NOBITS && !elf_range_fits(shdr.sh_offset, shdr.sh_size, file_size))
                        return -EBADMSG;
                info[idx].size = shdr.sh_size;
                name = elf_strptr(elf, shstrndx, shdr.sh_name);
                if (!name)
                        return -EBADMSG;

                /* Names can repeat in a relocatable file (COMDAT groups);
                 * the kernel lays out and shows the SHF_ALLOC one, so an
                 * allocated section wins over an earlier non-allocated
                 * one of the same name. */
                for (size_t j = name_ref_lower_bound(refs, n, name); j < n && strcmp(refs[j].name, name) == 0; j++) {
                        section_match *m = match + refs[j].index;
                        bool alloc = shdr.sh_flags & SHF_ALLOC;

                        if (m->elf_index != 0 && (m->alloc || !alloc))
                                continue;
                        *m = (section_match) {
                                .elf_index = idx,
                                .alloc = alloc,
                                /* arm64's .plt gets SHF_EXECINSTR only at load time. */
                                .exec = (shdr.sh_flags & SHF_EXECINSTR) || section_name_is_exec(name),
                                .size = shdr.sh_size,
                                .offset = shdr.sh_offset,
                        };
                }
        }
        for (size_t i = 0; i < n; i++)
                if (match[i].elf_index != 0)
                        info[match[i].elf_index].sec = i;

        if (ret_syms) {
                r = elf_collect_symbols(elf, info, shnum, secs, &syms);
                if (r < 0)
                        return r;
        }

        /* Nothing can fail from here on. */
        for (size_t i = 0; i < n; i++) {
                if (match[i].elf_index == 0)
                        continue;
                secs[i].len = match[i].size;
                secs[i].pgoff = match[i].offset;
                secs[i].exec = match[i].exec;
                secs[i].len_source = SECTION_LEN_ELF;
        }
        if (ret_syms) {
                *ret_syms = TAKE_PTR(syms.v);
                *ret_nsyms = syms.n;
                syms.n = 0;
        }
        return 0;
}
