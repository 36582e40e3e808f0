#include "service/interceptors.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "cache/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/pipeline.h"
#include "service/server.h"
#include "service/service_test_util.h"

namespace kfuse {
namespace {

using service_testing::FakeCompiler;
using ::testing::HasSubstr;

grpc::ByteBuffer Bytes(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// Answers every method no registered service has as a bidi stream: reads
// to the end, writes nothing, finishes OK (as server reflection's stream
// ends when its client closes).
class DrainingGenericService : public grpc::CallbackGenericService {
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    class Reactor : public grpc::ServerGenericBidiReactor {
     public:
      Reactor() { StartRead(&buf_); }
      void OnReadDone(bool ok) override {
        if (ok) {
          StartRead(&buf_);
        } else {
          Finish(grpc::Status::OK);
        }
      }
      void OnDone() override { delete this; }

     private:
      grpc::ByteBuffer buf_;
    };
    return new Reactor;
  }
};

// A kfused as main builds it (the service, the interceptors, the metrics)
// over a fake compiler, spoken to with raw bytes.
class InterceptorsTest : public ::testing::Test {
 protected:
  void SetUp() override { Build(nullptr); }
  // The server, requiring `tokens` where not null.
  void Build(const TokenSet* tokens) {
    metrics_ = *Metrics::Create("");
    compiler_ = std::make_unique<FakeCompiler>(std::chrono::milliseconds(0));
    StoreOptions so;
    so.path = service_testing::TestStorePath();
    store_ = *Store::Open(so);
    PipelineDeps deps;
    deps.compiler = compiler_.get();
    deps.store = store_.get();
    deps.metrics = metrics_.get();
    pipeline_ = std::make_unique<Pipeline>(std::move(deps), PipelineOptions{});
    ServiceOptions opts;
    opts.metrics = metrics_.get();
    opts.tokens = tokens;
    service_ = std::make_unique<KernelServiceImpl>(pipeline_.get(), opts);
    service_testing::LoopbackExtras extras;
    // One server a generic service: each Build registers its own.
    extras.generic = generics_.emplace_back(std::make_unique<DrainingGenericService>()).get();
    extras.interceptors = ServerInterceptors(metrics_.get(), tokens);
    server_ = std::make_unique<service_testing::LoopbackServer>(service_.get(), std::move(extras));
    stub_ = std::make_unique<grpc::GenericStub>(server_->channel());
  }
  void TearDown() override {
    server_.reset();
    if (service_) service_->Drain();
  }

  grpc::Status Unary(const std::string& method, const std::string& bytes, grpc::ByteBuffer* response,
                     const std::string& authorization = "") {
    grpc::ClientContext ctx;
    if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
    grpc::ByteBuffer request = Bytes(bytes);
    grpc::Status status;
    absl::Notification done;
    stub_->UnaryCall(&ctx, absl::StrCat("/kfuse.v1.KernelService/", method), grpc::StubOptions(), &request, response,
                     [&](grpc::Status s) {
                       status = std::move(s);
                       done.Notify();
                     });
    done.WaitForNotification();
    return status;
  }

  // A streaming call to `method` (the full path): sends `bytes` (nothing
  // where null), closes its side, reads to the end; the messages read in
  // *messages.
  grpc::Status Stream(const std::string& method, const std::string* bytes, int* messages) {
    grpc::ClientContext ctx;
    grpc::CompletionQueue cq;
    auto call = stub_->PrepareCall(&ctx, method, &cq);
    void* tag;
    bool ok;
    auto step = [&](int t) {
      EXPECT_TRUE(cq.Next(&tag, &ok));
      EXPECT_EQ(tag, reinterpret_cast<void*>(t));
      return ok;
    };
    call->StartCall(reinterpret_cast<void*>(1));
    step(1);
    if (bytes != nullptr) {
      grpc::ByteBuffer request = Bytes(*bytes);
      call->WriteLast(request, grpc::WriteOptions(), reinterpret_cast<void*>(2));
    } else {
      call->WritesDone(reinterpret_cast<void*>(2));
    }
    step(2);
    *messages = 0;
    grpc::ByteBuffer response;
    for (;;) {
      call->Read(&response, reinterpret_cast<void*>(3));
      if (!step(3)) break;
      ++*messages;
    }
    grpc::Status status;
    call->Finish(&status, reinterpret_cast<void*>(4));
    step(4);
    return status;
  }

