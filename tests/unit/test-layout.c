/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The layout model: module instances with time windows, and resolution of
 * a kernel address as of a sample's time. Addresses below are those of the
 * brd fixture (tests/fixtures/kernel-6.1-brd): brd's core layout at
 * 0xffffffffc080b000 (20480 bytes), .init.text at 0xffffffffc0811000. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <linux/perf_event.h>

#include "kernel/layout.h"
#include "macro.h"
#include "test.h"

#define BRD_BASE   0xffffffffc080b000ULL
#define BRD_SIZE   20480ULL
#define BRD_INIT   0xffffffffc0811000ULL
#define OTHER_BASE 0xffffffffc0900000ULL

#define SEC 1000000000ULL

/* kallsyms of the core kernel plus brd's lines, as at start-up. */
static const char kallsyms_text[] =
        "ffffffff81000000 T _text\n"
        "ffffffff81000000 T startup_64\n"
        "ffffffff81001000 T do_one_initcall\n"
        "ffffffff81002000 T _etext\n"
        "ffffffffc080b000 t brd_insert_page.part.0\t[brd]\n"
        "ffffffffc080b390 t brd_probe\t[brd]\n"
        "ffffffffc080b3b0 t brd_do_bvec\t[brd]\n"
        "ffffffffc080ba00 t brd_submit_bio\t[brd]\n"
        "ffffffffc080bb30 t brd_free_pages\t[brd]\n";

static kallsyms *parse(const char *text) {
        kallsyms *k = NULL;

        ASSERT_OK(kallsyms_parse(text, strlen(text), &k));
        return k;
}

static void add_section(layout_module *m, const char *name, uint64_t addr, uint64_t len) {
        module_section *s = realloc(m->sections, (m->n_sections + 1) * sizeof *s);

        ASSERT_TRUE(s);
        m->sections = s;
        s[m->n_sections++] = (module_section) {
                .name = strdup(name),
                .addr = addr,
                .len = len,
                .len_source = SECTION_LEN_ELF,
                .exec = strstr(name, "text") != NULL,
        };
}

/* A brd instance at base, with .text, .text.unlikely and an init section. */
static layout_module *brd_at(uint64_t base, uint64_t init) {
        layout_module *m = layout_module_new("brd");

        ASSERT_TRUE(m);
        m->loaded_how = LAYOUT_SOURCE_UEVENT;
        m->base = base;
        m->size = BRD_SIZE;
        add_section(m, ".text", base, 0xb30);
        add_section(m, ".text.unlikely", base + 0xb30, 0x1a3);
        add_section(m, ".init.text", init, 0xe4);
        return m;
}

/* A "dummy" loaded by uevent at base: 8 KiB, its .text at the start. */
static layout_module *dummy_at(uint64_t base) {
        layout_module *m = layout_module_new("dummy");

        ASSERT_TRUE(m);
        m->loaded_how = LAYOUT_SOURCE_UEVENT;
        m->base = base;
        m->size = 0x2000;
        add_section(m, ".text", base, 0x800);
        return m;
}

static void expect_symbol(const layout *l, uint64_t addr, uint64_t t, const char *module, const char *symbol,
                          uint64_t symbol_addr) {
        layout_hit h;

        ASSERT_OK(layout_resolve(l, addr, t, &h));
        if (module)
                ASSERT_STREQ(h.module_name, module);
        else
                ASSERT_NULL(h.module_name);
        ASSERT_STREQ(h.symbol, symbol);
        ASSERT_U64_EQ(h.symbol_addr, symbol_addr);
}

TEST(core_kernel_resolves_at_any_time) {
        layout *l = NULL;

        ASSERT_OK(layout_new(&l));
        layout_set_kernel(l, parse(kallsyms_text));
        expect_symbol(l, 0xffffffff81001010, 0, NULL, "do_one_initcall", 0xffffffff81001000);
        expect_symbol(l, 0xffffffff81001010, 1000 * SEC, NULL, "do_one_initcall", 0xffffffff81001000);
        layout_free(l);
}

TEST(startup_module_lines_need_an_instance) {
        layout *l = NULL;
        layout_hit h;

        ASSERT_OK(layout_new(&l));
        layout_set_kernel(l, parse(kallsyms_text));
        /* brd's lines are in the table, but no instance says when it was
         * loaded: they are not trusted. */
        ASSERT_ERROR(layout_resolve(l, BRD_BASE + 0x3c0, 5 * SEC, &h), ENOENT);

        layout_module *m = brd_at(BRD_BASE, BRD_INIT);
        m->syms_in_kernel_table = true;
        ASSERT_OK(layout_add_module(l, m, 1 * SEC, NULL));
        ASSERT_EQ(layout_n_live(l), 1);
        expect_symbol(l, BRD_BASE + 0x3c0, 5 * SEC, "brd", "brd_do_bvec", BRD_BASE + 0x3b0);
        /* Nothing was there before: the window reaches back to 0. */
        expect_symbol(l, BRD_BASE + 0x3c0, 0, "brd", "brd_do_bvec", BRD_BASE + 0x3b0);
        layout_free(l);
}

