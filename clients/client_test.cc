// The client against an in-process fake KernelService (no kfused needed).
#include "clients/client.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "clients/fake_kernel_service.h"
#include "core/version.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tuner/cuda/driver.h"

namespace kfuse::client {
namespace {

using ::testing::HasSubstr;

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fake_.ok());
    options_.address = fake_.address();
    options_.deadline = absl::Seconds(10);
  }

  std::unique_ptr<Client> MakeClient() {
    auto c = Client::Connect(options_);
    EXPECT_TRUE(c.ok()) << c.status();
    return *std::move(c);
  }

  FakeServer fake_;
  FakeKernelService& service_ = fake_.service();
  ClientOptions options_;
};

kfuse::v1::CompileRequest Request() {
  kfuse::v1::CompileRequest r;
  r.mutable_chain()->add_outputs()->set_name("y");
  return r;
}

TEST_F(ClientTest, CompileFillsClientNameAndDriver) {
  auto c = MakeClient();
  auto r = c->Compile(Request());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->plan().key(), "key-1");
  EXPECT_EQ(service_.last_client, absl::StrCat("kfuse-cpp/", kKfuseVersion));
  // This machine's driver (0 without one, as in CI; 13000-style on a GPU host).
  EXPECT_EQ(service_.last_driver, static_cast<uint32_t>(InstalledDriverVersion().value_or(0)));
  auto req = Request();
  req.mutable_env()->set_client("torch/2.5");
  req.mutable_env()->set_driver_version(12080);
  ASSERT_TRUE(c->Compile(req).ok());
  EXPECT_EQ(service_.last_client, "torch/2.5");
  EXPECT_EQ(service_.last_driver, 12080u);
}

TEST_F(ClientTest, ServerErrorKeepsCodeAndMessage) {
  auto c = MakeClient();
  auto r = c->Compile(kfuse::v1::CompileRequest());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "chain: no outputs");
  auto l = c->Lookup(Request());
  EXPECT_EQ(l.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ClientTest, TuneStreamsProgressAndReturnsResult) {
  auto c = MakeClient();
  auto req = Request();
  req.mutable_policy()->set_mode(kfuse::v1::TuningPolicy::MODE_FULL);
  std::vector<uint32_t> done;
  auto r = c->Tune(
      req, [&](const kfuse::v1::TuneProgress& p) { done.push_back(p.done()); });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->plan().key(), "tuned");
  EXPECT_EQ(done, (std::vector<uint32_t>{1, 2, 3}));
}

TEST_F(ClientTest, TuneWithoutResultIsInternal) {
  auto c = MakeClient();
  auto req = Request();
  req.mutable_policy()->set_mode(kfuse::v1::TuningPolicy::MODE_QUICK);
  auto r = c->Tune(req, nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
}

TEST_F(ClientTest, AdminCalls) {
  auto c = MakeClient();
  kfuse::v1::ListKernelsRequest lr;
  lr.set_key_prefix("ab");
  auto l = c->ListKernels(lr);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->kernels(0).key(), "ab0");
  kfuse::v1::DeleteKernelsRequest dr;
  dr.set_all(true);
  auto d = c->DeleteKernels(dr);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->deleted(), 7u);
  auto info = c->GetDeviceInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_FALSE(info->has_gpu());
  EXPECT_EQ(info->reason(), "no GPU in the fake");
}

kfuse::v1::StoreEntry Entry(const std::string& key,
                            const std::string& sig = "") {
  kfuse::v1::StoreEntry e;
  e.set_kind("artifact");
  e.set_key(key);
  e.set_signature(sig);
  return e;
}

TEST_F(ClientTest, ExplainNamesTheDifferingParts) {
  auto c = MakeClient();
  auto req = Request();
  req.mutable_target()->set_compute_capability(80);
  auto r = c->Explain(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->found());
  EXPECT_EQ(r->key(), "key-sm_80");
  EXPECT_EQ(std::vector<std::string>(r->differing_parts().begin(),
                                     r->differing_parts().end()),
            (std::vector<std::string>{"device", "toolchain"}));
}

TEST_F(ClientTest, ExportStreamsEntriesAndACallbackErrorStopsIt) {
  service_.entries = {Entry("aa1"), Entry("aa2"), Entry("bb3")};
  auto c = MakeClient();
  kfuse::v1::ExportKernelsRequest req;
  req.set_key_prefix("aa");
  auto some = c->ExportKernels(req);
  ASSERT_TRUE(some.ok()) << some.status();
  ASSERT_EQ(some->size(), 2u);
  EXPECT_EQ((*some)[1].key(), "aa2");
  req.set_key_prefix("");
  req.set_all(true);
  int seen = 0;
  absl::Status s = c->ExportKernels(req, [&](kfuse::v1::StoreEntry& e) {
    ++seen;
    return e.key() == "aa2" ? absl::DataLossError("disk full")
                            : absl::OkStatus();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(seen, 2);
  kfuse::v1::ExportKernelsRequest unknown;
  unknown.add_keys("zz");
  EXPECT_EQ(c->ExportKernels(unknown).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ClientTest, ImportCountsAndRejections) {
  auto c = MakeClient();
  kfuse::v1::ImportKernelsRequest req;
  *req.add_entries() = Entry("aa1");
  *req.add_entries() = Entry("aa1");
  *req.add_entries() = Entry("0123456789abcdef0123", "forged");
  auto r = c->ImportKernels(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->imported(), 1u);
  EXPECT_EQ(r->already_present(), 1u);
  ASSERT_EQ(r->rejected_size(), 1);
  EXPECT_EQ(r->rejected(0),
            "artifact 0123456789abcdef: signature does not verify");
}

TEST_F(ClientTest, TokenIsSentAsBearer) {
  options_.token = "s3cret";
  auto c = MakeClient();
  ASSERT_TRUE(c->GetDeviceInfo().ok());
  EXPECT_EQ(service_.last_auth, "Bearer s3cret");
}

TEST_F(ClientTest, Health) {
  auto c = MakeClient();
  auto h = c->Health();
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(*h, HealthState::kServing);
  fake_.server().GetHealthCheckService()->SetServingStatus("kfuse.tune", false);
  auto t = c->Health("kfuse.tune");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, HealthState::kNotServing);
  auto unknown = c->Health("no.such.Service");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
}

TEST(ClientConnectTest, BadOptions) {
  ClientOptions o;
  o.address = "";
  EXPECT_EQ(Client::Connect(o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.address = "127.0.0.1:1";
  o.max_message_bytes = 0;
  EXPECT_EQ(Client::Connect(o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ClientConnectTest, NoServerIsUnavailable) {
  ClientOptions o;
  o.address = "127.0.0.1:1";  // Nothing listens on port 1.
  o.deadline = absl::Seconds(5);
  auto lazy = Client::Connect(o);
  ASSERT_TRUE(lazy.ok());
  EXPECT_EQ((*lazy)->GetDeviceInfo().status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ((*lazy)->Health().status().code(), absl::StatusCode::kUnavailable);
  o.connect_timeout = absl::Milliseconds(200);
  auto eager = Client::Connect(o);
  EXPECT_EQ(eager.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(eager.status().message()), HasSubstr("127.0.0.1:1"));
}

}  // namespace
}  // namespace kfuse::client
