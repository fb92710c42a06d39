/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The layout model: module instances with time windows, and resolution of
 * a kernel address as of a sample's time. Addresses below are those of the
 * brd fixture (tests/fixtures/kernel-6.1-brd): brd's core layout at
 * 0xffffffffc080b000 (20480 bytes), .init.text at 0xffffffffc0811000. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"
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
        m->base = base;
        m->size = BRD_SIZE;
        add_section(m, ".text", base, 0xb30);
        add_section(m, ".text.unlikely", base + 0xb30, 0x1a3);
        add_section(m, ".init.text", init, 0xe4);
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
