/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* ELF notes as the kernel exports them (/sys/kernel/notes,
 * /sys/module/NAME/notes/.note.gnu.build-id): a sequence of
 * Elf64_Nhdr { n_namesz, n_descsz, n_type } + name + desc, each padded to
 * 4 bytes. */

#include <stddef.h>
#include <stdint.h>

#define BUILD_ID_MAX_BYTES 20
#define BUILD_ID_HEX_MAX (BUILD_ID_MAX_BYTES * 2 + 1)

/* Finds the NT_GNU_BUILD_ID note (name "GNU") and writes its desc as
 * lowercase hex into ret_hex (BUILD_ID_HEX_MAX bytes). -ENOENT if there is
 * none, -EBADMSG if the notes are truncated or malformed. */
int notes_find_build_id(const uint8_t *data, size_t size, char ret_hex[static BUILD_ID_HEX_MAX]);

/* Reads ROOT/sys/kernel/notes and extracts the kernel's build-id. */
int notes_kernel_build_id(const char *root, char ret_hex[static BUILD_ID_HEX_MAX]);

/* Reads ROOT/sys/module/MODULE/notes/.note.gnu.build-id and extracts the
 * module's build-id. -EINVAL for a name that is not a single path component. */
int notes_module_build_id(const char *root, const char *module, char ret_hex[static BUILD_ID_HEX_MAX]);

/* Lowercase hex of size bytes (size <= BUILD_ID_MAX_BYTES) into ret_hex. */
void build_id_to_hex(const uint8_t *id, size_t size, char ret_hex[static BUILD_ID_HEX_MAX]);
