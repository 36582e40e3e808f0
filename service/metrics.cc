#include "service/metrics.h"

#include <grpcpp/support/status.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <array>
#include <atomic>
#include <exception>
#include <functional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace kfuse {
namespace {

// A bug that invents label values (a request string, an error message) must
// not grow the registry without bound: past this many distinct values of one
// label, new values count under "other".
constexpr size_t kMaxLabelValues = 64;
constexpr size_t kMaxLabelValueBytes = 64;
constexpr char kOther[] = "other";

// A gauge without labels that exists only once set (a fleet gauge is absent
// on a node without a fleet store).
class LazyGauge {
 public:
  explicit LazyGauge(prometheus::Family<prometheus::Gauge>& family) : family_(family) {}

  void Set(double v) {
    prometheus::Gauge* gauge = gauge_.load(std::memory_order_acquire);
    if (gauge == nullptr) {
      absl::MutexLock lock(&mu_);
      gauge = gauge_.load(std::memory_order_acquire);
      if (gauge == nullptr) {
        gauge = &family_.Add({});
        gauge_.store(gauge, std::memory_order_release);
      }
    }
    gauge->Set(v);
  }

 private:
  prometheus::Family<prometheus::Gauge>& family_;
  absl::Mutex mu_;
  std::atomic<prometheus::Gauge*> gauge_{nullptr};
};

// One family's children by label values, so the hot path is a hash lookup
// under a reader lock, with no label map built. One or two labels.
template <typename T>
class Children {
 public:
  using Key = std::pair<absl::string_view, absl::string_view>;

  Children(prometheus::Family<T>& family, std::vector<std::string> names,
           std::function<T&(prometheus::Family<T>&, const prometheus::Labels&)> add)
      : family_(family), names_(std::move(names)), add_(std::move(add)), seen_(names_.size()) {}

  T& Get(absl::string_view a, absl::string_view b = {}) {
    {
      absl::ReaderMutexLock lock(&mu_);
      auto it = children_.find(Key(a, b));
      if (it != children_.end()) return *it->second;
    }
    absl::MutexLock lock(&mu_);
    std::string values[2] = {Admit(0, a), names_.size() > 1 ? Admit(1, b) : std::string()};
    auto it = children_.find(Key(values[0], values[1]));
    if (it != children_.end()) return *it->second;
    prometheus::Labels labels;
    for (size_t i = 0; i < names_.size(); ++i) labels[names_[i]] = values[i];
    T& child = add_(family_, labels);
    children_.emplace(std::make_pair(values[0], values[1]), &child);
    return child;
  }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(Key k) const { return absl::HashOf(k.first, k.second); }
  };
  struct Eq {
    using is_transparent = void;
    bool operator()(Key x, Key y) const { return x == y; }
  };

  // The value to record for label `i`: `value` itself, or "other" once the
  // label has kMaxLabelValues values or when `value` is not a short
  // printable ASCII string.
  std::string Admit(size_t i, absl::string_view value) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    bool printable = !value.empty() && value.size() <= kMaxLabelValueBytes;
    for (char c : value) printable = printable && c > 0x20 && c < 0x7f;
    if (!printable) return kOther;
    std::string v(value);
    if (seen_[i].contains(v)) return v;
    if (seen_[i].size() >= kMaxLabelValues) return kOther;
    seen_[i].insert(v);
    return v;
  }

  prometheus::Family<T>& family_;
  const std::vector<std::string> names_;
  const std::function<T&(prometheus::Family<T>&, const prometheus::Labels&)> add_;
  absl::Mutex mu_;
  std::vector<absl::flat_hash_set<std::string>> seen_ ABSL_GUARDED_BY(mu_);
  // Keys own their strings; lookups take string_views (transparent hash).
  absl::flat_hash_map<std::pair<std::string, std::string>, T*, Hash, Eq> children_ ABSL_GUARDED_BY(mu_);
};

prometheus::Counter& AddCounter(prometheus::Family<prometheus::Counter>& f, const prometheus::Labels& l) {
  return f.Add(l);
}

std::function<prometheus::Histogram&(prometheus::Family<prometheus::Histogram>&, const prometheus::Labels&)>
AddHistogram(prometheus::Histogram::BucketBoundaries buckets) {
  return [buckets](prometheus::Family<prometheus::Histogram>& f,
                   const prometheus::Labels& l) -> prometheus::Histogram& { return f.Add(l, buckets); };
}