TEST(unloaded_module_resolves_for_its_window_only) {
        layout *l = NULL;
        layout_module *first = NULL, *second = NULL, *gone = NULL;
        layout_hit h;

        ASSERT_OK(layout_new(&l));
        layout_set_kernel(l, parse(kallsyms_text));
        first = brd_at(BRD_BASE, BRD_INIT);
        first->syms_in_kernel_table = true;
        ASSERT_OK(layout_add_module(l, first, 10 * SEC, &first));
        ASSERT_OK(layout_remove_module(l, "brd", 20 * SEC, LAYOUT_SOURCE_UEVENT, &gone));
        ASSERT_TRUE(gone == first);
        ASSERT_U64_EQ(first->unloaded_ns, 20 * SEC);
        ASSERT_EQ(layout_n_live(l), 0);
        ASSERT_ERROR(layout_remove_module(l, "brd", 21 * SEC, LAYOUT_SOURCE_UEVENT, NULL), ENOENT);

        /* A sample taken before rmmod and drained after it still resolves. */
        expect_symbol(l, BRD_BASE + 0xa10, 19 * SEC, "brd", "brd_submit_bio", BRD_BASE + 0xa00);
        /* After the unload, the address is nobody's. */
        ASSERT_ERROR(layout_resolve(l, BRD_BASE + 0xa10, 20 * SEC, &h), ENOENT);
        ASSERT_ERROR(layout_resolve(l, BRD_BASE + 0xa10, 25 * SEC, &h), ENOENT);

        /* Loaded again elsewhere, with its own symbols: the same function
         * resolves at the new address from then on, at the old one before. */
        second = brd_at(OTHER_BASE, OTHER_BASE + 0x8000);
        ASSERT_OK(layout_add_module(l, second, 30 * SEC, &second));
        layout_module_set_syms(l, second, parse(
                "ffffffffc0900a00 t brd_submit_bio\t[brd]\n"
                "ffffffffc0900b30 t brd_free_pages\t[brd]\n"));
        expect_symbol(l, OTHER_BASE + 0xa10, 31 * SEC, "brd", "brd_submit_bio", OTHER_BASE + 0xa00);
        expect_symbol(l, BRD_BASE + 0xa10, 19 * SEC, "brd", "brd_submit_bio", BRD_BASE + 0xa00);
        ASSERT_OK(layout_resolve(l, OTHER_BASE + 0xa10, 31 * SEC, &h));
        ASSERT_TRUE(h.module == second);
        ASSERT_STREQ(h.section, ".text");
        ASSERT_ERROR(layout_resolve(l, BRD_BASE + 0xa10, 31 * SEC, &h), ENOENT);
        ASSERT_EQ(layout_n_modules(l), 2);
        layout_free(l);
}

TEST(init_samples_before_the_add_uevent_resolve) {
        layout *l = NULL;
        layout_module *m;
        layout_hit h;

        ASSERT_OK(layout_new(&l));
        layout_set_kernel(l, parse(kallsyms_text));
        m = brd_at(BRD_BASE, BRD_INIT);
        m->syms_in_kernel_table = true;
        ASSERT_OK(layout_add_module(l, m, 10 * SEC, NULL));
        ASSERT_OK(layout_remove_module(l, "brd", 20 * SEC, LAYOUT_SOURCE_UEVENT, NULL));

        /* Loaded again at the same place; its init ran at 29.5 s, before the
         * add uevent at 30 s. Its ELF symbols name the init function. */
        m = brd_at(BRD_BASE, BRD_INIT);
        m->elf_syms = calloc(1, sizeof *m->elf_syms);
        ASSERT_TRUE(m->elf_syms);
        m->elf_syms[0] = (module_symbol) { .name = strdup("brd_init"), .addr = BRD_INIT, .size = 0xe4 };
        m->n_elf_syms = 1;
        ASSERT_OK(layout_add_module(l, m, 30 * SEC, &m));
        /* The window starts where the previous occupant's ended. */
        ASSERT_U64_EQ(m->valid_from_ns, 20 * SEC);
        expect_symbol(l, BRD_INIT + 0x10, 29 * SEC + SEC / 2, "brd", "brd_init", BRD_INIT);
        ASSERT_OK(layout_resolve(l, BRD_INIT + 0x10, 29 * SEC + SEC / 2, &h));
        ASSERT_STREQ(h.section, ".init.text");
        /* From the first unload on, the address is the second instance's. */
        ASSERT_OK(layout_resolve(l, BRD_INIT + 0x10, 20 * SEC, &h));
        ASSERT_TRUE(h.module == m);
        /* Before the first unload, the first instance (whose init section
         * was at the same address). */
        ASSERT_OK(layout_resolve(l, BRD_BASE + 0x3c0, 15 * SEC, &h));
        ASSERT_TRUE(h.module != m);

        /* No symbol of any source: the section name stands in for one. */
        expect_symbol(l, BRD_BASE + 0xb40, 31 * SEC, "brd", ".text.unlikely", BRD_BASE + 0xb30);
        layout_free(l);
}

