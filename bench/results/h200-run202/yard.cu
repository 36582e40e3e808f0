// The attention yardsticks before and after kf_R query rows a block (new:
// 8 rows, K's rows in 16-byte loads; r8: 8 rows, 2-byte loads; v16: new
// with 16 rows):
// outputs compared byte for byte on fresh random inputs, and each timed once
// (the bench's S = 16384 shape, where tuning spent most of its 27-29 s in
// them), plus a masked GQA chain with causal mask, lengths and lse.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <ctime>
#include <vector>
#include <cuda_runtime.h>
#define KF_NS(x) namespace x {
KF_NS(o_rb)
#include "old_ref_big.cu"
}
KF_NS(n_rb)
#include "new_ref_big.cu"
}
KF_NS(o_eb)
#include "old_eager_big.cu"
}
KF_NS(n_eb)
#include "new_eager_big.cu"
}
KF_NS(v_rb)
#include "r8_ref_big.cu"
}
KF_NS(v_eb)
#include "r8_eager_big.cu"
}
KF_NS(w_rb)
#include "v16_ref_big.cu"
}
KF_NS(w_eb)
#include "v16_eager_big.cu"
}
KF_NS(o_rm)
#include "old_ref_masked.cu"
}
KF_NS(n_rm)
#include "new_ref_masked.cu"
}
KF_NS(o_em)
#include "old_eager_masked.cu"
}
KF_NS(n_em)
#include "new_eager_masked.cu"
}
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e_), __LINE__); exit(1); } } while (0)
static uint64_t st;
static unsigned short rbf() {
  st ^= st << 13; st ^= st >> 7; st ^= st << 17;
  float f = (float)((st >> 11) * 0x1.0p-53) * 4.f - 2.f;
  unsigned u; memcpy(&u, &f, 4); return (unsigned short)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
static void* upload_bf16(size_t n) {
  std::vector<unsigned short> h(n); for (auto& v : h) v = rbf();
  void* d; CK(cudaMalloc(&d, n * 2)); CK(cudaMemcpy(d, h.data(), n * 2, cudaMemcpyHostToDevice)); return d;
}
template <typename F>
static float timed(F f) {
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  CK(cudaEventRecord(a)); f(); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b)); CK(cudaGetLastError());
  float ms; CK(cudaEventElapsedTime(&ms, a, b)); return ms;
}
static void compare(const char* what, void* a, void* b, size_t bytes) {
  std::vector<unsigned char> x(bytes), y(bytes);
  CK(cudaMemcpy(x.data(), a, bytes, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(y.data(), b, bytes, cudaMemcpyDeviceToHost));
  size_t diff = 0; for (size_t i = 0; i < bytes; ++i) diff += x[i] != y[i];
  size_t nonzero = 0; for (size_t i = 0; i < bytes; ++i) nonzero += x[i] != 0;
  printf("%-40s %zu bytes, %zu differ (%zu nonzero bytes in the old output)\n", what, bytes, diff, nonzero);
}
int main() {
  st = 0x9E3779B97F4A7C15ull ^ (uint64_t)time(nullptr);
  printf("seed %llu\n", (unsigned long long)st);
  {  // masked GQA: B 2, H 8, Hkv 2, Sq 300, Sk 260, D 64, causal, mask, lengths, lse.
    const size_t nq = 2ull * 8 * 300 * 64, nk = 2ull * 2 * 260 * 64, nm = 2ull * 8 * 300 * 260, no = nq, nl = 2 * 8 * 300;
    void *q = upload_bf16(nq), *k = upload_bf16(nk), *v = upload_bf16(nk);
    std::vector<unsigned char> hm(nm); for (auto& m : hm) { st ^= st << 13; st ^= st >> 7; st ^= st << 17; m = (st >> 20) % 8 != 0; }
    unsigned char* mask; CK(cudaMalloc(&mask, nm)); CK(cudaMemcpy(mask, hm.data(), nm, cudaMemcpyHostToDevice));
    int hl[2] = {137, 260}; int* lens; CK(cudaMalloc(&lens, 8)); CK(cudaMemcpy(lens, hl, 8, cudaMemcpyHostToDevice));
    void *o1, *o2, *l1, *l2;
    CK(cudaMalloc(&o1, no * 8)); CK(cudaMalloc(&o2, no * 8)); CK(cudaMalloc(&l1, nl * 8)); CK(cudaMalloc(&l2, nl * 8));
    const int batches = 16;
    CK(cudaMemset(o1, 0xff, no * 8)); CK(cudaMemset(o2, 0, no * 8)); CK(cudaMemset(l1, 0xff, nl * 8)); CK(cudaMemset(l2, 0, nl * 8));
    float t0 = timed([&] { o_rm::old_ref_masked<<<300 * batches, 128>>>((const o_rm::__kf_bf16*)q, (const o_rm::__kf_bf16*)k, (const o_rm::__kf_bf16*)v, mask, lens, (double*)o1, (double*)l1); });
    float t1 = timed([&] { n_rm::new_ref_masked<<<38 * batches, 128>>>((const n_rm::__kf_bf16*)q, (const n_rm::__kf_bf16*)k, (const n_rm::__kf_bf16*)v, mask, lens, (double*)o2, (double*)l2); });
    printf("masked reference64: old %.3f ms, new %.3f ms\n", t0, t1);
    compare("masked reference64 out", o1, o2, no * 8); compare("masked reference64 lse", l1, l2, nl * 8);
    CK(cudaMemset(o1, 0xff, no * 2)); CK(cudaMemset(o2, 0, no * 2)); CK(cudaMemset(l1, 0xff, nl * 4)); CK(cudaMemset(l2, 0, nl * 4));
    t0 = timed([&] { o_em::old_eager_masked<<<300 * batches, 128>>>((const o_em::__kf_bf16*)q, (const o_em::__kf_bf16*)k, (const o_em::__kf_bf16*)v, mask, lens, (o_em::__kf_bf16*)o1, (float*)l1); });
    t1 = timed([&] { n_em::new_eager_masked<<<38 * batches, 128>>>((const n_em::__kf_bf16*)q, (const n_em::__kf_bf16*)k, (const n_em::__kf_bf16*)v, mask, lens, (n_em::__kf_bf16*)o2, (float*)l2); });
    printf("masked eager: old %.3f ms, new %.3f ms\n", t0, t1);
    compare("masked eager out", o1, o2, no * 2); compare("masked eager lse", l1, l2, nl * 4);
  }
  {  // B 1, H 32, S 16384, D 128.
    const size_t n = 32ull * 16384 * 128;
    void *q = upload_bf16(n), *k = upload_bf16(n), *v = upload_bf16(n);
    void *o1, *o2; CK(cudaMalloc(&o1, n * 8)); CK(cudaMalloc(&o2, n * 8));
    CK(cudaMemset(o1, 0xff, n * 8)); CK(cudaMemset(o2, 0, n * 8));
    float t1 = timed([&] { n_rb::new_ref_big<<<2048 * 32, 128>>>((const n_rb::__kf_bf16*)q, (const n_rb::__kf_bf16*)k, (const n_rb::__kf_bf16*)v, (double*)o2); });
    printf("S16384 reference64: new %.1f ms\n", t1); fflush(stdout);
    {
      void* o3; CK(cudaMalloc(&o3, n * 8));
      CK(cudaMemset(o3, 0, n * 8));
      float t = timed([&] { v_rb::r8_ref_big<<<2048 * 32, 128>>>((const v_rb::__kf_bf16*)q, (const v_rb::__kf_bf16*)k, (const v_rb::__kf_bf16*)v, (double*)o3); });
      printf("S16384 reference64: 8 rows, 2-byte K loads %.1f ms\n", t);
      compare("  against new", o2, o3, n * 8);
      CK(cudaMemset(o3, 0, n * 8));
      t = timed([&] { w_rb::v16_ref_big<<<1024 * 32, 128>>>((const w_rb::__kf_bf16*)q, (const w_rb::__kf_bf16*)k, (const w_rb::__kf_bf16*)v, (double*)o3); });
      printf("S16384 reference64: 16 rows (16-byte K loads) %.1f ms\n", t);
      compare("  against new", o2, o3, n * 8);
      CK(cudaMemset(o3, 0, n * 2));
      t = timed([&] { v_eb::r8_eager_big<<<2048 * 32, 128>>>((const v_eb::__kf_bf16*)q, (const v_eb::__kf_bf16*)k, (const v_eb::__kf_bf16*)v, (v_eb::__kf_bf16*)o3); });
      printf("S16384 eager: 8 rows, 2-byte K loads %.1f ms\n", t);
      n_eb::new_eager_big<<<2048 * 32, 128>>>((const n_eb::__kf_bf16*)q, (const n_eb::__kf_bf16*)k, (const n_eb::__kf_bf16*)v, (n_eb::__kf_bf16*)o1);
      compare("  against new", o1, o3, n * 2);
      CK(cudaMemset(o3, 0, n * 2));
      t = timed([&] { w_eb::v16_eager_big<<<1024 * 32, 128>>>((const w_eb::__kf_bf16*)q, (const w_eb::__kf_bf16*)k, (const w_eb::__kf_bf16*)v, (w_eb::__kf_bf16*)o3); });
      printf("S16384 eager: 16 rows (16-byte K loads) %.1f ms\n", t);
      compare("  against new", o1, o3, n * 2);
      CK(cudaFree(o3));
    }
    float t0 = timed([&] { o_rb::old_ref_big<<<16384 * 32, 128>>>((const o_rb::__kf_bf16*)q, (const o_rb::__kf_bf16*)k, (const o_rb::__kf_bf16*)v, (double*)o1); });
    printf("S16384 reference64: old %.1f ms\n", t0);
    compare("S16384 reference64 out", o1, o2, n * 8);
    CK(cudaMemset(o1, 0xff, n * 2)); CK(cudaMemset(o2, 0, n * 2));
    t1 = timed([&] { n_eb::new_eager_big<<<2048 * 32, 128>>>((const n_eb::__kf_bf16*)q, (const n_eb::__kf_bf16*)k, (const n_eb::__kf_bf16*)v, (n_eb::__kf_bf16*)o2); });
    printf("S16384 eager: new %.1f ms\n", t1); fflush(stdout);
    t0 = timed([&] { o_eb::old_eager_big<<<16384 * 32, 128>>>((const o_eb::__kf_bf16*)q, (const o_eb::__kf_bf16*)k, (const o_eb::__kf_bf16*)v, (o_eb::__kf_bf16*)o1); });
    printf("S16384 eager: old %.1f ms\n", t0);
    compare("S16384 eager out", o1, o2, n * 2);
  }
  return 0;
}
