// Code that must compute bit-identical results on the host and inside the
// worker's GPU helper kernels (random inputs, output comparison): written
// once, compiled here as inline C++ and handed to NVRTC as text, so a host
// test of these functions is a test of what the GPU runs.
//
//   using namespace kfuse::shared_code;
//   uint64_t key = kf_rand_key(seed, /*stream=*/input_index);
//   uint64_t bits = kf_rand_bits(kDtBF16, key, i, kDomainAny, 0, -1);  // element i
//   std::string src = SharedSource();  // the same functions, for NVRTC
//
// Rules for the shared text (it is stringized by the preprocessor): no
// preprocessor directives, no library calls (NaN tests, fabs, bit casts go
// through the kf_* helpers each side defines), C-style casts, and no a*b+c
// whose rounding matters (NVRTC contracts it to an FMA; use kf_dmul).
#ifndef KFUSE_TUNER_WORKER_SHARED_CODE_H_
#define KFUSE_TUNER_WORKER_SHARED_CODE_H_

#include <cstdint>
#include <cstring>
#include <string>

namespace kfuse::shared_code {

// Host definitions of what the device prelude (worker_kernels.cc) defines
// with intrinsics.
inline float kf_f32_from_bits(unsigned int u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline unsigned int kf_bits_from_f32(float f) {
  unsigned int u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline double kf_f64_from_bits(unsigned long long u) {
  double d;
  std::memcpy(&d, &u, 8);
  return d;
}
inline unsigned long long kf_bits_from_f64(double d) {
  unsigned long long u;
  std::memcpy(&u, &d, 8);
  return u;
}
// A product rounded on its own: never fused with a following add.
inline double kf_dmul(double a, double b) {
  volatile double p = a * b;
  return p;
}

#define KF_HD inline
// Defines the code here and `const char* name()` returning its text.
#define KFUSE_SHARED_CODE_(name, ...) \
  __VA_ARGS__                         \
  inline const char* name() { return #__VA_ARGS__; }

KFUSE_SHARED_CODE_(SharedSourceText,

// DType numbering (core/dtype.h), checked by static_asserts in the tests.
enum { kDtF32 = 1, kDtF16 = 2, kDtBF16 = 3, kDtI32 = 4, kDtBool = 5, kDtI64 = 6, kDtF64 = 7 };
// InputDomain numbering (tuner/runner.h).
enum { kDomainAny = 0, kDomainPositive = 1, kDomainUnit = 2 };

KF_HD int kf_isnan(double d) {
  return (kf_bits_from_f64(d) & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
}
KF_HD int kf_isfinite(double d) {
  return (kf_bits_from_f64(d) & 0x7ff0000000000000ull) != 0x7ff0000000000000ull;
}
KF_HD double kf_fabs(double d) {
  return kf_f64_from_bits(kf_bits_from_f64(d) & 0x7fffffffffffffffull);
}
KF_HD double kf_pow2(int k) {  /* k in [-1022, 1023] */
  return kf_f64_from_bits((unsigned long long)(k + 1023) << 52);
}

/* SplitMix64's finalizer: a counter-based generator, element i of an input
   depends only on (seed, input index, i), so any thread can make it. */
KF_HD unsigned long long kf_mix64(unsigned long long z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
KF_HD unsigned long long kf_rand_key(unsigned long long seed, unsigned long long stream) {
  return kf_mix64(seed * 0x2545F4914F6CDD1Dull + stream * 0x9E3779B97F4A7C15ull + 1ull);
}
KF_HD unsigned long long kf_hash(unsigned long long key, long long i, int k) {
  return kf_mix64(key + ((unsigned long long)i * 4ull + (unsigned long long)k + 1ull) *
                            0x9E3779B97F4A7C15ull);
}
/* [0, 1) with 53 random bits; the scaling is exact. */
KF_HD double kf_uniform(unsigned long long h) { return (double)(h >> 11) * kf_pow2(-53); }

/* kAny: Irwin-Hall (sum of four uniforms) centred, sd 1; kPositive: uniform
   [0.1, 4); kUnit: uniform [-1, 1). Integers: -8..8, 1..8, -1..1; an index
   (extent > 0) uniform in [0, extent), and one in 16 `other`; a positive
   index (a divisor too) uniform in [1, extent), never `other`. */
KF_HD double kf_sample(unsigned long long key, long long i, int domain, int integer, long long extent,
                       long long other) {
  unsigned long long h = kf_hash(key, i, 0);
  if (integer && extent > 0) {
    if (domain == kDomainPositive) {
      return extent > 1 ? (double)(1ll + (long long)(h % (unsigned long long)(extent - 1))) : 1.0;
    }
    if (kf_hash(key, i, 1) % 16ull == 0ull) return (double)other;
    return (double)(long long)(h % (unsigned long long)extent);
  }
  if (integer) {
    if (domain == kDomainPositive) return (double)(1 + (long long)(h % 8ull));
    if (domain == kDomainUnit) return (double)((long long)(h % 3ull) - 1);
    return (double)((long long)(h % 17ull) - 8);
  }
  if (domain == kDomainPositive) return 0.1 + kf_dmul(3.9, kf_uniform(h));
  if (domain == kDomainUnit) return -1.0 + kf_dmul(2.0, kf_uniform(h));
  double s = kf_uniform(h) + kf_uniform(kf_hash(key, i, 1));
  s = s + kf_uniform(kf_hash(key, i, 2));
  s = s + kf_uniform(kf_hash(key, i, 3));
  return kf_dmul(s - 2.0, 1.7320508075688772);
}

/* Round to nearest even, subnormals and overflow included. */
KF_HD unsigned int kf_f32_to_f16(float x) {
  unsigned int f = kf_bits_from_f32(x);
  unsigned int sign = (f >> 16) & 0x8000u;
  f &= 0x7fffffffu;
  if (f >= 0x7f800000u) return sign | (f > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (f >= 0x477ff000u) return sign | 0x7c00u;
  if (f < 0x38800000u) {
    if (f <= 0x33000000u) return sign; /* <= 2^-25: rounds to (even) zero. */
    unsigned int e = f >> 23, m = (f & 0x7fffffu) | 0x800000u, shift = 126u - e;
    unsigned int r = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) r += 1u;
    return sign | r;
  }
  unsigned int r = f + 0xfffu + ((f >> 13) & 1u);
  return sign | ((r >> 13) - (112u << 10));
}
KF_HD unsigned int kf_f32_to_bf16(float x) {
  unsigned int f = kf_bits_from_f32(x);
  if ((f & 0x7fffffffu) > 0x7f800000u) return (f >> 16) | 0x40u;
  return (f + 0x7fffu + ((f >> 16) & 1u)) >> 16;
}
KF_HD double kf_f16_to_f64(unsigned int h) {
  unsigned int e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  double v;
  if (e == 0u) {
    v = (double)m * kf_pow2(-24);
  } else if (e == 31u) {
    v = kf_f64_from_bits(m ? 0x7ff8000000000000ull : 0x7ff0000000000000ull);
  } else {
    v = (double)(1024u + m) * kf_pow2((int)e - 25);
  }
  return (h & 0x8000u) ? -v : v;
}

/* The stored bits (low bytes) of element i of a random input. Element 0 is
   never zero, so no input is all zeros. */
KF_HD unsigned long long kf_rand_bits(int dt, unsigned long long key, long long i, int domain,
                                      long long extent, long long other) {
  if (dt == kDtBool) return i == 0 ? 1ull : (kf_hash(key, i, 0) & 1ull);
  double v = kf_sample(key, i, domain, dt == kDtI32 || dt == kDtI64, extent, other);
  /* An index of one class keeps its range: element 0 is then `other`. */
  if (i == 0 && kf_fabs(v) < 0.001) v = extent == 1 ? (double)other : 1.0;
  switch (dt) {
    case kDtF32: return kf_bits_from_f32((float)v);
    case kDtF16: return kf_f32_to_f16((float)v);
    case kDtBF16: return kf_f32_to_bf16((float)v);
    case kDtI32: return (unsigned long long)(unsigned int)(int)v;
    case kDtI64: return (unsigned long long)(long long)v;
    case kDtF64: return kf_bits_from_f64(v);
  }
  return 0ull;
}

/* An output element as double; `raw` holds its bytes in the low bits. */
KF_HD double kf_decode(int dt, unsigned long long raw) {
  switch (dt) {
    case kDtF32: return (double)kf_f32_from_bits((unsigned int)raw);
    case kDtF16: return kf_f16_to_f64((unsigned int)(raw & 0xffffull));
    case kDtBF16: return (double)kf_f32_from_bits((unsigned int)(raw & 0xffffull) << 16);
    case kDtI32: return (double)(int)(unsigned int)raw;
    case kDtBool: return (double)(raw & 0xffull);
    case kDtI64: return (double)(long long)raw;
    case kDtF64: return kf_f64_from_bits(raw);
  }
  return 0.0;
}

/* True when finite `r` is past float dtype `dt`'s range: at or above its
   largest finite value plus half an ulp, which rounds to infinity. */
KF_HD int kf_beyond(int dt, double r) {
  double limit;
  switch (dt) {
    case kDtF32: limit = kf_pow2(128) - kf_pow2(103); break;
    case kDtBF16: limit = kf_pow2(128) - kf_pow2(119); break;
    case kDtF16: limit = 65520.0; break;
    default: return 0;
  }
  return kf_isfinite(r) && kf_fabs(r) >= limit;
}

/* The output element `c` as judged against reference `r`: the dtype's
   infinity of r's sign where r is past the dtype's range is exact there
   (the product a kernel keeps in f32 may overflow where eager's rounded
   one did not); a finite value there is judged by its error as anywhere. */
KF_HD double kf_judged(int dt, double r, double c) {
  return (kf_beyond(dt, r) && !kf_isfinite(c) && !kf_isnan(c) && (c > 0) == (r > 0)) ? r : c;
}

/* The poison rule (tuner/check.h CountUnwritten): a float element whose
   bytes are all 0xFF where the reference is not NaN is unwritten; a bool
   byte above 1 is unwritten; integers cannot be told from a real -1. */
KF_HD int kf_unwritten(int dt, unsigned long long raw, double ref) {
  switch (dt) {
    case kDtBool: return (raw & 0xffull) > 1ull;
    case kDtF32: return !kf_isnan(ref) && (raw & 0xffffffffull) == 0xffffffffull;
    case kDtF16:
    case kDtBF16: return !kf_isnan(ref) && (raw & 0xffffull) == 0xffffull;
    case kDtF64: return !kf_isnan(ref) && raw == 0xffffffffffffffffull;
  }
  return 0;
}

/* One block's (or thread's) share of a comparison against the reference;
   the fields of ErrorStats plus the unwritten count (tuner/check.h). Indices
   are -1 when none. 80 bytes on host and device. */
struct KfPart {
  double max_err;
  double max_ref;
  long long worst;
  long long special;
  long long first_special;
  long long unwritten;
  long long first_unwritten;
  long long mismatched; /* Finite in both, and not equal. */
  long long far;        /* kf_far: off by more than eps of the reference. */
  long long first_far;
};
KF_HD void kf_part_init(KfPart* p) {
  p->max_err = 0.0;
  p->max_ref = 0.0;
  p->worst = -1;
  p->special = 0;
  p->first_special = -1;
  p->unwritten = 0;
  p->first_unwritten = -1;
  p->mismatched = 0;
  p->far = 0;
  p->first_far = -1;
}
KF_HD long long kf_first(long long a, long long b) {
  return a < 0 ? b : (b < 0 ? a : (a < b ? a : b));
}
/* A 16-bit float element is far from its (finite) reference when off by more
   than eps of the type (2^-7 bf16, 2^-10 f16) times the reference's
   magnitude, or times `floor` where that is larger: twice what rounding an
   exact result can cost. kf_far_floor gives the floor: 2^-10 of the output's
   largest reference value (at least the type's smallest normal), so values
   far below the output's scale (an underflow, a flush to zero) are judged
   at that scale. A bound on every element, where the max-abs error alone,
   scaled by the largest reference, lets small elements be a few percent
   wrong. Other types, or a negative floor: never. */
KF_HD double kf_far_eps(int dt) {
  return dt == kDtBF16 ? kf_pow2(-7) : dt == kDtF16 ? kf_pow2(-10) : 0.0;
}
KF_HD double kf_far_floor(int dt, double max_ref) {
  double tiny = dt == kDtBF16 ? kf_pow2(-126) : kf_pow2(-14);
  double f = kf_pow2(-10) * max_ref;
  return f > tiny ? f : tiny;
}
KF_HD int kf_far(int dt, double r, double c, double floor) {
  double eps = kf_far_eps(dt);
  if (eps == 0.0 || floor < 0.0) return 0;
  double a = kf_fabs(r);
  return kf_fabs(c - r) > eps * (a > floor ? a : floor);
}
/* `dt` and `floor` (kf_far_floor; negative: not counted) for the far count. */
KF_HD void kf_part_add(KfPart* p, long long i, double r, double c, int unwritten, int dt, double floor) {
  if (unwritten) {
    p->unwritten += 1;
    p->first_unwritten = kf_first(p->first_unwritten, i);
  }
  int rf = kf_isfinite(r), cf = kf_isfinite(c);
  if (rf && kf_fabs(r) > p->max_ref) p->max_ref = kf_fabs(r);
  if (rf && cf) {
    double e = kf_fabs(c - r);
    if (e > 0.0) p->mismatched += 1;
    if (kf_far(dt, r, c, floor)) {
      p->far += 1;
      p->first_far = kf_first(p->first_far, i);
    }
    if (e > p->max_err || p->worst < 0) {
      if (e > p->max_err) p->max_err = e;
      p->worst = i;
    }
    return;
  }
  int match = (kf_isnan(r) && kf_isnan(c)) || (!kf_isnan(r) && r == c);
  if (!match) {
    p->special += 1;
    p->first_special = kf_first(p->first_special, i);
  }
}
/* Order-free: the same totals whatever the grid. */
KF_HD void kf_part_merge(KfPart* a, const KfPart* b) {
  if (b->worst >= 0 && (a->worst < 0 || b->max_err > a->max_err ||
                        (b->max_err == a->max_err && b->worst < a->worst))) {
    a->max_err = b->max_err;
    a->worst = b->worst;
  }
  if (b->max_ref > a->max_ref) a->max_ref = b->max_ref;
  a->special += b->special;
  a->first_special = kf_first(a->first_special, b->first_special);
  a->unwritten += b->unwritten;
  a->first_unwritten = kf_first(a->first_unwritten, b->first_unwritten);
  a->mismatched += b->mismatched;
  a->far += b->far;
  a->first_far = kf_first(a->first_far, b->first_far);
}

/* Before any candidate: is the reference fully written (no all-0xFF f64), is
   eager (poison rule against the raw reference)? Then where eager's rounding
   made an inf or NaN the reference lacks (or the reverse), the reference
   takes eager's value: candidates are held to eager there. */
struct KfPrep {
  long long ref_unwritten;
  long long first_ref_unwritten;
  long long eager_unwritten;
  long long first_eager_unwritten;
};
KF_HD void kf_prep_init(KfPrep* p) {
  p->ref_unwritten = 0;
  p->first_ref_unwritten = -1;
  p->eager_unwritten = 0;
  p->first_eager_unwritten = -1;
}
KF_HD double kf_prep_add(KfPrep* p, long long i, double r, int dt, unsigned long long eager_raw) {
  if (kf_bits_from_f64(r) == 0xffffffffffffffffull) {
    p->ref_unwritten += 1;
    p->first_ref_unwritten = kf_first(p->first_ref_unwritten, i);
  }
  if (kf_unwritten(dt, eager_raw, r)) {
    p->eager_unwritten += 1;
    p->first_eager_unwritten = kf_first(p->first_eager_unwritten, i);
  }
  double e = kf_decode(dt, eager_raw);
  int special = !kf_isfinite(r) || !kf_isfinite(e);
  int same = (kf_isnan(r) && kf_isnan(e)) || r == e;
  return (special && !same) ? e : r;
}
KF_HD void kf_prep_merge(KfPrep* a, const KfPrep* b) {
  a->ref_unwritten += b->ref_unwritten;
  a->first_ref_unwritten = kf_first(a->first_ref_unwritten, b->first_ref_unwritten);
  a->eager_unwritten += b->eager_unwritten;
  a->first_eager_unwritten = kf_first(a->first_eager_unwritten, b->first_eager_unwritten);
}

)  // KFUSE_SHARED_CODE_

#undef KFUSE_SHARED_CODE_
#undef KF_HD

static_assert(sizeof(KfPart) == 80, "KfPart is 80 bytes on host and device");
static_assert(sizeof(KfPrep) == 32, "KfPrep is 32 bytes on host and device");

}  // namespace kfuse::shared_code

#endif  // KFUSE_TUNER_WORKER_SHARED_CODE_H_