TEST(core_range_wins_over_a_freed_init_section) {
        layout *l = NULL;
        layout_module *brd, *dummy;
        layout_hit h;

        ASSERT_OK(layout_new(&l));
        brd = brd_at(BRD_BASE, BRD_INIT);
        ASSERT_OK(layout_add_module(l, brd, 10 * SEC, &brd));
        /* dummy is placed in the memory of brd's freed init section. */
        dummy = layout_module_new("dummy");
        dummy->base = BRD_INIT;
        dummy->size = 0x3000;
        ASSERT_OK(layout_add_module(l, dummy, 20 * SEC, &dummy));
        /* Its window starts at brd's add: brd's init was over by then. */
        ASSERT_U64_EQ(dummy->valid_from_ns, 10 * SEC);
        ASSERT_OK(layout_resolve(l, BRD_INIT + 0x10, 21 * SEC, &h));
        ASSERT_TRUE(h.module == dummy);
        ASSERT_OK(layout_resolve(l, BRD_INIT + 0x10, 5 * SEC, &h));
        ASSERT_TRUE(h.module == brd);
        ASSERT_STREQ(h.section, ".init.text");
        layout_free(l);
}

TEST(duplicate_live_instance_is_refused) {
        layout *l = NULL;

        ASSERT_OK(layout_new(&l));
        ASSERT_OK(layout_add_module(l, brd_at(BRD_BASE, BRD_INIT), 1 * SEC, NULL));
        ASSERT_ERROR(layout_add_module(l, brd_at(OTHER_BASE, BRD_INIT), 2 * SEC, NULL), EEXIST);
        ASSERT_EQ(layout_n_modules(l), 1);
        ASSERT_TRUE(layout_find_live(l, "brd"));
        ASSERT_NULL(layout_find_live(l, "dummy"));
        layout_free(l);
}

TEST(epochs_and_generations) {
        layout *l = NULL;
        uint64_t g0;

        ASSERT_OK(layout_new(&l));
        g0 = layout_generation(l);
        ASSERT_EQ(layout_epoch(l, 0), 0);
        ASSERT_EQ(layout_epoch(l, UINT64_MAX), 0);

        ASSERT_OK(layout_add_module(l, brd_at(BRD_BASE, BRD_INIT), 10 * SEC, NULL));
        ASSERT_TRUE(layout_generation(l) != g0);
        ASSERT_OK(layout_remove_module(l, "brd", 20 * SEC, LAYOUT_SOURCE_RESCAN, NULL));
        ASSERT_OK(layout_add_module(l, brd_at(BRD_BASE, BRD_INIT), 30 * SEC, NULL));
        /* Bounds: 20 s (unload of the first), 20 s (valid_from of the second). */
        ASSERT_EQ(layout_epoch(l, 19 * SEC), 0);
        ASSERT_EQ(layout_epoch(l, 20 * SEC), 2);
        ASSERT_EQ(layout_epoch(l, 40 * SEC), 2);
        ASSERT_OK(layout_remove_module(l, "brd", 50 * SEC, LAYOUT_SOURCE_UEVENT, NULL));
        ASSERT_EQ(layout_epoch(l, 49 * SEC), 2);
        ASSERT_EQ(layout_epoch(l, 50 * SEC), 3);

        /* Instances unloaded before a time are forgotten; the others stay. */
        ASSERT_EQ(layout_forget_before(l, 30 * SEC), 1);
        ASSERT_EQ(layout_n_modules(l), 1);
        ASSERT_EQ(layout_forget_before(l, 30 * SEC), 0);
        ASSERT_EQ(layout_forget_before(l, 51 * SEC), 1);
        ASSERT_EQ(layout_n_modules(l), 0);
        ASSERT_EQ(layout_epoch(l, 60 * SEC), 0);
        layout_free(l);
}

TEST(kallsyms_lines_of_one_module) {
        kallsyms *k = NULL;
        ksym s;

        ASSERT_OK(kallsyms_parse_module(kallsyms_text, strlen(kallsyms_text), "brd", &k));
        ASSERT_EQ(kallsyms_count(k), 5);
        ASSERT_OK(kallsyms_lookup(k, BRD_BASE + 0x3c0, &s));
        ASSERT_STREQ(s.name, "brd_do_bvec");
        ASSERT_STREQ(s.module, "brd");
        kallsyms_free(k);

        /* A module whose name is a prefix of another's is not confused with it. */
        ASSERT_OK(kallsyms_parse_module(kallsyms_text, strlen(kallsyms_text), "br", &k));
        ASSERT_EQ(kallsyms_count(k), 0);
        kallsyms_free(k);
}

TEST(only_code_sections_and_init_while_it_runs) {
        layout *l = NULL;
        layout_module *m;
        layout_hit h;

        ASSERT_OK(layout_new(&l));
        m = brd_at(BRD_BASE, BRD_INIT);
        add_section(m, ".strtab", BRD_INIT + 0x2000, 0x664);   /* the kernel's copy of the symtab: data */
        ASSERT_OK(layout_add_module(l, m, 10 * SEC, &m));
        ASSERT_U64_EQ(m->init_end_ns, 10 * SEC);
        /* Data outside the core layout is never taken for this module's code. */
        ASSERT_ERROR(layout_resolve(l, BRD_INIT + 0x2010, 5 * SEC, &h), ENOENT);
        ASSERT_ERROR(layout_resolve(l, BRD_INIT + 0x2010, 15 * SEC, &h), ENOENT);
        /* Its init code is its own before its add, not after: the kernel
         * freed it and may put another module there. */
        ASSERT_OK(layout_resolve(l, BRD_INIT + 0x10, 9 * SEC, &h));
        ASSERT_TRUE(h.module == m);
        ASSERT_ERROR(layout_resolve(l, BRD_INIT + 0x10, 11 * SEC, &h), ENOENT);
        layout_free(l);
}

