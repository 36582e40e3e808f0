// Plan signatures: what they cover, what they refuse, and the key files.
#include "plan/signing.h"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>

#include "gtest/gtest.h"

namespace kfuse {
namespace {

v1::KernelPlan SamplePlan() {
  v1::KernelPlan plan;
  plan.set_api_version("kfuse.v1");
  plan.set_key("pw/abc");
  v1::Kernel* k = plan.add_kernels();
  k->set_entry("kf_pw_1");
  k->set_arch("sm_90");
  k->set_cubin(std::string("\x7f" "ELF\0cubin", 10));
  k->set_ptx(".version 8.0");
  k->mutable_grid()->mutable_x()->set_constant(512);
  k->mutable_block()->mutable_x()->set_constant(256);
  k->add_params()->set_kind(v1::Param::KIND_BUFFER);
  plan.add_inputs()->set_name("x");
  return plan;
}

std::array<uint8_t, 32> Seed(uint8_t b) {
  std::array<uint8_t, 32> s;
  s.fill(b);
  return s;
}

struct Tamper {
  const char* name;
  void (*apply)(v1::KernelPlan&);
};

TEST(PlanSignature, SignedPlanVerifiesAndEveryTamperIsRefused) {
  SigningKey key = SigningKeyFromSeed(Seed(1));
  v1::KernelPlan plan = SamplePlan();
  SignPlan(key, &plan);
  ASSERT_EQ(plan.signature().size(), 64u);
  EXPECT_TRUE(VerifyPlanSignature(plan, key.public_key).ok());

  const Tamper tampers[] = {
      {"cubin", [](v1::KernelPlan& p) { (*p.mutable_kernels(0)->mutable_cubin())[5] ^= 1; }},
      {"ptx", [](v1::KernelPlan& p) { p.mutable_kernels(0)->set_ptx(".version 8.0 // x"); }},
      {"grid", [](v1::KernelPlan& p) { p.mutable_kernels(0)->mutable_grid()->mutable_x()->set_constant(513); }},
      {"block", [](v1::KernelPlan& p) { p.mutable_kernels(0)->mutable_block()->mutable_y()->set_constant(2); }},
      {"smem", [](v1::KernelPlan& p) { p.mutable_kernels(0)->set_dynamic_smem_bytes(1024); }},
      {"entry", [](v1::KernelPlan& p) { p.mutable_kernels(0)->set_entry("kf_pw_2"); }},
      {"arch", [](v1::KernelPlan& p) { p.mutable_kernels(0)->set_arch("sm_80"); }},
      {"param", [](v1::KernelPlan& p) { p.mutable_kernels(0)->mutable_params(0)->set_kind(v1::Param::KIND_SCALAR); }},
      {"precondition", [](v1::KernelPlan& p) { p.mutable_kernels(0)->add_preconditions()->set_value(4); }},
      {"extra kernel", [](v1::KernelPlan& p) { *p.add_kernels() = p.kernels(0); }},
      {"intermediate", [](v1::KernelPlan& p) { p.add_intermediates()->set_dtype(v1::DTYPE_F32); }},
      {"output", [](v1::KernelPlan& p) { p.add_outputs()->set_name("y"); }},
      {"key", [](v1::KernelPlan& p) { p.set_key("pw/abd"); }},
      {"signature", [](v1::KernelPlan& p) { (*p.mutable_signature())[0] ^= 1; }},
      {"short signature", [](v1::KernelPlan& p) { p.mutable_signature()->resize(63); }},
  };
  for (const Tamper& t : tampers) {
    v1::KernelPlan copy = plan;
    t.apply(copy);
    absl::Status s = VerifyPlanSignature(copy, key.public_key);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << t.name;
    EXPECT_NE(s.message().find("does not verify against the pinned key"), absl::string_view::npos) << t.name;
  }
}

TEST(PlanSignature, ASigningKeyPinnedAsThePublicKeyIsNamedNotEchoed) {
  SigningKey key = SigningKeyFromSeed(Seed(3));
  v1::KernelPlan plan = SamplePlan();
  SignPlan(key, &plan);
  PublicKey seed_as_public;  // The signing key file's 64 hex digits, pinned by mistake.
  seed_as_public.bytes = key.seed;
  absl::Status s = VerifyPlanSignature(plan, seed_as_public);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("private signing key, not its public key"), absl::string_view::npos) << s;
  EXPECT_EQ(s.message().find(seed_as_public.Hex().substr(0, 8)), absl::string_view::npos) << s;
  // Another server's public key: the plain refusal, without the key's digits.
  SigningKey other = SigningKeyFromSeed(Seed(4));
  s = VerifyPlanSignature(plan, other.public_key);
  EXPECT_NE(s.message().find("does not verify against the pinned key"), absl::string_view::npos) << s;
  EXPECT_EQ(s.message().find(other.public_key.Hex().substr(0, 8)), absl::string_view::npos) << s;
}

TEST(PlanSignature, InformationalFieldsAreNotCovered) {
  SigningKey key = SigningKeyFromSeed(Seed(1));
  v1::KernelPlan plan = SamplePlan();
  SignPlan(key, &plan);
  plan.mutable_provenance()->set_node("elsewhere");
  plan.mutable_kernels(0)->set_source("// source is informational");
  EXPECT_TRUE(VerifyPlanSignature(plan, key.public_key).ok());
}

TEST(PlanSignature, WrongKeyAndUnsignedAreRefused) {
  v1::KernelPlan plan = SamplePlan();
  EXPECT_EQ(VerifyPlanSignature(plan, SigningKeyFromSeed(Seed(1)).public_key).message().substr(0, 16),
            "plan is unsigned");
  SignPlan(SigningKeyFromSeed(Seed(1)), &plan);
  absl::Status s = VerifyPlanSignature(plan, SigningKeyFromSeed(Seed(2)).public_key);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
}

TEST(PlanSignature, PayloadIsStableAndLengthPrefixed) {
  std::string p = PlanSigningPayload(SamplePlan());
  EXPECT_EQ(p.rfind("kfuse.v1 plan signature\nkey 6:pw/abc\nkernels 1\nentry 7:kf_pw_1\narch 5:sm_90\ncubin ", 0), 0u)
      << p;
  EXPECT_EQ(p, PlanSigningPayload(SamplePlan()));
}

TEST(SigningKeyFile, CreatedOnceWithMode0600ThenLoaded) {
  std::string path = ::testing::TempDir() + "/signing_test.key";
  std::remove(path.c_str());
  absl::StatusOr<SigningKey> a = LoadOrCreateSigningKey(path);
  ASSERT_TRUE(a.ok()) << a.status();
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  absl::StatusOr<SigningKey> b = LoadOrCreateSigningKey(path);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->public_key, b->public_key);
  EXPECT_EQ(ParsePublicKeyHex(a->public_key.Hex())->Hex(), a->public_key.Hex());

  chmod(path.c_str(), 0644);
  EXPECT_EQ(LoadOrCreateSigningKey(path).status().code(), absl::StatusCode::kPermissionDenied);
  std::remove(path.c_str());
  EXPECT_EQ(LoadOrCreateSigningKey(path, /*create=*/false).status().code(), absl::StatusCode::kNotFound);
}

TEST(SigningKeyFile, RejectsMalformedKeys) {
  std::string path = ::testing::TempDir() + "/signing_test_bad.key";
  std::remove(path.c_str());
  { std::ofstream(path) << "not hex\n"; }
  chmod(path.c_str(), 0600);
  EXPECT_EQ(LoadOrCreateSigningKey(path).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ParsePublicKeyHex("abcd").ok());
  EXPECT_FALSE(ParsePublicKeyHex(std::string(64, 'g')).ok());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace kfuse
