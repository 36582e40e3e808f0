#include "cache/fleet_hosts.h"

#include <arpa/inet.h>
#include <libpq-fe.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"

namespace kfuse {
namespace {

// The DSN's value of `keyword`, else the environment's (`env`); empty for
// neither.
std::string Setting(const PQconninfoOption* options, const char* keyword, const char* env) {
  for (const PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (std::string(o->keyword) == keyword && o->val != nullptr) return o->val;
  }
  const char* v = std::getenv(env);
  return v != nullptr ? v : "";
}

// A host libpq reaches without a lookup: a socket directory (or an abstract
// socket), the default socket, or a numeric address.
bool NeedsNoLookup(const std::string& host) {
  if (host.empty() || host[0] == '/' || host[0] == '@') return true;
  unsigned char addr[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, host.c_str(), addr) == 1 || inet_pton(AF_INET6, host.c_str(), addr) == 1;
}

// The lookups under way: what each name gave, and how many are still out.
struct Lookups {
  absl::Mutex mu;
  std::map<std::string, absl::StatusOr<std::vector<std::string>>> done ABSL_GUARDED_BY(mu);
  size_t left ABSL_GUARDED_BY(mu) = 0;
};

}  // namespace

absl::StatusOr<std::vector<std::string>> LookUpHost(const std::string& host) {
  struct addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot look up host \"", host, "\": ", rc == EAI_SYSTEM ? "system error" : gai_strerror(rc)));
  }
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const struct addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw = a->ai_family == AF_INET
                          ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr)
                          : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr);
    if ((a->ai_family != AF_INET && a->ai_family != AF_INET6) ||
        inet_ntop(a->ai_family, raw, text, sizeof(text)) == nullptr) {
      continue;
    }
    if (seen.insert(text).second) out.push_back(text);
  }
  freeaddrinfo(found);
  if (out.empty()) return absl::UnavailableError(absl::StrCat("host \"", host, "\" has no address"));
  return out;
}

absl::StatusOr<std::optional<HostKeywords>> LookUpHosts(const std::string& dsn, absl::Duration timeout,
                                                        const HostResolver& resolve) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(dsn.c_str(), &error);
  if (options == nullptr) {
    PQfreemem(error);
    return std::nullopt;  // libpq says what is wrong with it.
  }
  const std::string host = Setting(options, "host", "PGHOST");
  const std::string hostaddr = Setting(options, "hostaddr", "PGHOSTADDR");
  const std::string port = Setting(options, "port", "PGPORT");
  const std::string service = Setting(options, "service", "PGSERVICE");
  PQconninfoFree(options);
  if (!hostaddr.empty() || !service.empty()) return std::nullopt;

  const std::vector<std::string> hosts = absl::StrSplit(host, ',');
  const std::vector<std::string> ports =
      port.empty() ? std::vector<std::string>() : std::vector<std::string>(absl::StrSplit(port, ','));
  if (ports.size() > 1 && ports.size() != hosts.size()) return std::nullopt;
  std::set<std::string> names;
  for (const std::string& h : hosts) {
    if (!NeedsNoLookup(h)) names.insert(h);
  }
  if (names.empty()) return std::nullopt;

  // Each name on a thread of its own, which holds what it needs: one that
  // outlives the wait finishes into state nobody reads.
  auto lookups = std::make_shared<Lookups>();
  {
    absl::MutexLock lock(&lookups->mu);
    lookups->left = names.size();
  }
  for (const std::string& name : names) {
    try {
      std::thread([lookups, resolve, name] {
        absl::StatusOr<std::vector<std::string>> r = resolve(name);
        absl::MutexLock lock(&lookups->mu);
        lookups->done.emplace(name, std::move(r));
        --lookups->left;
      }).detach();
    } catch (const std::system_error& e) {  // Out of threads: an outage like any other.
      return absl::UnavailableError(absl::StrCat("cannot start a thread to look up host \"", name, "\": ", e.what()));
    }
  }
  absl::MutexLock lock(&lookups->mu);
  const auto all_done = [](size_t* left) { return *left == 0; };
  if (!lookups->mu.AwaitWithTimeout(absl::Condition(+all_done, &lookups->left), timeout)) {
    std::vector<std::string> waiting;
    for (const std::string& name : names) {
      if (lookups->done.count(name) == 0) waiting.push_back(absl::StrCat("\"", name, "\""));
    }
    return absl::UnavailableError(absl::StrCat("looking up host ", absl::StrJoin(waiting, ", "), " took more than ",
                                               absl::FormatDuration(timeout), " (the connect timeout)"));
  }

  HostKeywords out;
  std::vector<std::string> out_hosts, out_addrs, out_ports;
  absl::Status first_failure;
  for (size_t i = 0; i < hosts.size(); ++i) {
    std::vector<std::string> addrs = {""};
    if (!NeedsNoLookup(hosts[i])) {
      const absl::StatusOr<std::vector<std::string>>& r = lookups->done.at(hosts[i]);
      if (!r.ok() || r->empty()) {
        if (first_failure.ok()) {
          first_failure = r.ok() ? absl::UnavailableError(absl::StrCat("host \"", hosts[i], "\" has no address"))
                                 : r.status();
        }
        continue;
      }
      addrs = *r;
    }
    for (const std::string& a : addrs) {
      out_hosts.push_back(hosts[i]);
      out_addrs.push_back(a);
      if (ports.size() > 1) out_ports.push_back(ports[i]);
    }
  }
  if (out_hosts.empty()) return first_failure;
  out.host = absl::StrJoin(out_hosts, ",");
  out.hostaddr = absl::StrJoin(out_addrs, ",");
  if (!out_ports.empty()) out.port = absl::StrJoin(out_ports, ",");
  return out;
}

}  // namespace kfuse
