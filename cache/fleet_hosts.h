// The fleet store's host names, looked up within the connect timeout. libpq
// looks a host name up itself, with a blocking getaddrinfo that its
// connect_timeout does not bound, so a resolver that stops answering held a
// fleet call as long as the resolver's own retries (tens of seconds).
// FleetStore looks the names up here instead and hands libpq the numeric
// addresses (hostaddr), keeping each name in host, where TLS verification
// and authentication read it.
//
//   KFUSE_ASSIGN_OR_RETURN(std::optional<HostKeywords> hosts,
//                          LookUpHosts(dsn, absl::Seconds(2), LookUpHost));
//   if (hosts) { /* give host, hostaddr (and port) after the DSN */ }
#ifndef KFUSE_CACHE_FLEET_HOSTS_H_
#define KFUSE_CACHE_FLEET_HOSTS_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kfuse {

// A host name's numeric addresses, in the order to try them.
using HostResolver = std::function<absl::StatusOr<std::vector<std::string>>(const std::string& host)>;

// getaddrinfo for TCP: each address once, in its order. Unavailable (with
// the resolver's words) when the name has none or the lookup failed.
absl::StatusOr<std::vector<std::string>> LookUpHost(const std::string& host);

// libpq keywords that, given after the DSN, leave it no lookup to make:
// `host` repeats each name once for each of its addresses, which `hostaddr`
// lists beside it (empty beside a socket or a numeric address); `port`
// follows the hosts where the DSN gives one port each.
struct HostKeywords {
  std::string host;
  std::string hostaddr;
  std::optional<std::string> port;
};

// The names of `dsn`'s hosts (or PGHOST's) looked up with `resolve`, all at
// once. A name whose lookup fails is dropped while another host is left, as
// libpq goes on to the next host; Unavailable when none is left, or when a
// lookup has not answered within `timeout` (its thread is left to finish on
// its own). nullopt where there is nothing to look up (sockets and numeric
// addresses only, hostaddr given) or the hosts are not known here (a
// service file's, a DSN libpq will refuse itself).
absl::StatusOr<std::optional<HostKeywords>> LookUpHosts(const std::string& dsn, absl::Duration timeout,
                                                        const HostResolver& resolve);

}  // namespace kfuse

#endif  // KFUSE_CACHE_FLEET_HOSTS_H_
