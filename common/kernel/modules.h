/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* Loadable kernel modules as the kernel describes them: /proc/modules,
 * /sys/module/NAME/sections/, and the module's own ELF file found through
 * /lib/modules/RELEASE/modules.dep. All paths are relative to a root
 * directory ("/" for the running system; tests use synthetic roots). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernel/uevent.h"     /* MODULE_NAME_MAX */

typedef enum module_state {
        MODULE_STATE_LIVE,
        MODULE_STATE_LOADING,           /* init still running */
        MODULE_STATE_UNLOADING,
        MODULE_STATE_OTHER,
} module_state;

typedef struct proc_module {
        char name[MODULE_NAME_MAX];
        uint64_t size;                  /* bytes of the core layout */
        uint64_t base;                  /* core layout address; 0 when hidden (kptr_restrict) */
        module_state state;
} proc_module;

/* Parses /proc/modules text: "NAME SIZE REFCNT DEPS STATE ADDR[ TAINTS]"
 * per line (kernel/module/procfs.c m_show()). Malformed lines are skipped
 * and counted in *ret_n_skipped (may be NULL). Returns 0 with a malloc'ed
 * array in *ret (NULL when there are none) and its length in *ret_n, or a
 * negative errno (-ENOMEM). */
int proc_modules_parse(const char *text, size_t len, proc_module **ret, size_t *ret_n, size_t *ret_n_skipped);

/* Reads and parses ROOT/proc/modules. */
int proc_modules_load(const char *root, proc_module **ret, size_t *ret_n, size_t *ret_n_skipped);

/* Where a section's length came from. */
typedef enum section_len_source {
        SECTION_LEN_ELF,        /* sh_size of the same section in the module's ELF file */
        SECTION_LEN_NEXT,       /* bounded by the next section's start (or the end of the module) */
        SECTION_LEN_UNKNOWN,    /* last section of its area, nothing to bound it: len 0 */
} section_len_source;

const char *section_len_source_to_string(section_len_source s);  /* "elf", "next", "unknown" */

typedef struct module_section {
        char *name;                     /* ".text", ".init.text", "__bug_table", ... */
        uint64_t addr;                  /* runtime start, from sysfs */
        uint64_t len;                   /* bytes, see len_source */
        uint64_t pgoff;                 /* offset of the section in the module file; 0 if unknown */
        section_len_source len_source;
        bool exec;                      /* executable: SHF_EXECINSTR from the ELF, else by name
                                         * (".text*", ".init.text", ".exit.text", ".noinstr.text",
                                         * ".sched.text", ".cpuidle.text", ".kprobes.text", ...) */
} module_section;

void module_sections_free(module_section *s, size_t n);

/* Reads every entry of ROOT/sys/module/NAME/sections/ (each file holds
 * "0x%016lx\n"). Returns the sections sorted by address, lengths not yet
 * known (len 0, SECTION_LEN_UNKNOWN, exec by name). -ENOENT if the module
 * has no sections directory (built in, or gone), -EINVAL for an invalid
 * name, -EBADMSG if an entry is not an address (the kernel never writes
 * one, so the whole read fails rather than giving a partial map). */
int module_sections_read(const char *root, const char *name, module_section **ret, size_t *ret_n);

/* Finds the module's file through ROOT/lib/modules/RELEASE/modules.dep:
 * the line whose path's basename, without ".ko" and any ".xz"/".zst"/".gz"
 * suffix and with '-' read as '_', equals name (with '-' read as '_').
 * Returns 0 and a malloc'ed absolute path (ROOT joined with
 * lib/modules/RELEASE/PATH) in *ret_path, or -ENOENT. */
int module_find_file(const char *root, const char *release, const char *name, char **ret_path);

typedef struct module_symbol {
        char *name;
        uint64_t addr;                  /* runtime: section address + st_value */
        uint64_t size;                  /* st_size, may be 0 */
} module_symbol;

void module_symbols_free(module_symbol *s, size_t n);

/* Reads the module ELF file at path with libelf (relocatable ET_REL,
 * 64-bit; a compressed file gives -EPROTONOSUPPORT). If expected_build_id
 * is non-empty and the file's NT_GNU_BUILD_ID differs (or the file has
 * none), returns -ESTALE and changes nothing: it is another build.
 * Otherwise fills, for each section in secs that the ELF has by name:
 * len = sh_size, pgoff = sh_offset, exec = SHF_EXECINSTR,
 * len_source = SECTION_LEN_ELF. If ret_syms is not NULL, also returns the
 * STT_FUNC symbols defined in sections present in secs, with runtime
 * addresses, sorted by address (malloc'ed, *ret_nsyms entries).
 * Every offset and size read from the file is checked against the file. */
int module_elf_apply(const char *path, const char *expected_build_id,
                     module_section *secs, size_t n,
                     module_symbol **ret_syms, size_t *ret_nsyms);

/* Gives every section whose length is still SECTION_LEN_UNKNOWN the
 * distance to the next section's start (secs sorted by address), limited
 * to core_base + core_size for sections inside the core layout
 * [core_base, core_base + core_size); SECTION_LEN_NEXT then. A section
 * with no next section and outside the core layout keeps len 0. */
void module_sections_bound(module_section *secs, size_t n, uint64_t core_base, uint64_t core_size);