/* Two modules found at start-up, each where the other's init section was
 * (sysfs keeps listing a module's init sections after the kernel freed
 * them: in the VM, sg's core sits on scsi_mod's .init.text). Both ran
 * their init before perfsnapd started: both windows reach back to 0, so
 * the samples taken between enabling the events and reading proc/modules
 * resolve. A module loaded later on such freed init memory is the
 * address's owner from then on too. */
TEST(startup_modules_on_freed_init_memory) {
        layout *l = NULL;
        layout_module *a, *b, *c;
        layout_hit h;

        ASSERT_OK(layout_new(&l));
        a = brd_at(BRD_BASE, OTHER_BASE);       /* a's init was where b now is */
        a->loaded_how = LAYOUT_SOURCE_STARTUP;
        a->init_before_sampling = true;
        ASSERT_OK(layout_add_module(l, a, 10 * SEC, &a));
        b = layout_module_new("sg");
        ASSERT_TRUE(b);
        b->loaded_how = LAYOUT_SOURCE_STARTUP;
        b->init_before_sampling = true;
        b->base = OTHER_BASE;
        b->size = 0x3000;
        add_section(b, ".init.text", BRD_INIT, 0x100);  /* b's init was where c will be */
        add_section(b, ".text", OTHER_BASE, 0x2000);    /* (sections in address order) */
        ASSERT_OK(layout_add_module(l, b, 10 * SEC, &b));
        ASSERT_U64_EQ(a->init_end_ns, 0);
        ASSERT_U64_EQ(b->init_end_ns, 0);
        ASSERT_U64_EQ(a->valid_from_ns, 0);
        ASSERT_U64_EQ(b->valid_from_ns, 0);
        /* A sample before the start-up scan, in b's code where a's init
         * once was: b's. */
        ASSERT_OK(layout_resolve(l, OTHER_BASE + 0x10, 9 * SEC, &h));
        ASSERT_TRUE(h.module == b);
        ASSERT_STREQ(h.section, ".text");
        ASSERT_OK(layout_resolve(l, BRD_BASE + 0x10, 9 * SEC, &h));
        ASSERT_TRUE(h.module == a);

        /* c is loaded at 20 s on b's freed init memory; its own init ran
         * just before its add uevent: its window reaches back past it. */
        c = dummy_at(BRD_INIT);
        ASSERT_OK(layout_add_module(l, c, 20 * SEC, &c));
        ASSERT_U64_EQ(c->valid_from_ns, 0);
        ASSERT_U64_EQ(c->init_end_ns, 20 * SEC);
        ASSERT_OK(layout_resolve(l, BRD_INIT + 0x10, 19 * SEC, &h));
        ASSERT_TRUE(h.module == c);
        layout_free(l);
}

/* A module found at start-up that was not Live before the sampling began
 * (loaded in between) ran its init while perfsnapd sampled: its init
 * section is its own until the scan, and a module later placed there
 * starts its window at the scan. */
TEST(startup_module_loaded_after_sampling_began) {
        layout *l = NULL;
        layout_module *a, *c;
        layout_hit h;

        ASSERT_OK(layout_new(&l));
        a = brd_at(BRD_BASE, BRD_INIT);
        a->loaded_how = LAYOUT_SOURCE_STARTUP;
        ASSERT_OK(layout_add_module(l, a, 10 * SEC, &a));
        ASSERT_U64_EQ(a->init_end_ns, 10 * SEC);
        ASSERT_OK(layout_resolve(l, BRD_INIT + 0x10, 9 * SEC, &h));
        ASSERT_TRUE(h.module == a);
        ASSERT_STREQ(h.section, ".init.text");

        c = dummy_at(BRD_INIT);
        ASSERT_OK(layout_add_module(l, c, 20 * SEC, &c));
        ASSERT_U64_EQ(c->valid_from_ns, 10 * SEC);
        ASSERT_OK(layout_resolve(l, BRD_INIT + 0x10, 9 * SEC, &h));
        ASSERT_TRUE(h.module == a);
        layout_free(l);
}

/* A module found in its init (Loading) whose init returned after it was
 * added: its init code was there until then, not until its add. */
TEST(freed_init_of_a_module_found_in_its_init) {
        layout *l = NULL;
        layout_module *o, *c;
        layout_hit h;

        ASSERT_OK(layout_new(&l));
        o = brd_at(BRD_BASE, BRD_INIT);
        o->init_running = true;
        ASSERT_OK(layout_add_module(l, o, 10 * SEC, &o));
        layout_module_init_done(l, o, 13 * SEC);
        c = dummy_at(BRD_INIT);
        ASSERT_OK(layout_add_module(l, c, 20 * SEC, &c));
        ASSERT_U64_EQ(c->valid_from_ns, 13 * SEC);
        ASSERT_OK(layout_resolve(l, BRD_INIT + 0x10, 12 * SEC, &h));
        ASSERT_TRUE(h.module == o);
        ASSERT_STREQ(h.section, ".init.text");
        ASSERT_OK(layout_resolve(l, BRD_INIT + 0x10, 14 * SEC, &h));
        ASSERT_TRUE(h.module == c);
        layout_free(l);
}

