#include "service/metrics.h"

#include <arpa/inet.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

// True when `text` has `line` as one whole line.
bool HasLine(const std::string& text, const std::string& line) {
  for (absl::string_view l : absl::StrSplit(text, '\n')) {
    if (l == line) return true;
  }
  return false;
}

std::unique_ptr<Metrics> Unserved() {
  auto m = Metrics::Create("");
  EXPECT_TRUE(m.ok()) << m.status();
  return std::move(m).value();
}

TEST(MetricsTest, EveryFamilyHasItsLabelsAndValues) {
  auto m = Unserved();
  m->Request("Compile", "OK");
  m->Request("Compile", "OK");
  m->Request("Compile", "INVALID_ARGUMENT");
  m->Lookup("memory", true);
  m->Lookup("local", false);
  m->Lookup("local", false);
  m->CompileSeconds(0.2);
  m->BuildSeconds("tuned", 3);
  m->SetQueueDepth(/*background=*/false, 7);
  m->SetQueueDepth(/*background=*/true, 3);
  m->Trial("ok");
  m->Trial("ok");
  m->Trial("wrong_result");
  m->SetJobsRunning(2);
  m->VerificationFailure("fleet_signature");
  m->FleetError("publish");
  m->FleetLease("acquired");
  m->FleetLease("acquired");
  m->FleetLease("expired");
  m->BackgroundTune();
  m->StoreError("put");
  const std::string text = m->Text();

  EXPECT_TRUE(HasLine(text, "kfuse_requests_total{code=\"OK\",rpc=\"Compile\"} 2")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_requests_total{code=\"INVALID_ARGUMENT\",rpc=\"Compile\"} 1")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_lookups_total{result=\"hit\",tier=\"memory\"} 1")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_lookups_total{result=\"miss\",tier=\"local\"} 2")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_compile_seconds_count 1")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_tuning_seconds_count{how=\"tuned\"} 1")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_queue_depth{pool=\"calls\"} 7")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_queue_depth{pool=\"background\"} 3")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_trials_total{outcome=\"ok\"} 2")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_trials_total{outcome=\"wrong_result\"} 1")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_jobs_running 2")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_verification_failures_total{what=\"fleet_signature\"} 1")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_fleet_errors_total{op=\"publish\"} 1")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_store_errors_total{op=\"put\"} 1")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_fleet_leases_total{result=\"acquired\"} 2")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_fleet_leases_total{result=\"expired\"} 1")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_background_tunes_total 1")) << text;
  for (const char* family :
       {"kfuse_requests_total", "kfuse_lookups_total", "kfuse_compile_seconds", "kfuse_tuning_seconds",
        "kfuse_queue_depth", "kfuse_jobs_running", "kfuse_verification_failures_total", "kfuse_trials_total",
        "kfuse_fleet_errors_total", "kfuse_fleet_leases_total", "kfuse_background_tunes_total"}) {
    EXPECT_NE(text.find(absl::StrCat("# HELP ", family, " ")), std::string::npos) << family;
  }
  EXPECT_TRUE(HasLine(text, "# TYPE kfuse_compile_seconds histogram")) << text;
  EXPECT_TRUE(HasLine(text, "# TYPE kfuse_queue_depth gauge")) << text;
  EXPECT_TRUE(HasLine(text, "# TYPE kfuse_requests_total counter")) << text;
}

TEST(MetricsTest, TuningAvailableIsZeroUntilSet) {
  auto m = Unserved();
  EXPECT_TRUE(HasLine(m->Text(), "kfuse_tuning_available 0")) << m->Text();  // Until a GPU can tune.
  m->SetTuningAvailable(true);
  EXPECT_TRUE(HasLine(m->Text(), "kfuse_tuning_available 1")) << m->Text();
  m->SetTuningAvailable(false);
  EXPECT_TRUE(HasLine(m->Text(), "kfuse_tuning_available 0")) << m->Text();
}

TEST(MetricsTest, FleetUpIsAbsentUntilSet) {
  auto m = Unserved();
  EXPECT_EQ(m->Text().find("kfuse_fleet_up"), std::string::npos) << m->Text();
  m->SetFleetUp(true);
  EXPECT_TRUE(HasLine(m->Text(), "kfuse_fleet_up 1")) << m->Text();
  m->SetFleetUp(false);
  EXPECT_TRUE(HasLine(m->Text(), "kfuse_fleet_up 0")) << m->Text();
  EXPECT_EQ(m->Text().find("kfuse_fleet_writable"), std::string::npos) << m->Text();
  m->SetFleetWritable(false);
  EXPECT_TRUE(HasLine(m->Text(), "kfuse_fleet_writable 0")) << m->Text();
  m->SetFleetWritable(true);
  EXPECT_TRUE(HasLine(m->Text(), "kfuse_fleet_writable 1")) << m->Text();
}

TEST(MetricsTest, LabelValuesPastTheCapCountAsOther) {
  auto m = Unserved();
  for (int i = 0; i < 70; ++i) m->VerificationFailure(absl::StrCat("what", i));
  m->VerificationFailure("what3");        // Admitted before the cap: still its own.
  m->VerificationFailure("bad value\n");  // Not a plain label value.
  const std::string text = m->Text();
  EXPECT_TRUE(HasLine(text, "kfuse_verification_failures_total{what=\"what63\"} 1")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_verification_failures_total{what=\"what3\"} 2")) << text;
  EXPECT_EQ(text.find("what=\"what64\""), std::string::npos) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_verification_failures_total{what=\"other\"} 7")) << text;
  // Each label of a two-label family has its own cap.
  for (int i = 0; i < 70; ++i) m->Request(absl::StrCat("Rpc", i), "OK");
  EXPECT_TRUE(HasLine(m->Text(), "kfuse_requests_total{code=\"OK\",rpc=\"other\"} 6")) << m->Text();
}

