// Pinned-key loading and plan verification as clients (and the launcher)
// call them before loading any module.
#include "clients/verify.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

using ::testing::HasSubstr;

SigningKey Key(uint8_t b) {
  std::array<uint8_t, 32> s;
  s.fill(b);
  return SigningKeyFromSeed(s);
}

v1::KernelPlan Plan() {
  v1::KernelPlan plan;
  plan.set_key("k");
  v1::Kernel* k = plan.add_kernels();
  k->set_entry("kf_pw_1");
  k->set_cubin("\x7f" "ELF");
  k->mutable_grid()->mutable_x()->set_constant(4);
  return plan;
}

TEST(VerifyPlan, GoodTamperedWrongKeyUnsigned) {
  SigningKey key = Key(3);
  v1::KernelPlan plan = Plan();
  EXPECT_EQ(VerifyPlan(plan, key.public_key).code(), absl::StatusCode::kPermissionDenied);  // Unsigned.
  SignPlan(key, &plan);
  EXPECT_TRUE(VerifyPlan(plan, key.public_key).ok());
  EXPECT_EQ(VerifyPlan(plan, Key(4).public_key).code(), absl::StatusCode::kPermissionDenied);
  v1::KernelPlan cubin = plan;
  cubin.mutable_kernels(0)->set_cubin("\x7f" "ELG");
  EXPECT_EQ(VerifyPlan(cubin, key.public_key).code(), absl::StatusCode::kPermissionDenied);
  v1::KernelPlan grid = plan;
  grid.mutable_kernels(0)->mutable_grid()->mutable_x()->set_constant(5);
  EXPECT_EQ(VerifyPlan(grid, key.public_key).code(), absl::StatusCode::kPermissionDenied);
}

TEST(LoadPinnedKey, HexOrFile) {
  SigningKey key = Key(5);
  EXPECT_EQ(*LoadPinnedKey(key.public_key.Hex()), key.public_key);
  std::string path = ::testing::TempDir() + "/verify_test.pub";
  { std::ofstream(path) << key.public_key.Hex() << "\n"; }
  EXPECT_EQ(*LoadPinnedKey(path), key.public_key);
  { std::ofstream(path) << "garbage\n"; }
  EXPECT_EQ(LoadPinnedKey(path).status().code(), absl::StatusCode::kInvalidArgument);
  std::remove(path.c_str());
  EXPECT_EQ(LoadPinnedKey(path).status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(LoadPinnedKey(path).status().message()), HasSubstr(path));
  // A key one digit short is described, not echoed (it may be a seed).
  const std::string short_key = key.public_key.Hex().substr(1);
  absl::Status s = LoadPinnedKey(short_key).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("verify key of 63 characters (63 of them hex digits) is neither"));
  EXPECT_EQ(std::string(s.message()).find(short_key.substr(0, 16)), std::string::npos) << s;
  // Quoted or prefixed, as configuration files write keys: still not shown.
  const std::string hex = key.public_key.Hex();
  for (const std::string& wrapped : {"0x" + hex, "\"" + hex + "\"", hex.substr(0, 8) + " " + hex.substr(8, 8),
                                     hex.substr(0, 31)}) {
    s = LoadPinnedKey(wrapped).status();
    EXPECT_EQ(std::string(s.message()).find(hex.substr(0, 8)), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace kfuse
