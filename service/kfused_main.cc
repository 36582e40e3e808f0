// kfused: the kfuse service. Serves kfuse.v1.KernelService with its SQLite
// store; tunes on the local GPU when there is one, answers with heuristic
// kernels when there is none.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "service/node.h"
#include "service/server.h"

ABSL_FLAG(std::string, address, "127.0.0.1:7420", "host:port to listen on (loopback by default)");
ABSL_FLAG(std::string, store, "", "SQLite store path (default: $XDG_CACHE_HOME/kfuse/kfuse.db or ~/.cache/kfuse/kfuse.db)");
ABSL_FLAG(int64_t, store_max_bytes, int64_t{4} << 30, "store size cap; least recently used entries are evicted");
ABSL_FLAG(int, threads, 2, "compile and tuning jobs run at once");
ABSL_FLAG(int, max_queued_jobs, 64, "queued jobs beyond which new misses get RESOURCE_EXHAUSTED");
ABSL_FLAG(int, max_message_bytes, 64 << 20, "largest request or response message");
ABSL_FLAG(bool, no_gpu, false, "never tune: answer every miss with the heuristic kernel");
ABSL_FLAG(bool, read_only, false, "serve from the store only, never compile");
ABSL_FLAG(int, device, 0, "CUDA device ordinal to tune on");
ABSL_FLAG(int64_t, gpu_memory_budget, int64_t{8} << 30, "GPU memory the tuning worker may use, bytes");
ABSL_FLAG(std::string, worker, "", "path of kfuse-worker (default: beside kfused, or on PATH)");
ABSL_FLAG(std::string, node, "", "this node's name in provenance (default: hostname)");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("kfused: the kfuse kernel-fusion service. kfused --address=127.0.0.1:7420");
  absl::ParseCommandLine(argc, argv);

  // Signals are taken by sigwait below, never by a handler on a random thread.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  kfuse::NodeOptions opts;
  opts.store_path = absl::GetFlag(FLAGS_store);
  opts.store_max_bytes = absl::GetFlag(FLAGS_store_max_bytes);
  opts.no_gpu = absl::GetFlag(FLAGS_no_gpu);
  opts.read_only = absl::GetFlag(FLAGS_read_only);
  opts.device = absl::GetFlag(FLAGS_device);
  opts.gpu_memory_budget = absl::GetFlag(FLAGS_gpu_memory_budget);
  opts.worker_path = absl::GetFlag(FLAGS_worker);
  opts.node = absl::GetFlag(FLAGS_node);
  absl::StatusOr<std::unique_ptr<kfuse::ServiceNode>> node = kfuse::ServiceNode::Create(opts);
  if (!node.ok()) {
    std::fprintf(stderr, "kfused: %s\n", node.status().ToString().c_str());
    return 1;
  }

  kfuse::ServiceOptions sopts;
  sopts.job_threads = absl::GetFlag(FLAGS_threads);
  sopts.max_queued_jobs = absl::GetFlag(FLAGS_max_queued_jobs);
  kfuse::KernelServiceImpl service((*node)->pipeline(), sopts);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(absl::GetFlag(FLAGS_address), grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(absl::GetFlag(FLAGS_max_message_bytes));
  builder.SetMaxSendMessageSize(absl::GetFlag(FLAGS_max_message_bytes));
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "kfused: cannot listen on %s (in use, or not an address of this host)\n",
                 absl::GetFlag(FLAGS_address).c_str());
    return 1;
  }
  bool tuning = (*node)->can_tune();
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  health->SetServingStatus("kfuse.v1.KernelService", true);
  health->SetServingStatus("kfuse.v1.Tuning", tuning);
  std::fprintf(stderr, "kfused: serving on %s, store %s, %s\n", absl::GetFlag(FLAGS_address).c_str(),
               (*node)->store_path().c_str(),
               tuning ? absl::StrCat("tuning on ", (*node)->device_name()).c_str()
                      : absl::StrCat("heuristic only: ", (*node)->no_gpu_reason()).c_str());

  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::fprintf(stderr, "kfused: %s: finishing calls in flight\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  health->Shutdown();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  service.Drain();
  server->Wait();
  std::fprintf(stderr, "kfused: stopped\n");
  return 0;
}
