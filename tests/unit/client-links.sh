#!/bin/sh
# perfsnapctl only talks to the daemon: it must not link the storage
# (sqlite3, zstd), ELF (libelf, libdw) or daemon-side (libevent,
# libsystemd) libraries. Usage: client-links.sh PERFSNAPCTL
set -u
exe=${1:?usage: client-links.sh PERFSNAPCTL}
command -v readelf > /dev/null || { echo "readelf (binutils) is missing" >&2; exit 77; }
needed=$(readelf -d "$exe" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p') || exit 1
[ -n "$needed" ] || { echo "readelf found no NEEDED entries in $exe" >&2; exit 1; }
echo "$exe needs:" $needed
bad=$(echo "$needed" | grep -E '^lib(sqlite3|elf|zstd|dw|event|systemd)[.-]')
if [ -n "$bad" ]; then
        echo "FAIL: perfsnapctl links" $bad >&2
        exit 1
fi
echo "ok: no storage, ELF or daemon library"
