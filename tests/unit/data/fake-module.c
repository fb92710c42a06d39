/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A stand-in for a kernel module's ELF file, compiled with -c into a
 * relocatable object for test-modules: functions in .text, .init.text and
 * .exit.text, a local function, data objects (which are not STT_FUNC), and
 * a .note.gnu.build-id with a build-id the test knows. A compiler does not
 * emit build-id notes for objects (the linker does, for modules at the
 * modpost link), so the note is written out here. */

int fake_counter;                       /* .bss: 4 bytes */
int fake_data = 42;                     /* .data: 4 bytes */
const char fake_name[16] = "fake";      /* .rodata */

__attribute__((noinline)) int fake_text_a(int x);
__attribute__((noinline)) int fake_text_b(int x);
int fake_init(void);
void fake_exit(void);

__attribute__((noinline)) int fake_text_a(int x) {
        return x * 3 + fake_data;
}

static __attribute__((noinline, used)) int fake_text_local(int x) {
        return x ^ fake_name[(unsigned) x % sizeof(fake_name)];
}

__attribute__((noinline)) int fake_text_b(int x) {
        return fake_text_a(x) + fake_text_local(x);
}

__attribute__((section(".init.text"))) int fake_init(void) {
        fake_counter = fake_text_b(1);
        return 0;
}

__attribute__((section(".exit.text"))) void fake_exit(void) {
        fake_counter = 0;
}

/* Elf64_Nhdr { n_namesz 4, n_descsz 20, n_type 3 (NT_GNU_BUILD_ID) },
 * "GNU\0", then the 20-byte id 00112233445566778899aabbccddeeff01234567:
 * 36 bytes, as in a module's sysfs notes/.note.gnu.build-id. */
__asm__(".pushsection .note.gnu.build-id, \"a\", @note\n"
        ".balign 4\n"
        ".long 4, 20, 3\n"
        ".asciz \"GNU\"\n"
        ".byte 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99\n"
        ".byte 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x01, 0x23, 0x45, 0x67\n"
        ".popsection\n");