/* An address in a module's core layout but in one of its data sections
 * (the callchain entry at the start of brd's .orc_unwind, say) is no
 * instruction: it is named by module, section and offset, never by the
 * data symbol before it, and flagged. */
TEST(data_section_named_by_section) {
        static const char text[] =
                "ffffffff81000000 T _text\n"
                "ffffffffc080b3b0 t brd_do_bvec\t[brd]\n"
                "ffffffffc080c2a8 r __param_rd_nr\t[brd]\n";
        layout *l = NULL;
        layout_module *m;
        layout_hit h;

        ASSERT_OK(layout_new(&l));
        layout_set_kernel(l, parse(text));
        m = brd_at(BRD_BASE, BRD_INIT);
        m->syms_in_kernel_table = true;
        add_section(m, ".rodata", BRD_BASE + 0x1180, 0xd8);
        add_section(m, "__param", BRD_BASE + 0x1258, 0x78);
        add_section(m, ".orc_unwind", BRD_BASE + 0x12f0, 0x294);
        ASSERT_OK(layout_add_module(l, m, 10 * SEC, &m));

        ASSERT_OK(layout_resolve(l, BRD_BASE + 0x12f0, 11 * SEC, &h));
        ASSERT_TRUE(h.module == m);
        ASSERT_TRUE(h.data);
        ASSERT_STREQ(h.module_name, "brd");
        ASSERT_STREQ(h.section, ".orc_unwind");
        ASSERT_STREQ(h.symbol, ".orc_unwind");
        ASSERT_U64_EQ(h.symbol_addr, BRD_BASE + 0x12f0);
        ASSERT_OK(layout_resolve(l, BRD_BASE + 0x12b0, 11 * SEC, &h));
        ASSERT_TRUE(h.data);
        ASSERT_STREQ(h.symbol, "__param");
        /* Code is still named by its function. */
        ASSERT_OK(layout_resolve(l, BRD_BASE + 0x3c0, 11 * SEC, &h));
        ASSERT_TRUE(!h.data);
        ASSERT_STREQ(h.symbol, "brd_do_bvec");
        layout_free(l);
}

TEST(module_found_in_its_init) {
        layout *l = NULL;
        layout_module *m;
        layout_hit h;
        uint64_t gen;

        ASSERT_OK(layout_new(&l));
        /* A rescan found it in the Loading state, at 10 s. */
        m = brd_at(BRD_BASE, BRD_INIT);
        m->init_running = true;
        ASSERT_OK(layout_add_module(l, m, 10 * SEC, &m));
        ASSERT_U64_EQ(m->init_end_ns, LAYOUT_TIME_MAX);
        ASSERT_OK(layout_resolve(l, BRD_INIT + 0x10, 12 * SEC, &h));
        ASSERT_TRUE(h.module == m);
        ASSERT_STREQ(h.section, ".init.text");

        /* Its add uevent at 13 s: init sections end there. */
        gen = layout_generation(l);
        layout_module_init_done(l, m, 13 * SEC);
        ASSERT_TRUE(layout_generation(l) != gen);
        ASSERT_U64_EQ(m->init_end_ns, 13 * SEC);
        ASSERT_OK(layout_resolve(l, BRD_INIT + 0x10, 12 * SEC, &h));
        ASSERT_ERROR(layout_resolve(l, BRD_INIT + 0x10, 14 * SEC, &h), ENOENT);
        /* A second notice changes nothing. */
        gen = layout_generation(l);
        layout_module_init_done(l, m, 20 * SEC);
        ASSERT_U64_EQ(m->init_end_ns, 13 * SEC);
        ASSERT_EQ(layout_generation(l), gen);
        layout_free(l);
}

TEST(elf_aliases_give_way_to_the_function_name) {
        layout *l = NULL;
        layout_module *m = brd_at(BRD_BASE, BRD_INIT);

        ASSERT_OK(layout_new(&l));
        /* module_init(brd_init) makes init_module an alias of brd_init. */
        m->elf_syms = calloc(2, sizeof *m->elf_syms);
        ASSERT_TRUE(m->elf_syms);
        m->elf_syms[0] = (module_symbol) { .name = strdup("brd_init"), .addr = BRD_INIT, .size = 0xe4 };
        m->elf_syms[1] = (module_symbol) { .name = strdup("init_module"), .addr = BRD_INIT, .size = 0xe4 };
        m->n_elf_syms = 2;
        m->init_running = true;
        ASSERT_OK(layout_add_module(l, m, 10 * SEC, NULL));
        expect_symbol(l, BRD_INIT + 0x20, 11 * SEC, "brd", "brd_init", BRD_INIT);
        layout_free(l);
}

/* ---- dynamic symbols ---- */

#define PROG_A 0xffffffffc0201000ULL
#define PROG_B 0xffffffffc0201800ULL

