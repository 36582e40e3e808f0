# Hand edits for run166: row loads through L1::no_allocate forms.
import re, sys
def sub(src, old, new, count=None):
    n = src.count(old)
    assert n >= 1, old
    return src.replace(old, new)
def plain_load(src, vec, form):
    # *reinterpret_cast<const kf_vec<__kf_bf16, V>*>(in0 + kf_b0 + kf_c) -> asm load of that form
    old = "const kf_vec<__kf_bf16, %d> kf_t = *reinterpret_cast<const kf_vec<__kf_bf16, %d>*>(in0 + kf_b0 + kf_c);" % (vec, vec)
    if vec == 4:
        new = ("kf_vec<__kf_bf16, 4> kf_t; { uint2 kf_u; asm(\"%s.v2.u32 {%%0, %%1}, [%%2];\" : \"=r\"(kf_u.x), \"=r\"(kf_u.y) : \"l\"(in0 + kf_b0 + kf_c)); memcpy(&kf_t, &kf_u, 8); }" % form)
    else:
        new = ("kf_vec<__kf_bf16, 8> kf_t; { uint4 kf_u; asm(\"%s.v4.u32 {%%0, %%1, %%2, %%3}, [%%4];\" : \"=r\"(kf_u.x), \"=r\"(kf_u.y), \"=r\"(kf_u.z), \"=r\"(kf_u.w) : \"l\"(in0 + kf_b0 + kf_c)); memcpy(&kf_t, &kf_u, 16); }" % form)
    return sub(src, old, new)
S = open("sm/v26.cu").read()
open("smN.cu", "w").write(plain_load(S, 4, "ld.global.nc.L1::no_allocate"))
open("smC.cu", "w").write(plain_load(S, 4, "ld.global.L1::no_allocate"))
open("smP.cu", "w").write(S)
R0 = open("rms/v0.cu").read()
open("r0N.cu", "w").write(plain_load(R0, 8, "ld.global.nc.L1::no_allocate"))
open("r0P.cu", "w").write(R0)
R = open("rms/v22.cu").read()
open("rlP.cu", "w").write(R)
open("rlN.cu", "w").write(R.replace("asm(\"ld.global.L2::cache_hint", "asm(\"ld.global.L1::no_allocate.L2::cache_hint"))
open("rlM.cu", "w").write(R.replace("asm(\"ld.global.L2::cache_hint", "asm(\"ld.global.nc.L1::no_allocate.L2::cache_hint"))