TEST(MetricsTest, HistogramsCountIntoTheirBuckets) {
  auto m = Unserved();
  m->CompileSeconds(0.005);
  m->CompileSeconds(0.3);
  m->CompileSeconds(45);
  m->BuildSeconds("heuristic", 0.2);
  m->BuildSeconds("heuristic", 700);
  m->BuildSeconds("error", 1);
  const std::string text = m->Text();
  EXPECT_TRUE(HasLine(text, "kfuse_compile_seconds_count 3")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_compile_seconds_bucket{le=\"0.01\"} 1")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_compile_seconds_bucket{le=\"0.5\"} 2")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_compile_seconds_bucket{le=\"30\"} 2")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_compile_seconds_bucket{le=\"+Inf\"} 3")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_tuning_seconds_count{how=\"heuristic\"} 2")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_tuning_seconds_bucket{how=\"heuristic\",le=\"0.25\"} 1")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_tuning_seconds_bucket{how=\"heuristic\",le=\"600\"} 1")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_tuning_seconds_bucket{how=\"heuristic\",le=\"+Inf\"} 2")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_tuning_seconds_count{how=\"error\"} 1")) << text;
}

TEST(MetricsTest, CountsFromManyThreadsAddUp) {
  auto m = Unserved();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&m, t] {
      for (int i = 0; i < 1000; ++i) {
        m->Request("Compile", "OK");
        m->Lookup(t % 2 ? "local" : "fleet", true);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const std::string text = m->Text();
  EXPECT_TRUE(HasLine(text, "kfuse_requests_total{code=\"OK\",rpc=\"Compile\"} 4000")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_lookups_total{result=\"hit\",tier=\"local\"} 2000")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_lookups_total{result=\"hit\",tier=\"fleet\"} 2000")) << text;
}

TEST(MetricsTest, NullMetricsIsOneUnservedInstance) {
  Metrics& a = NullMetrics();
  EXPECT_EQ(&a, &NullMetrics());
  a.Request("Compile", "OK");  // Accepted, never served.
  EXPECT_NE(a.Text().find("kfuse_requests_total"), std::string::npos);
}

// grpc.health.v1.HealthCheckRequest{service}, encoded by hand (field 1, a
// string shorter than 128 bytes).
grpc::ByteBuffer HealthRequest(const std::string& service) {
  std::string bytes;
  if (!service.empty())
    bytes = absl::StrCat("\x0a", std::string(1, static_cast<char>(service.size())), service);
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

grpc::Status Call(grpc::GenericStub& stub, const std::string& method, const std::string& service) {
  grpc::ClientContext ctx;
  grpc::ByteBuffer request = HealthRequest(service), response;
  grpc::Status status;
  absl::Notification done;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
    status = std::move(s);
    done.Notify();
  });
  done.WaitForNotification();
  return status;
}

TEST(MetricsTest, InterceptorsCountRealRpcs) {
  auto m = Unserved();
  const bool health_was_enabled = grpc::DefaultHealthCheckServiceEnabled();
  grpc::EnableDefaultHealthCheckService(true);  // Process-wide: put back below.
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  // Answers every method no other service has with UNIMPLEMENTED (and gives
  // the server the callback service it needs to start).
  grpc::CallbackGenericService generic;
  builder.RegisterCallbackGenericService(&generic);
  builder.experimental().SetInterceptorCreators(m->Interceptors());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  grpc::EnableDefaultHealthCheckService(health_was_enabled);
  ASSERT_NE(server, nullptr);
  ASSERT_GT(port, 0);

  grpc::GenericStub stub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  grpc::Status ok = Call(stub, "/grpc.health.v1.Health/Check", "");
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  grpc::Status unknown = Call(stub, "/grpc.health.v1.Health/Check", "no.such.Service");
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND) << unknown.error_message();
  grpc::Status unimplemented = Call(stub, "/kfuse.v9.Nothing/Nope", "");
  EXPECT_EQ(unimplemented.error_code(), grpc::StatusCode::UNIMPLEMENTED) << unimplemented.error_message();
  server->Shutdown();
  server->Wait();

  const std::string text = m->Text();
  EXPECT_TRUE(HasLine(text, "kfuse_requests_total{code=\"OK\",rpc=\"Check\"} 1")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_requests_total{code=\"NOT_FOUND\",rpc=\"Check\"} 1")) << text;
  EXPECT_TRUE(HasLine(text, "kfuse_requests_total{code=\"UNIMPLEMENTED\",rpc=\"Nope\"} 1")) << text;
  EXPECT_EQ(text.find("code=\"CANCELLED\""), std::string::npos) << text;
}

// The whole answer of a plain HTTP/1.0 GET on 127.0.0.1:`port`.
std::string HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string answer;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    if (send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      ssize_t n;
      while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) answer.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return answer;
}

TEST(MetricsTest, ServesMetricsOverHttp) {
  auto created = Metrics::Create("127.0.0.1:0");
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<Metrics> m = std::move(created).value();
  int port = m->ListeningPort();
  ASSERT_GT(port, 0);
  m->Lookup("fleet", false);
  const std::string answer = HttpGet(port, "/metrics");
  EXPECT_NE(answer.find(" 200 "), std::string::npos) << answer;
  EXPECT_NE(answer.find("kfuse_lookups_total{result=\"miss\",tier=\"fleet\"} 1"), std::string::npos)
      << answer;
}

TEST(MetricsTest, AnAddressInUseIsAnError) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string address = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));

  auto m = Metrics::Create(address);
  close(fd);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(m.status().message().find(address), std::string::npos) << m.status();
}

}  // namespace
}  // namespace kfuse
