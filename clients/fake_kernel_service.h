// A canned kfuse.v1.KernelService for client and CLI tests (no kfused).
// Compile: INVALID_ARGUMENT for a chain without outputs, else a one-kernel
// plan, a miss the first time and hits after. Tune: three progress messages
// for MODE_FULL (a miss the first time a request is seen, a hit after),
// none (a buggy server) otherwise. Explain: found for sm_90 (or no target),
// device and toolchain differ for another arch. ExportKernels streams
// `entries`; ImportKernels rejects entries whose signature is "forged".
#ifndef KFUSE_CLIENTS_FAKE_KERNEL_SERVICE_H_
#define KFUSE_CLIENTS_FAKE_KERNEL_SERVICE_H_

#include <algorithm>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "kfuse/v1/kfuse.grpc.pb.h"

namespace kfuse::client {

class FakeKernelService final : public kfuse::v1::KernelService::Service {
 public:
  grpc::Status Compile(grpc::ServerContext*,
                       const kfuse::v1::CompileRequest* req,
                       kfuse::v1::CompileResponse* resp) override {
    last_client = req->env().client();
    last_driver = req->env().driver_version();
    if (req->chain().outputs_size() == 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "chain: no outputs");
    }
    resp->set_cache(compiles++ == 0 ? kfuse::v1::CACHE_OUTCOME_MISS
                                    : kfuse::v1::CACHE_OUTCOME_HIT);
    resp->mutable_plan()->set_key("key-1");
    auto* k = resp->mutable_plan()->add_kernels();
    k->set_entry(entry);
    k->set_arch("sm_90");
    k->set_cubin(std::string("\x7f"
                             "ELF",
                             4) +
                 "fake");
    if (req->include_source())
      k->set_source("extern \"C\" __global__ void k() {}");
    return grpc::Status::OK;
  }
  grpc::Status Tune(grpc::ServerContext*, const kfuse::v1::CompileRequest* req,
                    grpc::ServerWriter<kfuse::v1::TuneProgress>* w) override {
    tune_requests.push_back(*req);
    if (req->chain().outputs_size() == 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "chain: no outputs");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(tune_delay_ms));
    const int n = req->policy().mode() == kfuse::v1::TuningPolicy::MODE_FULL
                      ? 3
                      : 0;  // QUICK: end without a result (a buggy server).
    kfuse::v1::CompileRequest seen = *req;
    seen.clear_env();
    const bool stored = !tuned.insert(seen.SerializeAsString()).second;
    if (untimed && n > 0) {  // As a server without a GPU answers: no trials.
      kfuse::v1::TuneProgress p;
      p.set_phase("done");
      p.mutable_result()->mutable_plan()->set_key("tuned");
      auto* prov = p.mutable_result()->mutable_plan()->mutable_provenance();
      prov->set_state(kfuse::v1::TUNE_STATE_HEURISTIC);
      prov->set_reason("no GPU in the fake");
      p.mutable_result()->set_cache(stored ? kfuse::v1::CACHE_OUTCOME_HIT
                                           : kfuse::v1::CACHE_OUTCOME_MISS);
      w->Write(p);
      return grpc::Status::OK;
    }
    for (int i = 1; i <= n + (fastest_fails_check ? 1 : 0); ++i) {
      kfuse::v1::TuneProgress p;
      p.set_phase("time");
      p.set_done(std::min(i, n));
      p.set_total(n);
      auto* t = p.mutable_trial();
      t->set_outcome(kfuse::v1::Trial::OUTCOME_OK);
      t->set_median_seconds(1e-6 * (10 - i));
      t->mutable_variant()->set_family(kfuse::v1::FAMILY_POINTWISE);
      (*t->mutable_variant()->mutable_params())["block"] = 64 * i;
      if (i > n) {  // The fastest (the last timed) fails at another size.
        p.set_phase("check");
        (*t->mutable_variant()->mutable_params())["block"] = 64 * n;
        t->set_outcome(kfuse::v1::Trial::OUTCOME_WRONG_RESULT);
        t->set_median_seconds(0);
        t->set_message("at N=769 (passed at N=1024): max abs error 1");
      }
      if (i == n + (fastest_fails_check ? 1 : 0)) {
        p.mutable_result()->mutable_plan()->set_key("tuned");
        p.mutable_result()->set_cache(stored ? kfuse::v1::CACHE_OUTCOME_HIT
                                             : kfuse::v1::CACHE_OUTCOME_MISS);
      }
      w->Write(p);
    }
    return grpc::Status::OK;
  }
  grpc::Status Lookup(grpc::ServerContext*, const kfuse::v1::CompileRequest*,
                      kfuse::v1::CompileResponse*) override {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "not in the store");
  }
  grpc::Status ListKernels(grpc::ServerContext*,
                           const kfuse::v1::ListKernelsRequest* req,
                           kfuse::v1::ListKernelsResponse* resp) override {
    for (const std::string& key : keys) {
      if (key.rfind(req->key_prefix(), 0) == 0)
        resp->add_kernels()->set_key(key);
    }
    return grpc::Status::OK;
  }
  grpc::Status DeleteKernels(grpc::ServerContext*,
                             const kfuse::v1::DeleteKernelsRequest* req,
                             kfuse::v1::DeleteKernelsResponse* resp) override {
    resp->set_deleted(req->all() ? 7 : req->keys_size());
    return grpc::Status::OK;
  }
  grpc::Status GetDeviceInfo(grpc::ServerContext* ctx,
                             const kfuse::v1::GetDeviceInfoRequest*,
                             kfuse::v1::DeviceInfo* resp) override {
    const auto& md = ctx->client_metadata();
    auto it = md.find("authorization");
    if (it != md.end())
      last_auth = std::string(it->second.data(), it->second.size());
    resp->set_reason("no GPU in the fake");
    return grpc::Status::OK;
  }

  grpc::Status Explain(grpc::ServerContext*,
                       const kfuse::v1::CompileRequest* req,
                       kfuse::v1::ExplainResponse* resp) override {
    const uint32_t cc = req->target().compute_capability();
    const std::string arch = "sm_" + std::to_string(cc == 0 ? 90 : cc);
    const bool found = arch == "sm_90";
    resp->set_key(found ? "key-1" : "key-" + arch);
    resp->set_found(found);
    resp->set_nearest_key("key-1");
    const std::vector<std::vector<std::string>> parts = {
        {"chain", "c0ffee", "c0ffee"},
        {"spec", "sizes=", "sizes="},
        {"device", "untuned:" + arch, "untuned:sm_90"},
        {"toolchain", "fake-1/" + arch, "fake-1/sm_90"},
        {"generator", "pointwise/1", "pointwise/1"}};
    for (const auto& p : parts) {
      auto* part = resp->add_parts();
      part->set_name(p[0]);
      part->set_value(p[1]);
      part->set_nearest_value(p[2]);
      if (p[1] != p[2]) resp->add_differing_parts(p[0]);
    }
    resp->set_text(found ? "artifact key-1 is stored (a hit)"
                         : "no artifact key-" + arch +
                               "; differs in device, toolchain");
    resp->set_fleet("off");
    return grpc::Status::OK;
  }
  grpc::Status ExportKernels(
      grpc::ServerContext*, const kfuse::v1::ExportKernelsRequest* req,
      grpc::ServerWriter<kfuse::v1::StoreEntry>* w) override {
    for (const std::string& key : req->keys()) {
      bool any = false;
      for (const auto& e : entries) any |= e.key().rfind(key, 0) == 0;
      if (!any) {
        return grpc::Status(
            grpc::StatusCode::NOT_FOUND,
            "no stored artifact has a key starting with " + key);
      }
    }
    if (!req->key_prefix().empty() &&
        std::none_of(entries.begin(), entries.end(),
                     [&](const auto& e) { return e.key().rfind(req->key_prefix(), 0) == 0; })) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "key_prefix: no stored artifact has a key starting with " + req->key_prefix());
    }
    for (const auto& e : entries) {
      bool selected = req->all() || (!req->key_prefix().empty() &&
                                     e.key().rfind(req->key_prefix(), 0) == 0);
      for (const std::string& key : req->keys()) {
        selected |= e.key().rfind(key, 0) == 0;
      }
      if (selected) w->Write(e);
    }
    return grpc::Status::OK;
  }
  grpc::Status ImportKernels(grpc::ServerContext*,
                             const kfuse::v1::ImportKernelsRequest* req,
                             kfuse::v1::ImportKernelsResponse* resp) override {
    import_batches.push_back(req->entries_size());
    for (const auto& e : req->entries()) {
      if (e.signature() == "forged") {
        resp->add_rejected(e.kind() + " " + e.key().substr(0, 16) +
                           ": signature does not verify");
      } else if (imported.insert(e.key()).second) {
        resp->set_imported(resp->imported() + 1);
      } else {
        resp->set_already_present(resp->already_present() + 1);
      }
    }
    return grpc::Status::OK;
  }

  // Keys ListKernels answers from (filtered by prefix).
  std::vector<std::string> keys = {"ab0"};
  std::string entry = "kfuse_pw_0";
  int compiles = 0;
  std::string last_client;
  uint32_t last_driver = 0;
  std::string last_auth;
  // Tune: every request, a delay before answering, what was tuned before.
  std::vector<kfuse::v1::CompileRequest> tune_requests;
  bool untimed = false;  // Tune answers heuristic (untuned) plans.
  // Tune: the fastest trial comes again as failed at another size ("check").
  bool fastest_fails_check = false;
  int tune_delay_ms = 0;
  std::set<std::string> tuned;
  // ExportKernels answers from these; ImportKernels records batch sizes and
  // the keys it took.
  std::vector<kfuse::v1::StoreEntry> entries;
  std::vector<int> import_batches;
  std::set<std::string> imported;
};

// The fake on a free loopback port, with the default health service.
class FakeServer {
 public:
  FakeServer() {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(&service_);
    builder.SetMaxReceiveMessageSize(64 << 20);  // As kfused's default.
    server_ = builder.BuildAndStart();
    address_ = "127.0.0.1:" + std::to_string(port);
  }
  ~FakeServer() {
    if (server_ != nullptr) server_->Shutdown();
  }
  bool ok() const { return server_ != nullptr; }
  const std::string& address() const { return address_; }
  FakeKernelService& service() { return service_; }
  grpc::Server& server() { return *server_; }

 private:
  FakeKernelService service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

}  // namespace kfuse::client

#endif  // KFUSE_CLIENTS_FAKE_KERNEL_SERVICE_H_
