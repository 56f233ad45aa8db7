/* For the Wine tests only (scripts/test-targets.sh), never shipped: Wine 8
   (Debian bookworm) has no bcryptprimitives.dll, whose ProcessPrng Rust's
   standard library imports on Windows 10 and later, where the DLL is part
   of the system. This stand-in answers ProcessPrng from RtlGenRandom
   (advapi32's SystemFunction036). */
#include <windows.h>
#define SystemFunction036 NTAPI SystemFunction036
#include <ntsecapi.h>
#undef SystemFunction036

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
  while (len > 0) {
    ULONG n = len > 0x10000000 ? 0x10000000 : (ULONG)len;
    if (!RtlGenRandom(data, n)) return FALSE;
    data += n;
    len -= n;
  }
  return TRUE;
}