  // kfuse_requests_total for `rpc` and `code`, 0 when absent.
  int Requests(const std::string& rpc, const std::string& code) {
    const std::string prefix = absl::StrCat("kfuse_requests_total{code=\"", code, "\",rpc=\"", rpc, "\"} ");
    for (absl::string_view line : absl::StrSplit(metrics_->Text(), '\n')) {
      if (absl::ConsumePrefix(&line, prefix)) return std::stoi(std::string(line));
    }
    return 0;
  }

  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<FakeCompiler> compiler_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Pipeline> pipeline_;
  std::unique_ptr<KernelServiceImpl> service_;
  // Registered services outlive their server.
  std::vector<std::unique_ptr<DrainingGenericService>> generics_;
  std::unique_ptr<service_testing::LoopbackServer> server_;
  std::unique_ptr<grpc::GenericStub> stub_;
};

// Field 1 with a length of 2^32 - 1: past the end of the message.
const char kTruncated[] = "\x0a\xff\xff\xff\xff\x0f\x01\x02";

TEST_F(InterceptorsTest, UnparseableUnaryRequestIsInvalidArgumentNamingTheMethodAndType) {
  grpc::ByteBuffer response;
  grpc::Status s = Unary("Compile", std::string(kTruncated, sizeof(kTruncated) - 1), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("/kfuse.v1.KernelService/Compile"));
  EXPECT_THAT(s.error_message(), HasSubstr("kfuse.v1.CompileRequest"));
  s = Unary("ListKernels", std::string(kTruncated, sizeof(kTruncated) - 1), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("kfuse.v1.ListKernelsRequest"));
  // The metrics count the code the client received.
  EXPECT_EQ(Requests("Compile", "INVALID_ARGUMENT"), 1);
  EXPECT_EQ(Requests("Compile", "UNIMPLEMENTED"), 0);
}

TEST_F(InterceptorsTest, NonUtf8StringIsInvalidArgument) {
  // CompileRequest.request_id holding two bytes that are not UTF-8.
  const google::protobuf::FieldDescriptor* id = v1::CompileRequest::descriptor()->FindFieldByName("request_id");
  ASSERT_NE(id, nullptr);
  ASSERT_EQ(id->type(), google::protobuf::FieldDescriptor::TYPE_STRING);
  std::string bytes;
  bytes.push_back(static_cast<char>(id->number() << 3 | 2));
  bytes += "\x02\xff\xfe";
  grpc::ByteBuffer response;
  grpc::Status s = Unary("Compile", bytes, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("does not parse as a kfuse.v1.CompileRequest"));
}

TEST_F(InterceptorsTest, UnparseableStreamingRequestIsInvalidArgument) {
  const std::string truncated(kTruncated, sizeof(kTruncated) - 1);
  for (const char* method : {"Tune", "ExportKernels"}) {
    int messages = -1;
    grpc::Status s = Stream(absl::StrCat("/kfuse.v1.KernelService/", method), &truncated, &messages);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(method));
    EXPECT_EQ(messages, 0) << method;
  }
}

TEST_F(InterceptorsTest, MissingRequestIsInvalidArgument) {
  // The client closes its side without sending the one request message.
  for (const char* method : {"ListKernels", "ExportKernels"}) {
    int messages = -1;
    grpc::Status s = Stream(absl::StrCat("/kfuse.v1.KernelService/", method), nullptr, &messages);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("is missing or does not parse"));
  }
}

TEST_F(InterceptorsTest, ParseableRequestsAreUntouched) {
  // An empty ListKernelsRequest lists the (empty) store; an empty
  // CompileRequest is refused by the service itself, naming its field.
  grpc::ByteBuffer response;
  grpc::Status s = Unary("ListKernels", "", &response);
  EXPECT_TRUE(s.ok()) << s.error_message();
  s = Unary("Compile", "", &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), ::testing::Not(HasSubstr("does not parse")));
  v1::CompileRequest good = service_testing::ScaledActivation(v1::OP_RELU, 2.0);
  s = Unary("Compile", good.SerializeAsString(), &response);
  EXPECT_TRUE(s.ok()) << s.error_message();
  int messages = 0;
  const std::string tune = good.SerializeAsString();
  s = Stream("/kfuse.v1.KernelService/Tune", &tune, &messages);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_GE(messages, 1);
  // A bidi stream's end (no message at its last read) is not a parse failure.
  const std::string truncated(kTruncated, sizeof(kTruncated) - 1);
  s = Stream("/test.Drain/Bidi", &truncated, &messages);
  EXPECT_TRUE(s.ok()) << s.error_code() << ": " << s.error_message();
  EXPECT_EQ(Requests("ListKernels", "OK"), 1);
}

// With tokens required, a caller without a valid one is UNAUTHENTICATED
// whatever it sends: a message that does not parse tells it no more than
// one that does. With the token, the parse failure is named as before.
TEST_F(InterceptorsTest, AMalformedRequestWithoutAValidTokenIsUnauthenticated) {
  TearDown();
  absl::StatusOr<TokenSet> tokens = TokenSet::FromText("interceptor-test-token-0123\n");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  Build(&*tokens);
  const std::string truncated(kTruncated, sizeof(kTruncated) - 1);
  grpc::ByteBuffer response;
  for (const std::string& bytes : {truncated, std::string()}) {
    for (const char* authorization : {"", "Bearer wrong-token-0123456789abcdef"}) {
      grpc::Status s = Unary("ImportKernels", bytes, &response, authorization);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
      EXPECT_THAT(s.error_message(), ::testing::Not(HasSubstr("parse")));
    }
  }
  // No message at all, on server-streaming methods: the interceptor's case.
  for (const char* method : {"Tune", "ExportKernels"}) {
    int messages = -1;
    grpc::Status s = Stream(absl::StrCat("/kfuse.v1.KernelService/", method), nullptr, &messages);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << method << ": " << s.error_message();
    grpc::Status t = Stream(absl::StrCat("/kfuse.v1.KernelService/", method), &truncated, &messages);
    EXPECT_EQ(t.error_code(), grpc::StatusCode::UNAUTHENTICATED) << method << ": " << t.error_message();
  }
  grpc::Status s = Unary("Compile", truncated, &response, "Bearer interceptor-test-token-0123");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("does not parse as a kfuse.v1.CompileRequest"));
  EXPECT_EQ(Requests("ImportKernels", "UNAUTHENTICATED"), 4);
}

TEST(MalformedRequestMessageTest, NamesTheTypeWhereKnown) {
  EXPECT_THAT(MalformedRequestMessage("/kfuse.v1.KernelService/GetDeviceInfo"),
              HasSubstr("a kfuse.v1.GetDeviceInfoRequest"));
  EXPECT_THAT(MalformedRequestMessage("/no.Such/Method"), HasSubstr("its request message"));
  EXPECT_THAT(MalformedRequestMessage(""), HasSubstr("this method"));
}

}  // namespace
}  // namespace kfuse
