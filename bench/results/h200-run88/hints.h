// Load forms for the trial: E L1 and L2 evict_last (torch.compile's first
// pass), F L1 evict_last alone, G L2 evict_first.
template <typename T> __device__ __forceinline__ T kf_ldE(const T* p) {
  T v; unsigned* u = reinterpret_cast<unsigned*>(&v); unsigned long long pol;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
  asm("ld.global.L1::evict_last.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(u[0]), "=r"(u[1]), "=r"(u[2]), "=r"(u[3]) : "l"(p), "l"(pol));
  return v;
}
template <typename T> __device__ __forceinline__ T kf_ldF(const T* p) {
  T v; unsigned* u = reinterpret_cast<unsigned*>(&v);
  asm("ld.global.L1::evict_last.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(u[0]), "=r"(u[1]), "=r"(u[2]), "=r"(u[3]) : "l"(p));
  return v;
}
template <typename T> __device__ __forceinline__ T kf_ldG(const T* p) {
  T v; unsigned* u = reinterpret_cast<unsigned*>(&v); unsigned long long pol;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  asm("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(u[0]), "=r"(u[1]), "=r"(u[2]), "=r"(u[3]) : "l"(p), "l"(pol));
  return v;
}
// H: L2 evict_last alone (no L1 qualifier).
template <typename T> __device__ __forceinline__ T kf_ldH(const T* p) {
  T v; unsigned* u = reinterpret_cast<unsigned*>(&v); unsigned long long pol;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
  asm("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(u[0]), "=r"(u[1]), "=r"(u[2]), "=r"(u[3]) : "l"(p), "l"(pol));
  return v;
}
// I: L1 and L2 evict_first (torch.compile's second read of the row).
template <typename T> __device__ __forceinline__ T kf_ldI(const T* p) {
  T v; unsigned* u = reinterpret_cast<unsigned*>(&v); unsigned long long pol;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  asm("ld.global.L1::evict_first.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(u[0]), "=r"(u[1]), "=r"(u[2]), "=r"(u[3]) : "l"(p), "l"(pol));
  return v;
}