static const char kallsyms_with_bpf[] =
        "ffffffff81000000 T _text\n"
        "ffffffff81001000 T do_one_initcall\n"
        "ffffffff81002000 T _etext\n"
        "ffffffffc0201000 t bpf_prog_6deef7357e7b4530_sd_fw_egress\t[bpf]\n"
        "ffffffffc0203000 t ftrace_trampoline\t[__builtin__ftrace]\n";

TEST(ksym_types_from_perf_and_kallsyms) {
        layout_ksym_type t = _LAYOUT_KSYM_TYPE_MAX;

        ASSERT_EQ(layout_ksym_type_from_perf(PERF_RECORD_KSYMBOL_TYPE_BPF), LAYOUT_KSYM_BPF);
        ASSERT_EQ(layout_ksym_type_from_perf(PERF_RECORD_KSYMBOL_TYPE_OOL), LAYOUT_KSYM_OOL);
        ASSERT_EQ(layout_ksym_type_from_perf(77), LAYOUT_KSYM_UNKNOWN);
        ASSERT_OK(layout_ksym_type_from_kallsyms("bpf", &t));
        ASSERT_EQ(t, LAYOUT_KSYM_BPF);
        ASSERT_OK(layout_ksym_type_from_kallsyms("__builtin__kprobes", &t));
        ASSERT_EQ(t, LAYOUT_KSYM_OOL);
        ASSERT_ERROR(layout_ksym_type_from_kallsyms("brd", &t), EINVAL);
        ASSERT_ERROR(layout_ksym_type_from_kallsyms(NULL, &t), EINVAL);
        ASSERT_STREQ(layout_ksym_type_to_string(LAYOUT_KSYM_OOL), "ool");
        ASSERT_STREQ(layout_source_to_string(LAYOUT_SOURCE_PERF), "perf");
}

TEST(startup_dynamic_lines_need_a_ksym) {
        _cleanup_(layout_freep) layout *l = NULL;
        layout_hit hit;

        ASSERT_OK(layout_new(&l));
        layout_set_kernel(l, parse(kallsyms_with_bpf));
        /* Without a tracked symbol, the start-up line may be stale. */
        ASSERT_ERROR(layout_resolve(l, PROG_A + 0x10, 5 * SEC, &hit), ENOENT);
        ASSERT_ERROR(layout_resolve(l, 0xffffffffc0203010, 5 * SEC, &hit), ENOENT);
        ASSERT_OK(layout_resolve(l, 0xffffffff81001010, 5 * SEC, &hit));
        ASSERT_STREQ(hit.symbol, "do_one_initcall");

        ASSERT_OK(layout_add_ksym(l, PROG_A, 0x100, LAYOUT_KSYM_BPF, "bpf_prog_6deef7357e7b4530_sd_fw_egress", 0,
                                  LAYOUT_SOURCE_STARTUP, NULL));
        ASSERT_OK(layout_resolve(l, PROG_A + 0x10, 5 * SEC, &hit));
        ASSERT_STREQ(hit.symbol, "bpf_prog_6deef7357e7b4530_sd_fw_egress");
        ASSERT_STREQ(hit.module_name, "bpf");
        ASSERT_EQ(hit.symbol_addr, PROG_A);
        ASSERT_TRUE(hit.ksym != NULL);
        ASSERT_TRUE(hit.module == NULL);
        /* Past its length: nothing. */
        ASSERT_ERROR(layout_resolve(l, PROG_A + 0x100, 5 * SEC, &hit), ENOENT);
}

