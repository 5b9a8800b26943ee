// Two frames for DwarfUnwinder's unit test to unwind through, built three
// ways (see CMakeLists.txt): CFI only in .debug_frame, .eh_frame without
// .eh_frame_hdr, and no CFI at all. CFI_PREFIX names each build's functions.
// Each frame records its own return address so the test can check the
// unwound ones against the truth.
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define NAME(n) CAT(CFI_PREFIX, n)
#define NOIPA __attribute__((noipa))

typedef void (*cfi_callback)(void* arg);

NOIPA int NAME(inner)(cfi_callback cb, void* arg, void** ret) {
  ret[0] = __builtin_return_address(0);
  cb(arg);
  __asm__ volatile("" ::: "memory");  // work after the call: no tail call
  return 1;
}

NOIPA int NAME(outer)(cfi_callback cb, void* arg, void** ret) {
  ret[1] = __builtin_return_address(0);
  int r = NAME(inner)(cb, arg, ret);
  __asm__ volatile("" ::: "memory");
  return r + 1;
}