prometheus::Family<prometheus::Counter>& CounterFamily(prometheus::Registry& r, const std::string& name,
                                                       const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r);
}

prometheus::Family<prometheus::Gauge>& GaugeFamily(prometheus::Registry& r, const std::string& name,
                                                   const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r);
}

prometheus::Family<prometheus::Histogram>& HistogramFamily(prometheus::Registry& r, const std::string& name,
                                                           const std::string& help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(r);
}

// The canonical names of grpc::StatusCode, by value.
constexpr std::array<const char*, 17> kCodeNames = {
    "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};

const char* CodeName(grpc::StatusCode code) {
  int i = static_cast<int>(code);
  return i >= 0 && i < static_cast<int>(kCodeNames.size()) ? kCodeNames[i] : "UNKNOWN";
}

// "/kfuse.v1.KernelService/Compile" -> "Compile"; null or empty -> "unknown".
std::string ShortMethodName(const char* method) {
  absl::string_view m = method == nullptr ? absl::string_view() : absl::string_view(method);
  size_t slash = m.rfind('/');
  if (slash != absl::string_view::npos) m.remove_prefix(slash + 1);
  return m.empty() ? "unknown" : std::string(m);
}

// Counts one RPC when its status goes out. A call destroyed without ever
// sending one (the server shut down under it) counts as CANCELLED.
class RequestInterceptor : public grpc::experimental::Interceptor {
 public:
  RequestInterceptor(Metrics* metrics, std::string rpc) : metrics_(metrics), rpc_(std::move(rpc)) {}
  ~RequestInterceptor() override {
    if (!counted_) metrics_->Request(rpc_, "CANCELLED");
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (!counted_ &&
        methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      counted_ = true;
      metrics_->Request(rpc_, CodeName(methods->GetSendStatus().error_code()));
    }
    methods->Proceed();
  }

 private:
  Metrics* metrics_;
  const std::string rpc_;
  bool counted_ = false;
};

class RequestInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RequestInterceptorFactory(Metrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    return new RequestInterceptor(metrics_, ShortMethodName(info->method()));
  }

 private:
  Metrics* metrics_;
};

}  // namespace

struct Metrics::Impl {
  Impl()
      : registry(std::make_shared<prometheus::Registry>()),
        requests(CounterFamily(*registry, "kfuse_requests_total", "Finished RPCs by method and status code."),
                 {"rpc", "code"}, AddCounter),
        lookups(CounterFamily(*registry, "kfuse_lookups_total", "Plan lookups by cache tier and result."),
                {"tier", "result"}, AddCounter),
        compile(HistogramFamily(*registry, "kfuse_compile_seconds", "NVRTC compile time of one kernel.")
                    .Add({}, prometheus::Histogram::BucketBoundaries{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                                                     2.5, 5, 10, 30})),
        tuning(HistogramFamily(*registry, "kfuse_tuning_seconds",
                               "Time of one whole build (compile, check and timing of every kernel of a "
                               "plan), by how it ended."),
               {"how"}, AddHistogram({0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600})),
        queue_depth_family(GaugeFamily(*registry, "kfuse_queue_depth",
                                       "Jobs waiting for a worker thread, by pool.")),
        queue_depth_calls(queue_depth_family.Add({{"pool", "calls"}})),
        queue_depth_background(queue_depth_family.Add({{"pool", "background"}})),
        jobs_running(
            GaugeFamily(*registry, "kfuse_jobs_running", "Jobs running on a worker thread.").Add({})),
        verification_failures(CounterFamily(*registry, "kfuse_verification_failures_total",
                                            "Plans or blobs rejected by a signature, key, hash or check."),
                              {"what"}, AddCounter),
        trials(CounterFamily(*registry, "kfuse_trials_total", "Tuning trials by outcome."), {"outcome"},
               AddCounter),
        tuning_available(GaugeFamily(*registry, "kfuse_tuning_available",
                                     "1 while a GPU of this node can take a tuning task, 0 otherwise.")
                             .Add({})),
        fleet_up(GaugeFamily(*registry, "kfuse_fleet_up", "1 while the fleet store answers, 0 while it does not.")),
        fleet_writable(GaugeFamily(*registry, "kfuse_fleet_writable",
                                   "1 while this node publishes to the fleet store, 0 while it reads only.")),
        fleet_errors(CounterFamily(*registry, "kfuse_fleet_errors_total", "Failed fleet store operations."),
                     {"op"}, AddCounter),
        fleet_leases(CounterFamily(*registry, "kfuse_fleet_leases_total", "Fleet tuning leases by outcome."),
                     {"result"}, AddCounter),
        background_tunes(CounterFamily(*registry, "kfuse_background_tunes_total",
                                       "Cold starts answered with the heuristic kernel while tuning went on.")
                             .Add({})),
        store_errors(CounterFamily(*registry, "kfuse_store_errors_total",
                                   "Entries the local store could not keep, by operation."),
                     {"op"}, AddCounter) {}