TEST(ksym_resolves_within_its_window_also_after_unregister) {
        _cleanup_(layout_freep) layout *l = NULL;
        layout_ksym *a = NULL, *b = NULL;
        layout_hit hit;

        ASSERT_OK(layout_new(&l));
        layout_set_kernel(l, parse(kallsyms_with_bpf));
        ASSERT_OK(layout_add_ksym(l, PROG_A, 0x200, LAYOUT_KSYM_BPF, "bpf_prog_aaaaaaaaaaaaaaaa_first", 10 * SEC,
                                  LAYOUT_SOURCE_PERF, &a));
        ASSERT_TRUE(layout_find_live_ksym(l, PROG_A, 1, "bpf_prog_aaaaaaaaaaaaaaaa_first") == a);
        ASSERT_TRUE(layout_find_live_ksym(l, PROG_A, 1, "other") == a);      /* overlaps */
        ASSERT_TRUE(layout_find_live_ksym(l, PROG_A + 0x200, 0x10, NULL) == NULL);
        ASSERT_OK(layout_remove_ksym(l, a, 20 * SEC, LAYOUT_SOURCE_PERF));
        ASSERT_ERROR(layout_remove_ksym(l, a, 21 * SEC, LAYOUT_SOURCE_PERF), ENOENT);
        ASSERT_TRUE(layout_find_live_ksym(l, PROG_A, 1, NULL) == NULL);
        /* The same addresses again, for another program. */
        ASSERT_OK(layout_add_ksym(l, PROG_A, 0x80, LAYOUT_KSYM_BPF, "bpf_prog_bbbbbbbbbbbbbbbb_second", 30 * SEC,
                                  LAYOUT_SOURCE_PERF, &b));
        ASSERT_EQ(layout_n_ksyms(l), 2);
        ASSERT_EQ(layout_n_live_ksyms(l), 1);

        ASSERT_ERROR(layout_resolve(l, PROG_A + 0x10, 5 * SEC, &hit), ENOENT);
        ASSERT_OK(layout_resolve(l, PROG_A + 0x10, 15 * SEC, &hit));
        ASSERT_STREQ(hit.symbol, "bpf_prog_aaaaaaaaaaaaaaaa_first");
        ASSERT_ERROR(layout_resolve(l, PROG_A + 0x10, 25 * SEC, &hit), ENOENT);
        ASSERT_OK(layout_resolve(l, PROG_A + 0x10, 35 * SEC, &hit));
        ASSERT_STREQ(hit.symbol, "bpf_prog_bbbbbbbbbbbbbbbb_second");
        /* first was longer: its tail is its own in its window only. */
        ASSERT_OK(layout_resolve(l, PROG_A + 0x100, 15 * SEC, &hit));
        ASSERT_STREQ(hit.symbol, "bpf_prog_aaaaaaaaaaaaaaaa_first");
        ASSERT_ERROR(layout_resolve(l, PROG_A + 0x100, 35 * SEC, &hit), ENOENT);

        /* A rescan finding a symbol here would date it from first's end. */
        ASSERT_EQ(layout_ksym_free_since(l, PROG_A + 0x100, 0x10), 20 * SEC);
        ASSERT_EQ(layout_ksym_free_since(l, PROG_B + 0x100, 0x10), 0);

        /* Epochs count the window bounds. */
        ASSERT_EQ(layout_epoch(l, 5 * SEC), 0);
        ASSERT_EQ(layout_epoch(l, 15 * SEC), 1);
        ASSERT_EQ(layout_epoch(l, 35 * SEC), 3);

        /* Forgetting: first went before 25 s; second stays. */
        uint64_t gen = layout_generation(l);
        ASSERT_EQ(layout_forget_ksyms_before(l, 25 * SEC), 1);
        ASSERT_TRUE(layout_generation(l) != gen);
        ASSERT_EQ(layout_n_ksyms(l), 1);
        ASSERT_TRUE(layout_get_ksym(l, 0) == b);
        ASSERT_ERROR(layout_resolve(l, PROG_A + 0x10, 15 * SEC, &hit), ENOENT);
        ASSERT_EQ(layout_forget_ksyms_before(l, 100 * SEC), 0);
}

/* The registered symbols are indexed apart: a storm of programs loaded
 * and unloaded at the same addresses leaves the unregistered ones in the
 * layout (for their windows) but not in the way of the live ones, which
 * come in address order, and of equal addresses in the order added. */
TEST(live_ksyms_apart_from_the_unregistered) {
        _cleanup_(layout_freep) layout *l = NULL;
        layout_ksym *k[6] = {};
        char name[32];

        ASSERT_OK(layout_new(&l));
        for (unsigned i = 0; i < 1000; i++) {
                layout_ksym *x = NULL;

                snprintf(name, sizeof name, "bpf_prog_%u", i);
                ASSERT_OK(layout_add_ksym(l, PROG_A, 0x200, LAYOUT_KSYM_BPF, name, (2 * i + 1) * SEC,
                                          LAYOUT_SOURCE_PERF, &x));
                ASSERT_TRUE(layout_find_live_ksym(l, PROG_A, 1, name) == x);
                ASSERT_EQ(layout_n_live_ksyms(l), 1);
                ASSERT_OK(layout_remove_ksym(l, x, (2 * i + 2) * SEC, LAYOUT_SOURCE_PERF));
                ASSERT_TRUE(layout_find_live_ksym(l, PROG_A, 0x200, NULL) == NULL);
        }
        ASSERT_EQ(layout_n_ksyms(l), 1000);
        ASSERT_EQ(layout_n_live_ksyms(l), 0);
        ASSERT_TRUE(layout_get_live_ksym(l, 0) == NULL);

        /* Three at PROG_B (added out of order around two others). */
        ASSERT_OK(layout_add_ksym(l, PROG_B, 0x10, LAYOUT_KSYM_BPF, "b0", 0, LAYOUT_SOURCE_PERF, &k[0]));
        ASSERT_OK(layout_add_ksym(l, PROG_A, 0x10, LAYOUT_KSYM_BPF, "a", 0, LAYOUT_SOURCE_PERF, &k[1]));
        ASSERT_OK(layout_add_ksym(l, PROG_B, 0x10, LAYOUT_KSYM_BPF, "b1", 0, LAYOUT_SOURCE_PERF, &k[2]));
        ASSERT_OK(layout_add_ksym(l, PROG_B + 0x100, 0x10, LAYOUT_KSYM_BPF, "c", 0, LAYOUT_SOURCE_PERF, &k[3]));
        ASSERT_OK(layout_add_ksym(l, PROG_B, 0x10, LAYOUT_KSYM_BPF, "b2", 0, LAYOUT_SOURCE_PERF, &k[4]));
        ASSERT_EQ(layout_n_live_ksyms(l), 5);
        ASSERT_TRUE(layout_get_live_ksym(l, 0) == k[1]);
        ASSERT_TRUE(layout_get_live_ksym(l, 1) == k[0]);
        ASSERT_TRUE(layout_get_live_ksym(l, 2) == k[2]);
        ASSERT_TRUE(layout_get_live_ksym(l, 3) == k[4]);
        ASSERT_TRUE(layout_get_live_ksym(l, 4) == k[3]);
        ASSERT_TRUE(layout_find_live_ksym(l, PROG_B, 1, "b1") == k[2]);
        /* The middle one of three at an address goes; the others stay. */
        ASSERT_OK(layout_remove_ksym(l, k[2], 3000 * SEC, LAYOUT_SOURCE_PERF));
        ASSERT_EQ(layout_n_live_ksyms(l), 4);
        ASSERT_TRUE(layout_get_live_ksym(l, 1) == k[0]);
        ASSERT_TRUE(layout_get_live_ksym(l, 2) == k[4]);
        ASSERT_TRUE(layout_find_live_ksym(l, PROG_B, 1, "b1") == k[4]);         /* overlaps */
        ASSERT_TRUE(layout_find_live_ksym(l, PROG_B, 1, "b0") == k[0]);
        /* Forgetting the unregistered leaves the live index as it was. */
        ASSERT_EQ(layout_forget_ksyms_before(l, 5000 * SEC), 1001);
        ASSERT_EQ(layout_n_ksyms(l), 4);
        ASSERT_EQ(layout_n_live_ksyms(l), 4);
        ASSERT_TRUE(layout_get_live_ksym(l, 3) == k[3]);
}

