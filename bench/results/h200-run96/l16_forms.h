
#define KF_LD(name, q) template <typename T> __device__ __forceinline__ T name(const T* p) { \
  T v; unsigned* u = reinterpret_cast<unsigned*>(&v); \
  asm volatile("ld.global" q ".v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(u[0]), "=r"(u[1]), "=r"(u[2]), "=r"(u[3]) : "l"(p)); return v; }
template <typename T> __device__ __forceinline__ void kf_stP(T* p, const T v) { *p = v; }
#if FORM == 0
KF_LD(kf_ldK, "") KF_LD(kf_ldS, "")
#else
KF_LD(kf_ldK, ".L1::evict_last") KF_LD(kf_ldS, ".L1::evict_first")
#endif
#undef KF_LD