  std::shared_ptr<prometheus::Registry> registry;
  Children<prometheus::Counter> requests;
  Children<prometheus::Counter> lookups;
  prometheus::Histogram& compile;
  Children<prometheus::Histogram> tuning;
  prometheus::Family<prometheus::Gauge>& queue_depth_family;
  prometheus::Gauge& queue_depth_calls;
  prometheus::Gauge& queue_depth_background;
  prometheus::Gauge& jobs_running;
  Children<prometheus::Counter> verification_failures;
  Children<prometheus::Counter> trials;
  prometheus::Gauge& tuning_available;
  LazyGauge fleet_up;
  LazyGauge fleet_writable;
  Children<prometheus::Counter> fleet_errors;
  Children<prometheus::Counter> fleet_leases;
  prometheus::Counter& background_tunes;
  Children<prometheus::Counter> store_errors;
  // Last, so it stops serving before the registry goes.
  std::unique_ptr<prometheus::Exposer> exposer;
};

Metrics::Metrics() : impl_(std::make_unique<Impl>()) {}
Metrics::~Metrics() = default;

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::Create(const std::string& listen_address) {
  std::unique_ptr<Metrics> m(new Metrics());
  if (listen_address.empty()) return m;
  try {
    m->impl_->exposer = std::make_unique<prometheus::Exposer>(listen_address, /*num_threads=*/2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("metrics: cannot serve /metrics on \"", listen_address, "\": ", e.what()));
  }
  m->impl_->exposer->RegisterCollectable(m->impl_->registry);
  return m;
}

void Metrics::Request(absl::string_view rpc, absl::string_view code) {
  impl_->requests.Get(rpc, code).Increment();
}

void Metrics::Lookup(absl::string_view tier, bool hit) {
  impl_->lookups.Get(tier, hit ? "hit" : "miss").Increment();
}

void Metrics::Joined() { impl_->lookups.Get("job", "joined").Increment(); }

void Metrics::FleetArrived() { impl_->lookups.Get("fleet", "arrived").Increment(); }

void Metrics::CompileSeconds(double seconds) { impl_->compile.Observe(seconds); }

void Metrics::BuildSeconds(absl::string_view how, double seconds) { impl_->tuning.Get(how).Observe(seconds); }

void Metrics::SetQueueDepth(bool background, int jobs) {
  (background ? impl_->queue_depth_background : impl_->queue_depth_calls).Set(jobs);
}

void Metrics::SetJobsRunning(int jobs) { impl_->jobs_running.Set(jobs); }

void Metrics::VerificationFailure(absl::string_view what) {
  impl_->verification_failures.Get(what).Increment();
}

void Metrics::Trial(absl::string_view outcome) { impl_->trials.Get(outcome).Increment(); }

void Metrics::SetTuningAvailable(bool available) { impl_->tuning_available.Set(available ? 1 : 0); }

void Metrics::SetFleetUp(bool up) { impl_->fleet_up.Set(up ? 1 : 0); }

void Metrics::SetFleetWritable(bool writable) { impl_->fleet_writable.Set(writable ? 1 : 0); }

void Metrics::FleetError(absl::string_view op) { impl_->fleet_errors.Get(op).Increment(); }

void Metrics::FleetLease(absl::string_view result) { impl_->fleet_leases.Get(result).Increment(); }

void Metrics::BackgroundTune() { impl_->background_tunes.Increment(); }

void Metrics::StoreError(absl::string_view op) { impl_->store_errors.Get(op).Increment(); }

std::string Metrics::Text() const {
  return prometheus::TextSerializer().Serialize(impl_->registry->Collect());
}

int Metrics::ListeningPort() const {
  if (impl_->exposer == nullptr) return 0;
  std::vector<int> ports = impl_->exposer->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> Metrics::Interceptors() {
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> v;
  v.push_back(std::make_unique<RequestInterceptorFactory>(this));
  return v;
}

Metrics& NullMetrics() {
  static Metrics* const metrics = Metrics::Create("").value().release();
  return *metrics;
}

}  // namespace kfuse