TEST(ksyms_in_address_order_and_bad_ones_refused) {
        _cleanup_(layout_freep) layout *l = NULL;
        layout_hit hit;

        ASSERT_OK(layout_new(&l));
        ASSERT_ERROR(layout_add_ksym(l, PROG_A, 0, LAYOUT_KSYM_BPF, "x", 0, LAYOUT_SOURCE_PERF, NULL), EINVAL);
        ASSERT_ERROR(layout_add_ksym(l, PROG_A, 1, LAYOUT_KSYM_BPF, "", 0, LAYOUT_SOURCE_PERF, NULL), EINVAL);
        ASSERT_ERROR(layout_add_ksym(l, UINT64_MAX - 4, 16, LAYOUT_KSYM_BPF, "wraps", 0, LAYOUT_SOURCE_PERF, NULL), EINVAL);
        /* Added out of order; a long one far below must still be found by
         * the backward scan. */
        ASSERT_OK(layout_add_ksym(l, PROG_B, 0x40, LAYOUT_KSYM_BPF, "b", 0, LAYOUT_SOURCE_PERF, NULL));
        ASSERT_OK(layout_add_ksym(l, PROG_A - 0x100000, 0x100800, LAYOUT_KSYM_OOL, "long", 0, LAYOUT_SOURCE_PERF, NULL));
        ASSERT_OK(layout_add_ksym(l, PROG_A + 0x10, 0x20, LAYOUT_KSYM_BPF, "a", 0, LAYOUT_SOURCE_PERF, NULL));
        for (size_t i = 1; i < layout_n_ksyms(l); i++)
                ASSERT_TRUE(layout_get_ksym(l, i - 1)->addr <= layout_get_ksym(l, i)->addr);
        ASSERT_OK(layout_resolve(l, PROG_A + 0x400, 1, &hit));
        ASSERT_STREQ(hit.symbol, "long");
        ASSERT_STREQ(hit.module_name, "ool");
        ASSERT_OK(layout_resolve(l, PROG_B + 0x3f, 1, &hit));
        ASSERT_STREQ(hit.symbol, "b");
        ASSERT_OK(layout_resolve(l, PROG_A + 0x10, 1, &hit));
        ASSERT_STREQ(hit.symbol, "a");
}

/* A length guessed from kallsyms (to the next line) may reach over a
 * module loaded later: the module wins there. A record's length does not. */
TEST(guessed_ksym_length_gives_way_to_a_module) {
        _cleanup_(layout_freep) layout *l = NULL;
        layout_ksym *k = NULL;
        layout_hit hit;

        ASSERT_OK(layout_new(&l));
        ASSERT_OK(layout_add_ksym(l, BRD_BASE - 0x1000, 0x200000, LAYOUT_KSYM_BPF, "bpf_prog_aaaaaaaaaaaaaaaa_guess", 0,
                                  LAYOUT_SOURCE_STARTUP, &k));
        ASSERT_OK(layout_add_module(l, brd_at(BRD_BASE, BRD_INIT), 10 * SEC, NULL));
        ASSERT_OK(layout_resolve(l, BRD_BASE + 0x3c0, 20 * SEC, &hit));
        ASSERT_STREQ(hit.module_name, "brd");
        ASSERT_OK(layout_resolve(l, BRD_BASE - 0x800, 20 * SEC, &hit));
        ASSERT_STREQ(hit.symbol, "bpf_prog_aaaaaaaaaaaaaaaa_guess");
        /* Once the length is a record's, the symbol comes first. */
        layout_ksym_set_len(l, k, 0x200000, true);
        ASSERT_OK(layout_resolve(l, BRD_BASE + 0x3c0, 20 * SEC, &hit));
        ASSERT_STREQ(hit.symbol, "bpf_prog_aaaaaaaaaaaaaaaa_guess");
}
